# SPDX-License-Identifier: Apache-2.0

"""``openstack gpu snapshot``: the live cloud as a simulator scenario.

From what :func:`gpu_nova_ext.operator.cloud_facts.collect` read of
Placement, Nova and Keystone, :func:`build` (a pure function of those
facts) returns the scenario data
(``gpu-nova-ext simulate`` accepts it unchanged, design doc: Simulator)
with the list of what it could not represent; :func:`render` writes it
as YAML whose header comment says when it was taken and what is missing.

How the cloud maps onto the scenario format:

* every compute host (a root provider with ``VCPU`` inventory) is one
  host entry under its own name, so the simulated hosts are the cloud's
  (server placements and aggregates compare one to one); hosts with the
  same GPUs share one ``gpus:`` list, a YAML anchor (a host kind with
  ``count:`` would rename them ``NAME-0001``...);
* ``VCPU``/``MEMORY_MB``/``DISK_GB``: what Placement offers, ``(total -
  reserved) x allocation ratio`` (the simulator's compute nodes reserve
  nothing and over-commit only vCPUs);
* GPUs: one GPU kind per model, mode and size, from our traits
  (``CUSTOM_GPU_MODEL_*``, ``CUSTOM_GPU_MODE_*``, ``CUSTOM_GPU_DRIVER_*``)
  and the resource classes of the GPU providers (a vGPU pGPU's
  inventory is its number of vGPUs);
* GPU health: the health traits each agent keeps on its compute node
  provider (``CUSTOM_GPU_UNHEALTHY_<ADDR>``..., read by
  :func:`gpu_nova_ext.operator.live_state.placement_states`): a GPU that
  is not healthy is its own GPU kind with that ``health:``;
* GPU reservations: a GPU whose providers carry a project's
  ``CUSTOM_GPU_RESERVED_*`` trait is a ``reservations:`` entry of that
  project, a host in an aggregate kept for one project
  (``filter_tenant_id``) a whole-host entry;
* GPU quotas: Keystone's unified limits of Nova's GPU resource classes
  (registered limits as defaults, project limits), the ``quotas:``
  section, for the classes the snapshot's hosts offer;
* the GPUs keep the cloud's PCI addresses (a kind's ``addresses:``),
  but for ``vgpu-vfio`` GPUs, whose VFs hostgen lays out at its own
  addresses (and a host whose cloud addresses collide with that layout);
  :attr:`Snapshot.addresses` maps the simulator's to the cloud's;
* current servers: ``boots:`` of their flavors in the order they were
  created, each asked for the host it runs on (``host:``, as ``openstack
  server create --host``: Placement in that host's tree, every filter
  still runs) and held on the GPUs it holds there (``gpus:``, from the
  GPU providers' allocations in Placement) where the scenario has them
  at the cloud's addresses; :mod:`gpu_nova_ext.operator.capacity` says
  which found no host there when replayed.
* ``workload:``: fill the GPU flavors until the first NoValidHost, so
  that the simulation of a snapshot also says what fits next.
"""
import collections
import dataclasses
import datetime
import math
import re
import types
from typing import Any

import yaml

from gpu_nova_ext import exception
from gpu_nova_ext import naming
from gpu_nova_ext.operator import audit
from gpu_nova_ext.operator import cloud_facts
from gpu_nova_ext.operator import live_state
from gpu_nova_ext.operator import quota as op_quota
from gpu_nova_ext.operator import reservation
from gpu_nova_ext.operator import reservation_hosts
from gpu_nova_ext.scheduler import request
from gpu_nova_ext.state import schema as state_schema

