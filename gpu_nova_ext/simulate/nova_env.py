# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""Nova's own scheduling code, driven in process by the simulator.

What nova-api, nova-conductor and nova-scheduler do for a boot, minus the
databases and the RPC between them:

* the flavor is a real ``nova.objects.Flavor``, its extra specs pass nova-api's
  extra spec validators (``gpu:`` included, through our validator plugin);
* the ``RequestSpec`` is built as nova-api builds it
  (``RequestSpec.from_components`` with the flavor's PCI requests);
* Nova's request filters (``nova.scheduler.request_filter``) that need no
  database run; the Placement query comes from
  ``nova.scheduler.utils.resources_from_request_spec`` and is sent, and the
  winner claimed, by Nova's ``SchedulerReportClient`` and
  ``nova.scheduler.utils.claim_resources``;
* each candidate host is a ``nova.scheduler.host_manager.HostState`` updated
  from a ``ComputeNode`` record (as the resource tracker would have saved
  it) with its ``allocation_candidates`` set as ``SchedulerManager._schedule``
  sets them;
* filters and weighers are loaded and run by Nova's ``HostFilterHandler``
  and ``HostWeightHandler`` from ``[filter_scheduler]`` options, with the
  same sorting, ``host_subset_size`` choice and ``consume_from_request``
  (:mod:`gpu_nova_ext.simulate.nova_handlers`).

Nova's options live on the global ``nova.conf.CONF``; :class:`NovaConfig`
sets the scenario's ``nova_conf:`` there as overrides and clears them when
the simulation ends.
"""
import functools
import json
from typing import Any
import uuid
import warnings

import os_traits
from oslo_config import cfg

from gpu_nova_ext import conf as gconf
from gpu_nova_ext.operator import scale_settings
from gpu_nova_ext.simulate import reservations
from gpu_nova_ext.simulate import scenario as scn

NOVA_FILTERS = 'nova.scheduler.filters.all_filters'
GPU_FILTERS = 'gpu_nova_ext.scheduler.filters.all_filters'
NOVA_WEIGHERS = 'nova.scheduler.weights.all_weighers'
GPU_WEIGHERS = 'gpu_nova_ext.scheduler.weighers.all_weighers'
GPU_FILTER_NAMES = ['GpuModelFilter', 'GpuMemoryFilter',
                    'GpuCapabilityFilter', 'GpuHealthFilter',
                    'GpuReservationFilter', 'GpuCandidateOrderFilter']
# Nova needs PciPassthroughFilter for flavors with pci_passthrough:alias,
# PCI in Placement or not (nova's PCI passthrough guide).
PCI_FILTER = 'PciPassthroughFilter'
# Request filters that read Nova's databases (compute service versions);
# see :func:`prefilter`.
DB_REQUEST_FILTERS = ('owner_nova_filter',)

PROJECT_ID = 'simulator'
USER_ID = 'simulator'


@functools.cache
def _nova():
    """Import Nova lazily: the rest of gpu_nova_ext does not need it."""
    with warnings.catch_warnings():
        # eventlet, imported by some of Nova's dependencies, warns that it
        # is deprecated; the simulator does not use it.
        warnings.simplefilter('ignore', DeprecationWarning)
        import nova.conf
        from nova import objects
    objects.register_all()
    return nova.conf.CONF


class NovaConfig:
    """The scenario's ``nova_conf:`` applied to Nova's global CONF.

    Defaults added here (each can be overridden by the scenario):

    * ``[filter_scheduler] available_filters``: Nova's and ours;
      ``enabled_filters``: Nova's default list, ``PciPassthroughFilter``
      and every GPU filter; ``weight_classes``: Nova's and ours;
      ``pci_in_placement = True`` (passthrough GPUs are PCI-in-Placement
      providers here);
    * ``[gpu_scheduler] state_listener = False``: the simulator feeds the
      state cache through its own ``fake://`` state server;
    * ``[scheduler] max_placement_results``: what we recommend
      (:mod:`gpu_nova_ext.operator.scale_settings`) unless the scenario
      says ``placement_conf: stock``.
    """

    def __init__(self, scenario: scn.Scenario):
        self.scenario = scenario
        self.conf = _nova()
        gconf.register_nova_opts(self.conf)
        self._overrides: list[tuple[str, str | None]] = []

    def apply(self) -> None:
        conf = self.conf
        nova_defaults = list(conf.filter_scheduler.enabled_filters)
        # --compare's "nova" policy: Nova's own filters and weighers only
        ours = getattr(self.scenario, 'gpu_plugins', True)
        defaults = {
            'filter_scheduler': {
                'available_filters': [NOVA_FILTERS, GPU_FILTERS],
                'enabled_filters': (
                    nova_defaults + [PCI_FILTER] +
                    (GPU_FILTER_NAMES if ours else []) +
                    reservations.extra_filters(self.scenario)),
                'weight_classes': [NOVA_WEIGHERS] + (
                    [GPU_WEIGHERS] if ours else []),
                'pci_in_placement': True,
            },
            'gpu_scheduler': {'state_listener': False},
        }
        if getattr(self.scenario, 'recommended', True):
            # what operator/scale_settings.py recommends (placement_conf:
            # stock leaves Nova's stock limit)
            for (group, name), value in scale_settings.NOVA.items():
                defaults.setdefault(group, {})[name] = value
        for group, opts in defaults.items():
            for name, value in opts.items():
                self._set(name, value, group)
        for group, opts in self.scenario.nova_conf.items():
            for name, value in opts.items():
                self._set_from_scenario(group, name, value)
        _clear_nova_caches()

    def set(self, name: str, value: Any, group: str | None) -> None:
        """Override one option until :meth:`restore`."""
        self.conf.set_override(name, value, group)
        self._overrides.append((name, group))

    _set = set

    def _set_from_scenario(self, group: str, name: str, value: Any) -> None:
        entry = 'nova_conf.%s.%s' % (group, name)
        conf_group = None if group == 'DEFAULT' else group
        if group == 'pci' and name in ('alias', 'device_spec'):
            # written as YAML mappings for readability: nova wants JSON
            items = value if isinstance(value, list) else [value]
            value = [v if isinstance(v, str) else json.dumps(v)
                     for v in items]
        try:
            self._set(name, value, conf_group)
            # set_override converts; reading it back checks bounds/choices
            getattr(self.conf if conf_group is None
                    else getattr(self.conf, conf_group), name)
        except (cfg.NoSuchOptError, cfg.NoSuchGroupError):
            raise self.scenario.error(
                entry, 'Nova has no option [%s] %s. Check the group and '
                'option names in nova.conf.sample (or ours in '
                'etc/gpu-nova-ext/nova.conf.sample).' % (group, name))
        except (ValueError, TypeError, cfg.Error) as exc:
            raise self.scenario.error(
                entry, 'bad value %r: %s. Use a value of the option\'s type '
                '(see its help in nova.conf.sample).' % (value, exc))

    def restore(self) -> None:
        for name, group in reversed(self._overrides):
            try:
                self.conf.clear_override(name, group)
            except cfg.Error:
                pass
        self._overrides = []
        _clear_nova_caches()


def _clear_nova_caches() -> None:
    """Forget what Nova memoized from options (as Nova's tests do)."""
    from nova.pci import request as pci_request
    pci_request.get_alias_from_config.cache_clear()


def check_flavors(scenario: scn.Scenario) -> None:
    """Validate every flavor as nova-api (microversion >= 2.86) would.

    Runs Nova's extra spec validators (ours for ``gpu:`` among them) and
    turns each PCI alias into PCI requests as nova-api does at boot, so a
    bad key, value or undefined alias stops the scenario before any boot.
    """
    _nova()
    from nova.api.validation.extra_specs import validators
    from nova import exception as nova_exc
    for name, flavor in scenario.flavors.items():
        for key, value in flavor.extra_specs.items():
            try:
                validators.validate(key, value)
            except nova_exc.ValidationError as exc:
                raise scenario.error(
                    'flavors (%s).extra_specs[%s]' % (name, key),
                    'nova-api would reject it: %s Fix the key or value.'
                    % exc.format_message())
        try:
            _pci_requests(make_flavor(flavor))
        except (nova_exc.PciRequestAliasNotDefined,
                nova_exc.PciInvalidAlias, nova_exc.Invalid) as exc:
            raise scenario.error(
                'flavors (%s).extra_specs' % name,
                '%s. Define the alias under nova_conf: pci: alias: (name, '
                'resource_class) or fix the extra spec.'
                % exc.format_message())


def make_flavor(flavor: scn.Flavor, flavor_id: int = 1) -> Any:
    """A ``nova.objects.Flavor`` as nova-api stores it."""
    _nova()
    from nova import objects
    return objects.Flavor(
        id=flavor_id, flavorid=flavor.name, name=flavor.name,
        vcpus=flavor.vcpus, memory_mb=flavor.ram_mb,
        root_gb=flavor.disk_gb, ephemeral_gb=0, swap=0,
        rxtx_factor=1.0, vcpu_weight=0, is_public=True, disabled=False,
        extra_specs=dict(flavor.extra_specs), description=None)


def _pci_requests(flavor):
    from nova.pci import request as pci_request
    return pci_request.get_pci_requests_from_flavor(flavor)


def admin_context() -> Any:
    """A ``nova.context.RequestContext`` of the simulator's project."""
    _nova()
    from nova import context as nova_context
    return nova_context.RequestContext(
        user_id=USER_ID, project_id=PROJECT_ID, is_admin=True)


def request_spec(ctx: Any, flavor: scn.Flavor, instance_uuid: str) -> Any:
    """A RequestSpec as nova-api builds it for a one-server boot."""
    from nova import objects
    nova_flavor = make_flavor(flavor)
    image = objects.ImageMeta(properties=objects.ImageMetaProps())
    spec = objects.RequestSpec.from_components(
        ctx, instance_uuid, image, nova_flavor, None,
        _pci_requests(nova_flavor), {}, None, None,
        project_id=PROJECT_ID, user_id=USER_ID)
    return spec


def prefilter(ctx: Any, spec: Any) -> None:
    """Nova's scheduler request filters (``process_reqspec``).

    ``owner_nova_filter`` asks the cell databases for the minimum
    nova-compute version; the simulated computes are all current Nova, so
    the simulator applies its outcome for that case: ``OWNER_NOVA`` is
    required on the root provider and on PCI request groups.
    """
    from nova.scheduler import request_filter
    for func in request_filter.ALL_REQUEST_FILTERS:
        if getattr(func, '__name__', '') in DB_REQUEST_FILTERS:
            continue
        func(ctx, spec)
    spec.root_required.add(os_traits.OWNER_NOVA)
    pci_ids = {req.request_id for req in spec.pci_requests.requests
               if req.request_id}
    for group in spec.requested_resources or []:
        if (group.requester_id and
                group.requester_id.rsplit('-', 1)[0] in pci_ids):
            group.required_traits.add(os_traits.OWNER_NOVA)


def resource_request(ctx: Any, spec: Any) -> Any:
    """``nova.scheduler.utils.resources_from_request_spec``."""
    from nova.scheduler import utils
    return utils.resources_from_request_spec(ctx, spec, None)


def report_client(endpoint: str, token: str = 'admin',
                  mount: Any = None) -> Any:
    """Nova's SchedulerReportClient talking to ``endpoint`` (noauth2).

    ``mount(session)``, when given, connects the keystoneauth session to
    an in-process Placement (:meth:`EmbeddedPlacement.mount`).
    """
    from keystoneauth1 import adapter
    from keystoneauth1 import session
    from keystoneauth1 import token_endpoint
    from nova.scheduler.client import report
    sess = session.Session(auth=token_endpoint.Token(endpoint, token))
    if mount is not None:
        mount(sess)
    return report.SchedulerReportClient(adapter=adapter.Adapter(
        session=sess, service_type='placement', endpoint_override=endpoint))


def claim(ctx: Any, client: Any, spec: Any, instance_uuid: str,
          alloc_req: dict, version: str) -> bool:
    """``nova.scheduler.utils.claim_resources``: PUT /allocations."""
    from nova.scheduler import utils
    return utils.claim_resources(ctx, client, spec, instance_uuid,
                                 alloc_req,
                                 allocation_request_version=version)


def compute_node(host: scn.Host, root_uuid: str, used: dict[str, int],
                 pci_pools: list[dict[str, Any]]) -> Any:
    """The ComputeNode record nova-compute's resource tracker would save.

    ``used`` holds ``vcpus``, ``memory_mb``, ``disk_gb`` and ``instances``
    consumed by the servers booted on the host so far.
    """
    _nova()
    from nova import objects
    from oslo_utils import timeutils
    pools = objects.PciDevicePoolList(objects=[
        objects.PciDevicePool(
            vendor_id=p['vendor_id'], product_id=p['product_id'],
            numa_node=p.get('numa_node'), count=p['count'],
            tags={k: str(v) for k, v in p.get('tags', {}).items()})
        for p in pci_pools])
    return objects.ComputeNode(
        uuid=root_uuid, host=host.name, hypervisor_hostname=host.name,
        memory_mb=host.memory_mb,
        free_ram_mb=host.memory_mb - used.get('memory_mb', 0),
        memory_mb_used=used.get('memory_mb', 0),
        vcpus=host.vcpus, vcpus_used=used.get('vcpus', 0),
        local_gb=host.disk_gb, local_gb_used=used.get('disk_gb', 0),
        free_disk_gb=host.disk_gb - used.get('disk_gb', 0),
        disk_available_least=host.disk_gb - used.get('disk_gb', 0),
        running_vms=used.get('instances', 0),
        updated_at=timeutils.utcnow(with_timezone=True),
        numa_topology=None, pci_device_pools=pools,
        host_ip='192.0.2.1', hypervisor_type='QEMU',
        hypervisor_version=8002000, cpu_info='{}',
        supported_hv_specs=[], current_workload=0,
        stats={'num_instances': str(used.get('instances', 0))},
        metrics='[]',
        cpu_allocation_ratio=host.cpu_allocation_ratio,
        ram_allocation_ratio=host.ram_allocation_ratio,
        disk_allocation_ratio=host.disk_allocation_ratio)


def aggregates(scenario: scn.Scenario) -> dict[str, list]:
    """Host name -> its ``nova.objects.Aggregate`` objects.

    Hosts that name the same aggregate share it (its metadata is merged in
    host order; the first value of a key wins).
    """
    _nova()
    from nova import objects
    by_name: dict[str, Any] = {}
    out: dict[str, list] = {}
    for host in scenario.hosts:
        for name, metadata in host.aggregates.items():
            agg = by_name.get(name)
            if agg is None:
                agg = by_name[name] = objects.Aggregate(
                    id=len(by_name) + 1, name=name,
                    uuid=str(uuid.uuid5(uuid.NAMESPACE_URL, name)),
                    hosts=[], metadata={})
            agg.hosts.append(host.name)
            for key, value in metadata.items():
                agg.metadata.setdefault(key, value)
            out.setdefault(host.name, []).append(agg)
    return out


def host_state(compute: Any, candidates: list[dict],
               host_aggregates: list | None = None) -> Any:
    """A HostState as HostManager builds it, with its candidates.

    ``SchedulerManager._schedule`` gives each host a deep copy of the
    allocation requests that involve its compute node provider.
    """
    from nova.scheduler import host_manager
    from oslo_utils import timeutils
    state = host_manager.HostState(compute.host, compute.hypervisor_hostname,
                                   'simulated-cell')
    service = {'host': compute.host, 'binary': 'nova-compute',
               'topic': 'compute', 'disabled': False,
               'disabled_reason': None, 'forced_down': False,
               'created_at': timeutils.utcnow(), 'updated_at':
               timeutils.utcnow(), 'last_seen_up': timeutils.utcnow(),
               'version': 70, 'uuid': str(uuid.uuid5(uuid.NAMESPACE_DNS,
                                                     compute.host))}
    state.update(compute, service, list(host_aggregates or []), {})
    set_candidates(state, candidates)
    return state


def _json_copy(value: Any) -> Any:
    """``copy.deepcopy`` of JSON data (dicts, lists, scalars), faster.

    Allocation requests are decoded JSON; at a thousand hosts a request
    copies thousands of them.
    """
    if isinstance(value, dict):
        return {k: _json_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_copy(v) for v in value]
    return value


def set_candidates(state: Any, candidates: list[dict]) -> None:
    """Ready a kept HostState for a request.

    Its allocation candidates: a deep copy of each, as
    ``SchedulerManager._schedule`` gives them (``copy.deepcopy``; filters
    prune them).  Its
    nova-compute service: heard from just now (nova-compute's heartbeat
    runs every ``[DEFAULT] report_interval``; the simulated computes never
    miss one), as HostManager reads it from the database per request.
    """
    from nova.scheduler import host_manager
    from oslo_utils import timeutils
    state.allocation_candidates = _json_copy(candidates)
    now = timeutils.utcnow()
    service = dict(state.service or {})
    service['updated_at'] = service['last_seen_up'] = now
    state.service = host_manager.ReadOnlyDict(service)
