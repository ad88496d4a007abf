"""Play a scenario against real parts and collect where servers landed.

Phases (each reported through the ``progress`` callback):

1. **placement**: an embedded openstack-placement on loopback HTTP
   (:class:`gpu_nova_ext.simulate.embedded.EmbeddedPlacement`).
2. **nova**: the scenario's ``nova_conf:`` on Nova's CONF, flavors checked
   by nova-api's validators, the GPU state cache listening on ``fake://``.
3. **hosts**: per host, the providers nova-compute would create
   (:mod:`gpu_nova_ext.simulate.novalike`), then one real agent cycle:
   discovery through libvirt's test driver plus the ``simulated`` NVML
   source, the Placement reporter writing our traits, the state payload
   fanout-cast over ``fake://`` into the scheduler's state cache.
4. **boots**: per server, Nova's request spec, Placement query, HostStates,
   filters, weighers and claim (:mod:`gpu_nova_ext.simulate.nova_env`).
   The host then looks as it would after nova-compute built the server
   (an mdev more and one ``availableInstances`` less in its libvirt XML,
   its ComputeNode usage up) and its agent runs a cycle again.  An event
   changes a GPU's simulated health or metrics and the agent re-casts.
5. **occupancy**: per GPU provider, usage and capacity read back from
   Placement, health from the state cache.
"""
from collections.abc import Callable
import dataclasses
import os
import shutil
import tempfile
import time
from typing import Any
import uuid
from xml.etree import ElementTree

from oslo_config import cfg
from oslo_log import log as logging
from oslo_messaging import opts as messaging_opts
import yaml

from gpu_nova_ext import conf as gconf
from gpu_nova_ext import exception
from gpu_nova_ext import naming
from gpu_nova_ext.simulate import nova_env
from gpu_nova_ext.simulate import scenario as scn

LOG = logging.getLogger(__name__)

Progress = Callable[[str], None]
# How long to wait for a cast to reach the state cache (fake:// delivers
# in another thread within milliseconds).
CAST_WAIT = 5.0
TRANSPORT_URL = 'fake://'


@dataclasses.dataclass
class ServerResult:
    server: str
    flavor: str
    host: str | None = None
    gpus: list[str] = dataclasses.field(default_factory=list)
    weights: dict[str, float] = dataclasses.field(default_factory=dict)
    error: str | None = None
    weight: float | None = None      # the host's total weight
    #: the next best host and its weights (what the winner beat)
    runner_up: str | None = None
    runner_up_weights: dict[str, float] = dataclasses.field(
        default_factory=dict)
    #: filter -> GPUs of the chosen host whose candidates it dropped
    excluded: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    step: int = 0                    # index in the scenario's boots:

    def to_dict(self) -> dict[str, Any]:
        if self.error is not None:
            return {'server': self.server, 'flavor': self.flavor,
                    'error': self.error}
        return {'server': self.server, 'flavor': self.flavor,
                'host': self.host, 'gpus': list(self.gpus),
                'weights': dict(self.weights)}


@dataclasses.dataclass
class EventResult:
    host: str
    gpu: str
    health: str | None
    metrics: dict[str, float]
    step: int = 0


@dataclasses.dataclass
class Occupancy:
    host: str
    gpu: str
    model: str | None
    used: int
    total: int
    health: str | None
    mode: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {'host': self.host, 'gpu': self.gpu, 'model': self.model,
                'used': self.used, 'total': self.total,
                'health': self.health}


@dataclasses.dataclass
class Result:
    scenario: scn.Scenario
    servers: list[ServerResult] = dataclasses.field(default_factory=list)
    events: list[EventResult] = dataclasses.field(default_factory=list)
    occupancy: list[Occupancy] = dataclasses.field(default_factory=list)
    elapsed: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """``--format json`` (design doc: Simulator)."""
        return {'placements': [s.to_dict() for s in self.servers],
                'occupancy': [o.to_dict() for o in self.occupancy]}