#: the scenario's name pattern and length (simulate/scenario_schema.yaml,
#: $defs/name)
_NAME_RE = re.compile(r'^[A-Za-z0-9][A-Za-z0-9._-]*$')
NAME_MAX = 63
#: a boot's name: the simulator adds -NNNNNN
BOOT_NAME_MAX = 56
#: Nova's pGPU provider of a vGPU-capable GPU: one per physical GPU
_VGPU_CLASSES = ('VGPU',)
#: what a snapshot never holds, whatever the cloud (the header says it)
NOT_REPRESENTED = (
    "GPU metrics (utilization, temperature, power) and health older than "
    "the agents' last report in Placement: GPUs are as healthy as their "
    'health traits say, with idle metrics',
    "the schedulers' nova.conf (filters, weighers, multipliers) and "
    "whether Nova enforces unified limits ([quota] driver): the "
    "simulator's defaults apply, quotas are enforced, unless "
    "gpu-nova-ext simulate --nova-conf gives the schedulers' files",
    'vGPU type names (not in Placement): each vGPU GPU gets the type '
    'snapshot-vgpu with its inventory as instances',
    'allocations of consumers that are not servers with a host '
    '(migrations in progress)',
    'quota limits on anything but GPU resource classes (servers, VCPU, '
    '...): unlimited in the simulator',
)
SNAPSHOT_VGPU_TYPE = 'snapshot-vgpu'
#: GPU modes whose kinds keep the cloud's PCI addresses (addresses:); the
#: simulator lays out vgpu-vfio GPUs (their VFs) itself
ADDRESSED_MODES = ('passthrough', 'vgpu')
HEALTHY = state_schema.HEALTH_STATES[0]
#: most servers the snapshot's workload (and a capacity fill) boots
FILL_MAX_SERVERS = 1000
_COMPUTE_CLASSES = ('VCPU', 'MEMORY_MB', 'DISK_GB')


@dataclasses.dataclass(kw_only=True, slots=True)
class Snapshot:
    """A scenario of the cloud and what it leaves out."""

    data: dict[str, Any]
    taken_at: str
    #: one line per thing of the cloud the scenario does not hold
    dropped: list[str]
    #: boot name prefix (``boots[].name``) -> the host it runs on now
    placed: dict[str, str]
    #: host -> simulated GPU PCI address -> the cloud's
    addresses: dict[str, dict[str, str]] = dataclasses.field(
        default_factory=dict)


def offered(inventory: dict[str, Any] | None) -> int:
    """What Placement lets consumers take of one inventory record."""
    if not inventory:
        return 0
    return max(math.floor((inventory['total'] - inventory.get(
        'reserved', 0)) * inventory.get('allocation_ratio', 1.0)), 0)


def safe_name(name: str, limit: int = NAME_MAX) -> str | None:
    """``name`` when the scenario format takes it as it is, else None."""
    name = str(name)
    if len(name) <= limit and _NAME_RE.match(name):
        return name
    return None


def _boot_prefix(name: str, used: set[str]) -> str:
    """A unique boot name prefix from a server name."""
    base = re.sub(r'[^A-Za-z0-9._-]+', '-', name).strip('-._') or 'server'
    base = base[:BOOT_NAME_MAX - 4]
    if not base[0].isalnum():
        base = 's' + base[:-1]
    prefix, n = base, 1
    while prefix in used:
        n += 1
        prefix = '%s.%d' % (base, n)
    used.add(prefix)
    return prefix


def _physical_gpus(gpu_views: list[audit.ProviderView]
                   ) -> list[tuple[str, list[audit.ProviderView]]]:
    """``(mode, providers)`` per physical GPU of a host.

    A vGPU provider at function 0 is a GPU (Nova's pGPU, mdevs on the
    physical function); the ones at other functions are the SR-IOV VFs
    of the GPU at function 0 of their slot (``vgpu-vfio``), joined.
    """
    out: list[tuple[str, list[audit.ProviderView]]] = []
    vfs: dict[str, list[audit.ProviderView]] = {}
    for view in sorted(gpu_views, key=lambda v: v.name):
        mode = audit.mode_of([view])
        address = audit.provider_address(view.name)
        if mode == 'vgpu' and address and not address.endswith('.0'):
            vfs.setdefault(address.rsplit('.', 1)[0], []).append(view)
            continue
        out.append((mode, [view]))
    out += [('vgpu-vfio', views) for _slot, views in sorted(vfs.items())]
    return out


@dataclasses.dataclass(kw_only=True, slots=True)
class _HostGpus:
    """What :func:`_gpu_kinds` makes of one host's GPU providers."""

    kinds: list[dict]
    #: host keys the kinds need (``vgpu_resource_class``...)
    extra: dict[str, Any]
    #: simulated PCI address -> the cloud's
    addresses: dict[str, str]
    #: simulated PCI address -> the project its GPU is reserved for
    reserved: dict[str, str]


def _gpu_kinds(host: str, gpu_views: list[audit.ProviderView],
               dropped: list[str], health: dict[str, str] | None = None
               ) -> _HostGpus:
    """The ``gpus:`` kinds of one host and what goes with them.

    :param health: provider uuid -> the health state its GPU's agent
        published (healthy when absent).
    """
    from gpu_nova_ext.simulate import hostgen
    from gpu_nova_ext.simulate import schema

    health = health or {}
    counts: dict[tuple, int] = collections.Counter()
    #: kind key -> (cloud address, reserved for) per physical GPU
    gpus_of: dict[tuple, list[tuple[str, str | None]]] = (
        collections.defaultdict(list))
    extra: dict[str, Any] = {}
    for mode, views in _physical_gpus(gpu_views):
        names = ', '.join(v.name for v in views)
        if any(naming.MIG_ENABLED_TRAIT in v.traits for v in views):
            dropped.append('%s: GPU %s is MIG-partitioned, which a '
                           'snapshot does not write yet' % (host, names))
            continue
        model = audit.model_of(views)
        if model not in hostgen.PCI_ID_OF_MODEL:
            dropped.append('%s: GPU %s of model %s, which the simulator '
                           'does not know' % (host, names, model or '?'))
            continue
        classes = sorted({c for v in views for c in audit.gpu_classes(v)})
        total = sum(v.inventories[c]['total'] for v in views
                    for c in audit.gpu_classes(v))
        driver = _driver({t for v in views for t in v.traits})
        # the worst health of its providers ('' healthy: keys sort)
        state = max((health.get(v.uuid, HEALTHY) for v in views),
                    key=state_schema.HEALTH_RANK.get)
        state = '' if state == HEALTHY else state
        owner = next((p for v in views for t in sorted(v.traits)
                      for p in [naming.reservation_project(t)] if p), None)
        address = (audit.provider_address(views[0].name)
                   or views[0].name)
        if mode != 'passthrough':
            if classes[0] not in _VGPU_CLASSES:
                extra.setdefault('vgpu_resource_class', classes[0])
            key = (model, mode, total, driver or '', state)
            counts[key] += 1
            gpus_of[key].append((address, owner))
            continue
        vendor, device = hostgen.PCI_ID_OF_MODEL[model]
        if classes[0] != 'CUSTOM_PCI_%s_%s' % (vendor.upper(),
                                               device.upper()):
            extra.setdefault('pci_resource_class', classes[0])
        # one provider per GPU, or one holding a model's GPUs
        key = (model, mode, 1, driver or '', state)
        counts[key] += total
        if owner:
            dropped.append('%s: passthrough GPU %s is reserved for project '
                           '%s, which a snapshot does not write (PCI '
                           'providers: reserve the whole host)'
                           % (host, address, owner))
        gpus_of[key] += [(address, None)] * (total if total == 1 else 0)
    if len({k[1] == 'passthrough' for k in counts}) > 1:
        for key in [k for k in counts if k[1] == 'passthrough']:
            dropped.append('%s: %d passthrough %s GPU(s) beside vGPU ones '
                           '(a simulated host offers its GPUs one way)'
                           % (host, counts.pop(key), key[0]))
            gpus_of.pop(key, None)
        extra.pop('pci_resource_class', None)
    kinds = []
    for (model, mode, total, driver, state), count in sorted(
            counts.items()):
        kind: dict[str, Any] = {'model': model, 'count': count,
                                'mode': mode}
        if mode != 'passthrough':
            kind.update(vgpu_type=SNAPSHOT_VGPU_TYPE,
                        vgpu_instances=total)
        if driver:
            kind['driver_version'] = driver
        if state:
            kind['health'] = state
        cloud = _pci_addresses(gpus_of.get((model, mode, total, driver,
                                            state), ()))
        if mode in ADDRESSED_MODES and len(cloud) == count:
            kind['addresses'] = cloud
        kinds.append(kind)
    out = _HostGpus(kinds=kinds, extra=extra, addresses={}, reserved={})
    if not kinds:
        return out
    # the GPUs' addresses in the simulator: the cloud's (addresses:), or
    # hostgen's layout where a kind has none
    try:
        generated = hostgen.parse(schema.Source('<snapshot>'), kinds,
                                  'gpus')
    except exception.ScenarioError:
        # the cloud's addresses collide with hostgen's layout of a kind
        # without them: the simulator lays out every GPU of the host
        dropped.append("%s: its GPUs' PCI addresses collide with the "
                       "simulator's layout of its vgpu-vfio GPUs: every "
                       "GPU of the host is at the simulator's address"
                       % host)
        for kind in kinds:
            kind.pop('addresses', None)
        generated = hostgen.parse(schema.Source('<snapshot>'), kinds,
                                  'gpus')
    simulated = iter(generated.facts)
    for key in sorted(counts):
        cloud_gpus = iter(gpus_of.get(key, ()))
        for _ in range(counts[key]):
            sim = next(simulated)
            address, owner = next(cloud_gpus, (None, None))
            if address is not None:
                out.addresses[sim] = address
            if owner is not None:
                out.reserved[sim] = owner
    return out