class SimulatedHost:
    """One compute host: its files, providers, agent and usage."""

    def __init__(self, spec: scn.Host, workdir: str, endpoint: str):
        self.spec = spec
        self.name = spec.name
        self.dir = os.path.join(workdir, spec.name)
        os.makedirs(self.dir)
        self.xml_path = os.path.join(self.dir, 'host.xml')
        self.gpus_path = os.path.join(self.dir, 'gpus.yaml')
        self.nova_conf_path = os.path.join(self.dir, 'nova.conf')
        self.conf_path = os.path.join(self.dir, 'gpu-nova-agent.conf')
        self.xml = ElementTree.fromstring(spec.xml_text)
        self.facts = {addr: dict(f) for addr, f in spec.gpus.items()}
        self.endpoint = endpoint
        self.root_uuid: str | None = None
        self.nodename = spec.name
        # provider uuid -> GPU address, and GPU address -> providers
        self.gpu_of_provider: dict[str, str] = {}
        self.providers_of_gpu: dict[str, list[str]] = {}
        self.offered: dict[str, str] = {}        # GPU address -> mdev type
        self.used = {'vcpus': 0, 'memory_mb': 0, 'disk_gb': 0,
                     'instances': 0}
        self.pci_pools: list[dict[str, Any]] = []
        self.conf: cfg.ConfigOpts | None = None
        self.reporter = None
        self.state_client = None
        self.payload: dict[str, Any] | None = None
        self.inventory = None

    # -- files the agent reads -------------------------------------------

    def write_files(self) -> None:
        self._fill_vgpu_facts()
        self.save_state()
        self._write_nova_conf()
        with open(self.conf_path, 'w', encoding='utf-8') as f:
            f.write(
                '[DEFAULT]\n'
                'host = %(host)s\n'
                'transport_url = %(transport)s\n'
                '[agent]\n'
                'mode = %(mode)s\n'
                'libvirt_uri = test://%(xml)s\n'
                'inventory_sources = libvirt,simulated\n'
                'simulated_gpus_file = %(gpus)s\n'
                'nova_config_file = %(nova)s\n'
                'nova_config_dir = %(nova_dir)s\n'
                'prometheus_port = 0\n'
                '[placement]\n'
                'auth_type = admin_token\n'
                'endpoint = %(endpoint)s\n'
                'token = admin\n'
                'max_request_retries = 0\n' % {
                    'host': self.name, 'transport': TRANSPORT_URL,
                    'mode': self.spec.agent_mode, 'xml': self.xml_path,
                    'gpus': self.gpus_path, 'nova': self.nova_conf_path,
                    'nova_dir': os.path.join(self.dir, 'nova.conf.d'),
                    'endpoint': self.endpoint})

    def _fill_vgpu_facts(self) -> None:
        """Give each GPU the vGPU types NVML would list for it.

        The libvirt XML knows how many instances of a type are available;
        NVML knows the most a GPU can hold.  At the start nothing is used,
        so a type's ``availableInstances`` is its maximum, unless the
        scenario lists ``vgpu_types`` itself.
        """
        for func in self.spec.pci_functions:
            if func.address not in self.facts or not func.mdev_types:
                continue
            facts = self.facts[func.address]
            listed = {t.get('id') for t in facts.get('vgpu_types') or []}
            for mdev_type in self._mdev_types(func.address):
                if mdev_type['id'] in listed:
                    continue
                facts.setdefault('vgpu_types', []).append({
                    'id': mdev_type['id'], 'name': mdev_type['name'],
                    'max': mdev_type['available']})

    def _mdev_types(self, address: str) -> list[dict[str, Any]]:
        cap = self._pci_cap(address)
        out = []
        for t in cap.findall("capability[@type='mdev_types']/type"):
            out.append({'id': t.get('id'), 'name': t.findtext('name'),
                        'available': int(t.findtext('availableInstances')
                                         or 0), 'element': t})
        return out

    def _pci_cap(self, address: str):
        for device in self.xml.findall('device'):
            cap = device.find("capability[@type='pci']")
            if cap is None:
                continue
            addr = '%04x:%02x:%02x.%x' % tuple(
                int(cap.findtext(tag), 0)
                for tag in ('domain', 'bus', 'slot', 'function'))
            if addr == address:
                return cap
        raise KeyError(address)

    def _write_nova_conf(self) -> None:
        """The host's nova.conf vGPU part, as an operator writes it."""
        self.offered = {}
        lines = []
        if self.spec.nova_gpu_mode == 'vgpu':
            by_type: dict[str, list[str]] = {}
            for func in self.spec.pci_functions:
                for mdev_type in self.spec.enabled_mdev_types:
                    if mdev_type in func.mdev_types:
                        by_type.setdefault(mdev_type, []).append(
                            func.address)
                        self.offered[func.address] = mdev_type
                        break
            lines += ['[devices]', 'enabled_mdev_types = %s'
                      % ','.join(self.spec.enabled_mdev_types)]
            if len(self.spec.enabled_mdev_types) > 1:
                for mdev_type, addresses in by_type.items():
                    lines += ['[mdev_%s]' % mdev_type,
                              'device_addresses = %s' % ','.join(addresses)]
        with open(self.nova_conf_path, 'w', encoding='utf-8') as f:
            f.write('\n'.join(lines) + '\n')

    def save_state(self) -> None:
        """Write the host XML and simulated GPU facts as they are now."""
        ElementTree.ElementTree(self.xml).write(self.xml_path,
                                                encoding='unicode')
        with open(self.gpus_path, 'w', encoding='utf-8') as f:
            yaml.safe_dump(self.facts, f, sort_keys=True)

    # -- what nova-compute would do ---------------------------------------

    def create_providers(self, client) -> None:
        """Providers as nova-compute's libvirt driver creates them."""
        import os_traits

        from gpu_nova_ext.simulate import novalike
        spec = self.spec
        self.root_uuid = novalike.create_compute_node(
            client, self.nodename, vcpus=spec.vcpus,
            memory_mb=spec.memory_mb, disk_gb=spec.disk_gb,
            cpu_allocation_ratio=spec.cpu_allocation_ratio,
            reserved_host_memory_mb=0,
            traits=tuple(novalike.COMPUTE_TRAITS) + (os_traits.OWNER_NOVA,))
        if spec.nova_gpu_mode == 'vgpu':
            for address, mdev_type in sorted(self.offered.items()):
                total = next(t['available'] for t in self._mdev_types(address)
                             if t['id'] == mdev_type)
                rp = novalike.create_pgpu_provider(
                    client, self.nodename, self.root_uuid, address, total)
                self._add_provider(address, rp)
        elif spec.nova_gpu_mode == 'pci':
            for func in spec.pci_functions:
                if not func.is_display or func.vendor_id not in (
                        naming.VENDOR_IDS):
                    continue
                rc = spec.pci_resource_class or novalike.pci_resource_class(
                    func.vendor_id, func.product_id)
                rp = novalike.create_pci_provider(
                    client, self.nodename, self.root_uuid, func.address,
                    vendor_id=func.vendor_id, product_id=func.product_id,
                    resource_class=rc, traits=spec.pci_traits)
                self._add_provider(func.address, rp)
                # the PCI tracker's pool of this device, as nova-compute
                # reports it in ComputeNode.pci_device_pools
                self.pci_pools.append({
                    'vendor_id': func.vendor_id,
                    'product_id': func.product_id,
                    'numa_node': func.numa_node, 'count': 1,
                    'tags': {'dev_type': 'type-PCI', 'rp_uuid': rp,
                             'resource_class': rc}})

    def _add_provider(self, address: str, rp: str) -> None:
        self.gpu_of_provider[rp] = address
        self.providers_of_gpu.setdefault(address, []).append(rp)

    def consume(self, flavor: scn.Flavor, allocations: dict,
                instance_uuid: str) -> list[str]:
        """The host after nova-compute built the server; its GPUs."""
        self.used['vcpus'] += flavor.vcpus
        self.used['memory_mb'] += flavor.ram_mb
        self.used['disk_gb'] += flavor.disk_gb
        self.used['instances'] += 1
        gpus = []
        for rp, alloc in allocations.items():
            address = self.gpu_of_provider.get(rp)
            if address is None:
                continue
            amount = max(alloc['resources'].values())
            gpus.append(address)
            if address in self.offered:
                for i in range(amount):
                    self._create_mdev(address, self.offered[address],
                                      instance_uuid, i)
            for pool in self.pci_pools:
                if pool['tags']['rp_uuid'] == rp:
                    pool['count'] = max(0, pool['count'] - amount)
        return sorted(set(gpus))

    def _create_mdev(self, address: str, mdev_type: str, instance_uuid: str,
                     index: int) -> None:
        """An mdev on ``address``, as libvirt then lists it."""
        for t in self._mdev_types(address):
            if t['id'] == mdev_type:
                t['element'].find('availableInstances').text = str(
                    max(0, t['available'] - 1))
        mdev_uuid = str(uuid.uuid5(uuid.UUID(instance_uuid), str(index)))
        device = ElementTree.SubElement(self.xml, 'device')
        ElementTree.SubElement(device, 'name').text = 'mdev_%s_%s' % (
            mdev_uuid.replace('-', '_'), address.replace(':', '_').replace(
                '.', '_'))
        ElementTree.SubElement(device, 'parent').text = 'pci_%s' % (
            address.replace(':', '_').replace('.', '_'))
        cap = ElementTree.SubElement(device, 'capability', type='mdev')
        ElementTree.SubElement(cap, 'type', id=mdev_type)
        ElementTree.SubElement(cap, 'uuid').text = mdev_uuid

    def apply_event(self, event: scn.Event) -> None:
        facts = self.facts.setdefault(event.gpu, {})
        if event.health is not None:
            facts['health'] = {'state': event.health,
                               'reasons': list(event.reasons)}
        if event.metrics:
            facts.setdefault('metrics', {}).update(event.metrics)

    # -- the agent ---------------------------------------------------------

    def start_agent(self) -> None:
        from gpu_nova_ext.placement import client as pclient
        from gpu_nova_ext.placement import reporter
        from gpu_nova_ext.state import rpc
        conf = cfg.ConfigOpts()
        gconf.register_agent_opts(conf)
        rpc.register_messaging_opts(conf)
        conf(['--config-file', self.conf_path], project='gpu-nova-ext',
             default_config_files=[], default_config_dirs=[])
        self.conf = conf
        self.reporter = reporter.Reporter(conf, pclient.PlacementClient(conf))
        self.state_client = rpc.AgentStateClient(conf, self._resend)
        self.state_client.start()

    def _resend(self) -> None:
        if self.payload is not None:
            self.state_client.cast_state(self.payload)

    def cycle(self) -> tuple[Any, dict[str, Any]]:
        """One agent cycle: discover, report to Placement, cast state."""
        from gpu_nova_ext.agent import payload as agent_payload
        from gpu_nova_ext.inventory import manager
        self.save_state()
        inventory = manager.discover(self.conf,
                                     sources=['libvirt', 'simulated'])
        result = self.reporter.report(inventory)
        self.inventory = inventory
        self.payload = agent_payload.build_payload(
            inventory, host=self.name, nodename=result.nodename,
            root_provider_uuid=result.root_provider_uuid,
            mode=self.conf.agent.mode)
        # the providers the agent found for each GPU (nova-compute's, or
        # its own in inventory mode)
        for gpu in inventory.gpus:
            for rp in gpu.provider_uuids:
                if rp not in self.gpu_of_provider:
                    self._add_provider(gpu.pci_address, rp)
        if not self.state_client.cast_state(self.payload):
            raise exception.GpuNovaExtException(
                'The agent of %s could not cast its GPU state over %s.'
                % (self.name, TRANSPORT_URL))
        return result, self.payload

    def stop(self) -> None:
        if self.state_client is not None:
            self.state_client.stop()
            self.state_client = None