def _held(gpu_views: list[audit.ProviderView],
          consumers: dict[str, list[str]]) -> dict[str, set[str]]:
    """consumer -> the PCI addresses of the host's GPUs it holds."""
    out: dict[str, set[str]] = collections.defaultdict(set)
    for view in gpu_views:
        address = audit.provider_address(view.name) or view.name
        for consumer in consumers.get(view.uuid, ()):
            out[consumer].add(address)
    return out


def _pci_addresses(gpus) -> list[str]:
    """The PCI addresses of ``(address, owner)`` pairs that have one."""
    out = []
    for address, _owner in gpus:
        try:
            out.append(naming.normalize_pci_address(address))
        except ValueError:
            pass                # a provider name that is not an address
    return out


def _driver(traits) -> str | None:
    for trait in sorted(traits):
        if trait.startswith(naming.TRAIT_PREFIX + 'DRIVER_'):
            return trait[len(naming.TRAIT_PREFIX + 'DRIVER_'):]
    return None


def flavor_entry(name: str, vcpus, ram, disk, specs: dict) -> dict:
    entry: dict[str, Any] = {'name': name, 'vcpus': int(vcpus),
                             'ram_mb': int(ram), 'disk_gb': int(disk or 0)}
    if specs:
        entry['extra_specs'] = {str(k): str(v) for k, v in specs.items()}
    return entry


def pci_aliases(providers: list[audit.ProviderView]) -> dict[str, dict]:
    """``[pci] alias`` entries a snapshot can know, by alias name.

    nova.conf's aliases are in no API.  Those ``gpu-nova-ext nova-conf``
    writes are named after the model (:func:`nova_conf.alias_name`) and
    ask the resource class its passthrough GPUs have in Placement, so
    they follow from the providers.
    """
    from gpu_nova_ext.operator import nova_conf
    out: dict[str, dict] = {}
    for view in providers:
        if view.parent_uuid is None or not audit.is_gpu_provider(view):
            continue
        model, classes = audit.model_of([view]), audit.gpu_classes(view)
        if (model and classes
                and audit.mode_of([view]) == naming.MODE_PASSTHROUGH):
            out.setdefault(nova_conf.alias_name(model), {
                'name': nova_conf.alias_name(model),
                'resource_class': classes[0], 'device_type': 'type-PCI'})
    return out


def _alias_problem(specs: dict | None, aliases: dict[str, dict],
                   used: dict[str, dict]) -> str | None:
    """Why a flavor's ``pci_passthrough:alias`` cannot be written, or None.

    The aliases it names are added to ``used``.
    """
    value = (specs or {}).get('pci_passthrough:alias')
    if not value:
        return None
    names = [part.split(':')[0].strip() for part in str(value).split(',')]
    unknown = [n for n in names if n not in aliases]
    if unknown:
        return ('its PCI alias %s is defined in nova.conf ([pci] alias), '
                'which no API shows, and is not one gpu-nova-ext names '
                'after a passthrough GPU model offered in Placement'
                % ', '.join(unknown))
    for n in names:
        used[n] = aliases[n]
    return None


def simulator(command: str):
    """The simulator's (runner, scenario) modules, for ``command``.

    They need Nova and Placement (the ``simulator`` extra); without them
    a ConfigError names the extra to install.
    """
    try:
        from gpu_nova_ext.simulate import runner
        from gpu_nova_ext.simulate import scenario as scn
    except ImportError as exc:
        raise exception.ConfigError(reason=(
            'openstack gpu %s runs the simulator, whose %s is not '
            'installed: pip install "gpu-nova-ext[simulator]"' % (
                command, exc.name or exc)))
    return runner, scn


def is_gpu_flavor(extra_specs: dict) -> bool:
    """A flavor whose request asks GPUs, as the scheduler parses it."""
    return request.parse_extra_specs(extra_specs).kind != request.NONE


def build(facts: cloud_facts.CloudFacts, taken_at: str) -> Snapshot:
    """The scenario of the cloud ``facts`` describe.  No I/O."""
    dropped: list[str] = []
    by_parent: dict[str, list[audit.ProviderView]] = collections.defaultdict(
        list)
    for view in facts.providers:
        if view.parent_uuid is not None and audit.is_gpu_provider(view):
            by_parent[view.root_uuid].append(view)
    member_of: dict[str, dict[str, dict]] = collections.defaultdict(dict)
    for agg, (hosts, metadata) in sorted(facts.aggregates.items()):
        for host in hosts:
            member_of[host][agg] = {str(k): str(v)
                                    for k, v in metadata.items()}
    health: dict[str, str] = {}
    for state in live_state.placement_states(facts.providers).values():
        for gpu in state['gpus']:
            for rp in gpu['provider_uuids']:
                health[rp] = gpu['health']['state']
    hosts = []
    gpu_lists: dict[str, list] = {}
    addresses: dict[str, dict[str, str]] = {}
    #: host -> consumer -> the PCI addresses of the GPUs it holds
    held: dict[str, dict[str, set[str]]] = {}
    reservations: list[dict] = []
    for view in sorted(facts.providers, key=lambda v: v.name):
        inv = facts.root_inventories.get(view.uuid)
        if view.parent_uuid is not None or not inv or 'VCPU' not in inv:
            continue
        name = safe_name(view.name)
        if name is None:
            dropped.append('host %s: its name is not a scenario name '
                           '(letters, digits, ".", "_", "-", at most %d)'
                           % (view.name, NAME_MAX))
            continue
        missing = [rc for rc in _COMPUTE_CLASSES if rc not in inv]
        if missing:
            dropped.append('host %s: no %s inventory (the simulated host '
                           'gets 1)' % (name, ', '.join(missing)))
        vcpu = inv['VCPU']
        entry: dict[str, Any] = {
            'name': name,
            'vcpus': max(vcpu['total'] - vcpu.get('reserved', 0), 1),
            'cpu_allocation_ratio': float(vcpu.get('allocation_ratio',
                                                   1.0)),
            'memory_mb': max(offered(inv.get('MEMORY_MB')), 1),
            'disk_gb': max(offered(inv.get('DISK_GB')), 1)}
        gpus = _gpu_kinds(name, by_parent.get(view.uuid, []), dropped,
                          health)
        entry.update(gpus.extra)
        if gpus.kinds:
            # one list per kind of GPUs: YAML writes it once, anchored
            entry['gpus'] = gpu_lists.setdefault(
                yaml.safe_dump(gpus.kinds, sort_keys=True), gpus.kinds)
        else:
            entry.update(nova_gpu_mode='none',
                         libvirt_xml_inline='<node></node>')
        if member_of.get(name):
            entry['aggregates'] = member_of[name]
        hosts.append(entry)
        addresses[name] = gpus.addresses
        held[name] = _held(by_parent.get(view.uuid, []),
                           facts.gpu_consumers)
        for sim, project in sorted(gpus.reserved.items()):
            if _project_ok(project):
                reservations.append({'project': project, 'host': name,
                                     'gpu': sim})
            else:
                dropped.append('%s: GPU %s reserved for %r, not a '
                               'project id a scenario takes' % (
                                   name, gpus.addresses.get(sim, sim),
                                   project))
        reservations += _host_reservations(name, member_of.get(name) or {},
                                           dropped)
    if not hosts:
        raise exception.InvalidArgument(
            argument='cloud', value='Placement',
            reason='no compute host (a resource provider with VCPU '
                   'inventory) in Placement; start nova-compute first')

    aliases = pci_aliases(facts.providers)
    used_aliases: dict[str, dict] = {}
    flavors: dict[str, dict] = {}
    for flavor in sorted(facts.flavors, key=lambda f: f.name):
        name = safe_name(flavor.name)
        if name is None:
            dropped.append('flavor %s: its name is not a scenario name'
                           % flavor.name)
            continue
        why = _alias_problem(flavor.extra_specs, aliases, used_aliases)
        if why:
            dropped.append('flavor %s: %s' % (flavor.name, why))
            continue
        flavors[name] = flavor_entry(name, flavor.vcpus, flavor.ram,
                                     flavor.disk, flavor.extra_specs)
    known = {h['name'] for h in hosts}
    boots, placed, used = [], {}, set()
    without_host = 0
    for server in sorted(facts.servers, key=lambda s: (s.created_at,
                                                       s.id)):
        if not server.host:
            without_host += 1
            continue
        where = '%s (%s) on %s' % (server.name, server.id, server.host)
        if server.host not in known:
            dropped.append('server %s: its host is not in the snapshot'
                           % where)
            continue
        fname = server.flavor.get('name')
        name = safe_name(fname) if fname else None
        if name is None or server.flavor.get('vcpus') is None:
            dropped.append('server %s: its flavor %s cannot be written '
                           '(its resources count as free)' % (
                               where, fname or '(not shown by Nova)'))
            continue
        why = _alias_problem(server.flavor.get('extra_specs'), aliases,
                             used_aliases)
        if why:
            dropped.append('server %s: %s (its resources count as free)'
                           % (where, why))
            continue
        if name not in flavors:
            # deleted since: the server's own copy
            flavors[name] = flavor_entry(
                name, server.flavor['vcpus'], server.flavor['ram'],
                server.flavor['disk'], server.flavor['extra_specs'])
        prefix = _boot_prefix(server.name, used)
        boot: dict[str, Any] = {'flavor': name, 'name': prefix,
                                'host': server.host}
        on = held.get(server.host, {}).get(server.id)
        if on:
            # the GPUs it holds, where the scenario has them at the
            # cloud's addresses (else the replay's scheduler chooses)
            at_cloud = {cloud for sim, cloud in
                        addresses[server.host].items() if sim == cloud}
            if on <= at_cloud:
                boot['gpus'] = sorted(on)
            else:
                dropped.append('server %s: its GPU(s) %s are at the '
                               "simulator's addresses in the scenario: the "
                               "replay's scheduler chooses its GPU" % (
                                   where, ', '.join(sorted(on))))
        if server.project_id and _project_ok(server.project_id):
            boot['project'] = server.project_id
        boots.append(boot)
        placed[prefix] = server.host
    if not flavors:
        raise exception.InvalidArgument(
            argument='cloud', value='Nova',
            reason='no flavor in Nova; a scenario needs one (openstack '
                   'flavor create)')
    data: dict[str, Any] = {
        'description': 'snapshot of the cloud taken %s: %d hosts, %d '
                       'servers' % (taken_at, len(hosts), len(boots)),
        'hosts': hosts,
        'flavors': list(flavors.values()),
    }
    if used_aliases:
        # nova.conf's [pci] alias is not in any API: the aliases
        # gpu-nova-ext names after the models offered (nova-conf's rule)
        data['nova_conf'] = {'pci': {'alias': [
            used_aliases[a] for a in sorted(used_aliases)]}}
    if reservations:
        data['reservations'] = reservations
    quotas = _quotas(facts, hosts, dropped)
    if quotas:
        data['quotas'] = quotas
    if boots:
        data['boots'] = boots
    gpu_flavors = {n: 1 for n, f in flavors.items()
                   if is_gpu_flavor(f.get('extra_specs') or {})}
    if gpu_flavors or not boots:
        # a fill of GPU-less flavors stops at max_servers only
        data['workload'] = {
            'flavors': gpu_flavors or {next(iter(flavors)): 1},
            'until': 'first_failure', 'max_servers': FILL_MAX_SERVERS}
    if without_host:
        dropped.append('%d server(s) without a host (ERROR or not '
                       'scheduled) hold nothing and are left out'
                       % without_host)
    dropped += facts.unread
    return Snapshot(data=data, taken_at=taken_at, dropped=dropped,
                    placed=placed, addresses=addresses)