class Simulation:
    """Runs one scenario; :meth:`run` returns a :class:`Result`."""

    def __init__(self, scenario: scn.Scenario,
                 progress: Progress | None = None):
        self.scenario = scenario
        self.progress = progress or (lambda line: None)
        self.hosts: dict[str, SimulatedHost] = {}
        self._counters: dict[str, int] = {}

    def run(self) -> Result:
        start = time.monotonic()
        result = Result(scenario=self.scenario)
        workdir = tempfile.mkdtemp(prefix='gpu-nova-ext-simulate-')
        novaconf = nova_env.NovaConfig(self.scenario)
        placement = None
        cache = None
        try:
            novaconf.apply()
            nova_env.check_flavors(self.scenario)
            self.scheduler = nova_env.load_scheduler(self.scenario,
                                                     novaconf.conf)
            self.aggregates = nova_env.aggregates(self.scenario)
            from gpu_nova_ext.simulate import embedded
            placement = embedded.EmbeddedPlacement(
                db_path=os.path.join(workdir, 'placement.sqlite'))
            endpoint = placement.start()
            self.progress('placement: embedded openstack-placement at %s'
                          % endpoint)
            cache = self._start_cache(novaconf)
            self.progress('nova: %d filters, %d weighers; state cache '
                          'listening on %s' % (
                              len(self.scheduler.filters),
                              len(self.scheduler.weighers), TRANSPORT_URL))
            self._start_hosts(workdir, endpoint, cache)
            self._play(result, novaconf.conf, endpoint, cache)
            result.occupancy = self._occupancy(endpoint, cache)
        finally:
            for host in self.hosts.values():
                host.stop()
            if cache is not None:
                cache.stop()
                from gpu_nova_ext.state import cache as state_cache
                state_cache.reset_cache()
            if placement is not None:
                placement.close()
            novaconf.restore()
            shutil.rmtree(workdir, ignore_errors=True)
        result.elapsed = time.monotonic() - start
        self.progress('done: %d servers, %d events in %.1f s' % (
            len(result.servers), len(result.events), result.elapsed))
        return result

    # -- set-up ------------------------------------------------------------

    def _start_cache(self, novaconf: nova_env.NovaConfig):
        from gpu_nova_ext.state import cache as state_cache
        from gpu_nova_ext.state import rpc
        conf = novaconf.conf
        rpc.register_messaging_opts(conf)
        # nova-scheduler's transport_url (Nova registers it when it starts
        # its RPC layer, which the simulator does not)
        for group, opts in messaging_opts.list_opts():
            if group in (None, 'DEFAULT'):
                conf.register_opts(opts)
        novaconf.set('transport_url', TRANSPORT_URL, None)
        state_cache.reset_cache()
        cache = state_cache.get_cache()
        cache.start(conf)
        return cache

    def _start_hosts(self, workdir: str, endpoint: str, cache) -> None:
        from gpu_nova_ext.placement import client as pclient
        for spec in self.scenario.hosts:
            host = SimulatedHost(spec, workdir, endpoint)
            self.hosts[spec.name] = host
            host.write_files()
            host.start_agent()
            host.create_providers(pclient.PlacementClient(host.conf))
            report, payload = host.cycle()
            self._wait_for_state(cache, host)
            self.progress(
                'host %s: %d GPUs (nova %s), %d GPU providers; agent '
                'cycle: %d Placement writes, state cast' % (
                    spec.name, len(payload['gpus']), spec.nova_gpu_mode,
                    len(host.gpu_of_provider), report.writes))

    def _wait_for_state(self, cache, host: SimulatedHost) -> None:
        want = host.payload['generated_at']
        deadline = time.monotonic() + CAST_WAIT
        while time.monotonic() < deadline:
            got = cache.get(host.name)
            if got is not None and got.get('generated_at') == want:
                return
            time.sleep(0.005)
        raise exception.GpuNovaExtException(
            'The GPU state of %s did not reach the scheduler state cache '
            'over %s within %.0f s.' % (host.name, TRANSPORT_URL, CAST_WAIT))

    # -- boots and events ----------------------------------------------------

    def _play(self, result: Result, conf, endpoint: str, cache) -> None:
        ctx = nova_env.admin_context()
        client = nova_env.report_client(endpoint)
        for step in self.scenario.steps:
            if isinstance(step, scn.Event):
                host = self.hosts[step.host]
                host.apply_event(step)
                host.cycle()
                self._wait_for_state(cache, host)
                result.events.append(EventResult(
                    host=step.host, gpu=step.gpu, health=step.health,
                    metrics=dict(step.metrics), step=step.index))
                self.progress('event: %s %s%s%s; agent re-cast its state' % (
                    step.host, step.gpu,
                    ' health=%s' % step.health if step.health else '',
                    ''.join(' %s=%s' % kv for kv in step.metrics.items())))
                continue
            flavor = self.scenario.flavors[step.flavor]
            for _ in range(step.count):
                server = self._boot(ctx, client, cache, flavor, step)
                result.servers.append(server)
                if server.error:
                    self.progress('boot %s (%s): %s' % (
                        server.server, server.flavor, server.error))
                else:
                    self.progress('boot %s (%s): %s %s' % (
                        server.server, server.flavor, server.host,
                        ','.join(server.gpus) or '-'))

    def _server_name(self, step: scn.Boot) -> str:
        prefix = step.name or step.flavor
        self._counters[prefix] = self._counters.get(prefix, 0) + 1
        return '%s-%d' % (prefix, self._counters[prefix])

    def _boot(self, ctx, client, cache, flavor: scn.Flavor,
              step: scn.Boot) -> ServerResult:
        """One server through Nova's scheduling path."""
        server = ServerResult(server=self._server_name(step),
                              flavor=flavor.name, step=step.index)
        instance_uuid = str(uuid.uuid4())
        spec = nova_env.request_spec(ctx, flavor, instance_uuid)
        nova_env.prefilter(ctx, spec)
        resources = nova_env.resource_request(ctx, spec)
        res = client.get_allocation_candidates(ctx, resources)
        alloc_reqs, summaries, version = res or (None, None, None)
        if not alloc_reqs:
            server.error = ('No valid host: Placement has no allocation '
                            'candidate for %s' % _describe(resources))
            return server
        by_rp: dict[str, list] = {}
        for ar in alloc_reqs:
            for rp in ar['allocations']:
                by_rp.setdefault(rp, []).append(ar)
        states = []
        for host in self.hosts.values():
            if host.root_uuid in summaries:
                compute = nova_env.compute_node(
                    host.spec, host.root_uuid, host.used, host.pci_pools)
                states.append(nova_env.host_state(
                    compute, by_rp.get(host.root_uuid, []),
                    self.aggregates.get(host.name)))
        ordered = self.scheduler.select(states, spec)
        LOG.debug('%(server)s: filters %(filters)s; weights %(weights)s',
                  {'server': server.server,
                   'filters': self.scheduler.filter_log,
                   'weights': self.scheduler.weight_log})
        if not ordered:
            server.error = 'No valid host: %s' % self.scheduler.rejection()
            return server
        for state in ordered:
            if not state.allocation_candidates:
                continue
            alloc_req = state.allocation_candidates[0]
            if nova_env.claim(ctx, client, spec, instance_uuid, alloc_req,
                              version):
                break
        else:
            server.error = ('No valid host: the claim in Placement failed '
                            'on every host that passed the filters')
            return server
        # as _schedule does before consume_from_request
        for group in spec.requested_resources:
            group.provider_uuids = alloc_req['mappings'][group.requester_id]
        state.consume_from_request(spec)
        host = self.hosts[state.host]
        server.host = state.host
        server.weights = dict(sorted(
            self.scheduler.weight_log.get(state.host, {}).items()))
        server.weight = self.scheduler.total_weights.get(state.host)
        others = [s for s in ordered if s is not state]
        if others:
            server.runner_up = others[0].host
            server.runner_up_weights = dict(
                self.scheduler.weight_log.get(others[0].host, {}))
        for name, rps in self.scheduler.pruned.get(state.host, {}).items():
            gpus = sorted({host.gpu_of_provider[rp] for rp in rps
                           if rp in host.gpu_of_provider})
            if gpus:
                server.excluded[name] = gpus
        server.gpus = host.consume(flavor, alloc_req['allocations'],
                                   instance_uuid)
        host.cycle()
        self._wait_for_state(cache, host)
        return server

    # -- results -----------------------------------------------------------

    def _occupancy(self, endpoint: str, cache) -> list[Occupancy]:
        from gpu_nova_ext.placement import client as pclient
        rows = []
        for host in self.hosts.values():
            client = pclient.PlacementClient(host.conf)
            payload = cache.get(host.name) or host.payload or {}
            by_address = {g['pci_address']: g
                          for g in payload.get('gpus', [])}
            for address in sorted(by_address):
                gpu = by_address[address]
                used = total = 0
                for rp in host.providers_of_gpu.get(address, []):
                    inv = client.get('/resource_providers/%s/inventories'
                                     % rp)['inventories']
                    usage = client.get('/resource_providers/%s/usages'
                                       % rp)['usages']
                    for rc, record in inv.items():
                        total += record['total']
                        used += usage.get(rc, 0)
                rows.append(Occupancy(
                    host=host.name, gpu=address, model=gpu.get('model'),
                    used=used, total=total,
                    health=(gpu.get('health') or {}).get('state'),
                    mode=gpu.get('mode')))
        return rows


def _describe(resources) -> str:
    """A ResourceRequest in a line: ``VCPU=8, MEMORY_MB=..., VGPU=1``."""
    parts = ['%s=%d' % kv for kv in resources.merged_resources().items()]
    parts += sorted(resources.all_required_traits)
    return ', '.join(parts)


def run(path: str | None = None, progress: Progress | None = None) -> Result:
    """Load the scenario at ``path`` (the shipped one when None), run it."""
    return Simulation(scn.load(path), progress).run()