def _host_reservations(host: str, aggregates: dict[str, dict],
                       dropped: list[str]) -> list[dict]:
    """Whole-host ``reservations:`` of the aggregates kept for a project.

    Nova's AggregateMultiTenancyIsolation reads ``filter_tenant_id*``
    (:func:`~gpu_nova_ext.operator.reservation_hosts.tenants`); the
    scenario holds one project per host.
    """
    projects: set[str] = set()
    for metadata in aggregates.values():
        projects |= reservation_hosts.tenants(
            types.SimpleNamespace(metadata=metadata))
    if not projects:
        return []
    if len(projects) > 1 or not _project_ok(next(iter(projects))):
        dropped.append('host %s: kept for projects %s by aggregate '
                       'metadata, which a scenario cannot hold (one '
                       'project id per host)' % (host, ', '.join(
                           sorted(projects))))
        return []
    return [{'project': projects.pop(), 'host': host}]


def _quotas(facts: cloud_facts.CloudFacts, hosts: list[dict],
            dropped: list[str]) -> list[dict]:
    """The ``quotas:`` of Keystone's limits on the hosts' GPU classes.

    Limits of other resources (``servers``, ``class:VCPU``...) are not
    written (:data:`NOT_REPRESENTED`); limits of GPU classes the
    scenario's hosts do not offer, and limits of 0 (the simulator has no
    Keystone to tell one from a missing limit), are said, not written.
    """
    if facts.limits is None:
        return []
    offered = {h[key] for h in hosts for key in (
        'vgpu_resource_class', 'pci_resource_class') if key in h}
    out: list[dict] = []
    skipped: set[str] = set()
    rows = [(None, name, limit) for name, limit in sorted(
        facts.limits.registered.items())]
    rows += [(project, name, limit)
             for project, limits in sorted(facts.limits.projects.items())
             for name, limit in sorted(limits.items())]
    for project, name, limit in rows:
        rc = name[len('class:'):] if name.startswith('class:') else None
        if rc is None or op_quota.classify(rc) is None:
            continue                 # not a GPU's: no GPU rule reads it
        if rc not in offered:
            skipped.add(name)
            continue
        if project is None and limit == op_quota.UNLIMITED:
            continue                 # the simulator's own default
        where = 'project %s' % project if project else 'the default'
        if limit == 0 or (project is not None and not _project_ok(project)):
            dropped.append('GPU quota of %s on %s (%d): a scenario cannot '
                           'hold it' % (where, name, limit))
            continue
        entry: dict[str, Any] = {'model': rc, 'limit': limit}
        if project is not None:
            entry = {'project': project, **entry}
        out.append(entry)
    for name in sorted(skipped):
        dropped.append('GPU quota on %s: no host of the snapshot offers '
                       'that class by that name' % name)
    return out


def _project_ok(project_id: str) -> bool:
    try:
        reservation.check_project_format(project_id)
    except (exception.GpuNovaExtException, ValueError):
        return False
    return True


def now() -> str:
    """The time a snapshot is taken, ISO 8601 in UTC."""
    return datetime.datetime.now(datetime.timezone.utc).strftime(
        '%Y-%m-%dT%H:%M:%SZ')


def header(snap: Snapshot, cloud: str) -> str:
    """The comment on top of the file: when, from where, what is missing."""
    lines = [
        'gpu-nova-ext scenario: a snapshot of the cloud %s' % cloud,
        'taken %s by openstack gpu snapshot; play it with' % snap.taken_at,
        '  gpu-nova-ext simulate FILE --nova-conf /etc/nova/nova.conf',
        '  (the files nova-scheduler reads; or --compare, or edit it)',
        '',
        'Hosts are the compute hosts of Placement under their own names;',
        'hosts with the same GPUs share one gpus: list (&idNNN).',
        'vcpus, memory_mb and disk_gb are what Placement offers: (total -',
        'reserved) x allocation ratio (only vCPUs keep their ratio).',
        'boots: the servers that run now, oldest first, each asked for',
        'the host it runs on (host:, as openstack server create --host:',
        'Placement in that host\'s tree, every filter still runs; one that',
        'no longer fits there finds no host, and openstack gpu capacity',
        'says how many), on the GPUs it holds (gpus:) where the GPUs',
        "have the cloud's PCI addresses (addresses:; the simulator lays",
        'out vgpu-vfio GPUs at its own).',
        'workload: the GPU flavors, filled until the first NoValidHost.',
        "GPU health: the health traits each agent keeps on its host's",
        'provider (a GPU that is not healthy is a GPU kind of its own);',
        'reservations: GPUs with a CUSTOM_GPU_RESERVED_* trait and hosts',
        'in an aggregate kept for one project; quotas: Keystone unified',
        "limits on the hosts' GPU classes.",
        '',
        'Not represented:',
    ]
    lines += ['  - ' + line for line in NOT_REPRESENTED]
    if snap.dropped:
        lines.append('Left out of this cloud:')
        lines += ['  - ' + line for line in snap.dropped]
    return ''.join('# %s\n' % line if line else '#\n' for line in lines)


def render(snap: Snapshot, cloud: str) -> str:
    """The scenario file: :func:`header` and the data as YAML."""
    return header(snap, cloud) + yaml.safe_dump(
        snap.data, sort_keys=False, default_flow_style=False)
