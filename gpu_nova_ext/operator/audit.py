# SPDX-License-Identifier: Apache-2.0

"""``openstack gpu audit``: the cluster's GPUs as Placement (and the
schedulers' GPU state, where reachable) see them.

:func:`collect` reads Placement; :func:`build_report` is a pure function
of what was read (provider views and, optionally, state payloads by host)
and answers: GPUs per host, model and mode with free and used capacity;
driver branches across hosts with the outliers named; unhealthy and
reserved GPUs.

A GPU provider is a non-root provider with one of our traits
(``CUSTOM_GPU_MODEL_*``/``CUSTOM_GPU_MODE_*``) or with GPU inventory
(``VGPU``, ``PGPU``, ``CUSTOM_GPU_*``).  Several providers can stand for
one physical GPU (one per SR-IOV VF); the state payload's
``provider_uuids`` join them exactly.  Without it, a provider the agent
marks ``CUSTOM_GPU_MODE_PASSTHROUGH`` is one whole GPU (a device passed
through, whatever shares its bus), and the other providers of one host are
grouped by PCI domain and bus (the VFs of one GPU share its bus; a
data-centre GPU sits alone on its bus behind a switch port).

The GPU state (health, driver) of a host comes from its agent's live
payload or, read from Placement, from the ``CUSTOM_GPU_HOST_*`` traits the
agent keeps on the compute node provider
(:func:`gpu_nova_ext.operator.live_state.placement_states`); each GPU and
``state_sources`` say which, and how old.
"""
import collections
import dataclasses
import datetime
import re
from typing import Any

from gpu_nova_ext import naming
from gpu_nova_ext.operator import live_state
from gpu_nova_ext.operator import resource_classes

GPU_RESOURCE_CLASSES = ('VGPU', 'PGPU')
# Nova's default PCI-in-Placement classes of NVIDIA and AMD devices
PCI_GPU_CLASS_PREFIXES = ('CUSTOM_PCI_10DE_', 'CUSTOM_PCI_1002_')
VGPU_CLASS_PREFIX = 'CUSTOM_GPU_VGPU_'
# mdev vGPUs in a per-model class ([mdev_<type>] mdev_class, nova-conf)
MDEV_CLASS_PREFIX = resource_classes.MDEV_RC_PREFIX
_MODEL_TRAIT = 'CUSTOM_GPU_MODEL_'
_DRIVER_TRAIT = 'CUSTOM_GPU_DRIVER_'
_VENDOR_TRAIT = 'CUSTOM_GPU_VENDOR_'
PASSTHROUGH_TRAIT = naming.mode_trait(naming.MODE_PASSTHROUGH)
# <node>_pci_0000_84_00_0 (libvirt pGPU), <node>_0000:84:00.0 (PCI in
# Placement), <node>_gpu_0000:84:00.0 (ours)
_ADDR_RE = re.compile(
    r'(?:_pci_([0-9a-f]{4})_([0-9a-f]{2})_([0-9a-f]{2})_([0-7])'
    r'|_(?:gpu_)?([0-9a-f]{4}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7]))$',
    re.IGNORECASE)
PROVIDERS_VERSION = '1.36'


@dataclasses.dataclass
class ProviderView:
    """One resource provider as read from Placement."""

    uuid: str
    name: str
    root_uuid: str
    parent_uuid: str | None = None
    traits: list[str] = dataclasses.field(default_factory=list)
    inventories: dict[str, dict[str, int]] = dataclasses.field(
        default_factory=dict)
    usages: dict[str, int] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class GpuView:
    """One physical GPU (its providers joined)."""

    host: str
    address: str | None
    model: str
    mode: str                   # vgpu | passthrough
    vendor: str | None = None
    driver: str | None = None   # version from the state, else the branch
    # the driver branch of the CUSTOM_GPU_DRIVER_* trait in Placement
    trait_driver: str | None = None
    providers: list[str] = dataclasses.field(default_factory=list)
    total: int = 0
    used: int = 0
    reserved: int = 0
    health: str | None = None   # None: no state
    reasons: list[str] = dataclasses.field(default_factory=list)
    # where health and driver came from: agent | placement | None
    source: str | None = None
    # placement: when the agent last confirmed it (UTC, ISO 8601)
    as_of: str | None = None
    # the traits of its providers, together
    traits: list[str] = dataclasses.field(default_factory=list)

    @property
    def free(self) -> int:
        return max(self.total - self.reserved - self.used, 0)


@dataclasses.dataclass
class AuditReport:
    gpus: list[GpuView]
    groups: list[dict[str, Any]]
    driver_branches: dict[str, list[str]]
    reference_branch: str | None
    driver_outliers: list[dict[str, Any]]
    unhealthy: list[GpuView]
    reserved: list[GpuView]
    hosts_with_state: list[str]
    notes: list[str] = dataclasses.field(default_factory=list)
    # GPU hosts in Placement none of whose GPUs has live state: the
    # scheduler's missing_state_policy decides for them
    hosts_without_state: list[str] = dataclasses.field(default_factory=list)
    # host -> {source, reported_at, age_s, stale}: where its state came from
    state_sources: dict[str, dict[str, Any]] = dataclasses.field(
        default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        def gpu(g):
            d = dataclasses.asdict(g)
            d['free'] = g.free
            return d
        return {
            'gpus': [gpu(g) for g in self.gpus],
            'groups': self.groups,
            'drivers': {'branches': self.driver_branches,
                        'reference': self.reference_branch,
                        'outliers': self.driver_outliers},
            'unhealthy': [gpu(g) for g in self.unhealthy],
            'reserved': [gpu(g) for g in self.reserved],
            'hosts_with_state': self.hosts_with_state,
            'hosts_without_state': self.hosts_without_state,
            'state_sources': self.state_sources,
            'notes': self.notes,
        }


# -- reading Placement ---------------------------------------------------

def collect(client) -> list[ProviderView]:
    """Read the providers, with traits, inventories and usages of GPUs.

    Traits are read for every provider (the roots carry the agents'
    ``CUSTOM_GPU_HOST_*`` state), inventories for non-root providers only
    (GPUs live in child providers), usages for the GPU providers.

    ``client`` has ``get(path, version=...) -> dict`` (a
    :class:`gpu_nova_ext.placement.client.PlacementClient`).
    """
    body = client.get('/resource_providers', version=PROVIDERS_VERSION)
    views = []
    for rp in body.get('resource_providers', []):
        view = ProviderView(uuid=rp['uuid'], name=rp['name'],
                            root_uuid=rp.get('root_provider_uuid')
                            or rp['uuid'],
                            parent_uuid=rp.get('parent_provider_uuid'))
        base = '/resource_providers/%s' % rp['uuid']
        view.traits = client.get(base + '/traits',
                                 version=PROVIDERS_VERSION)['traits']
        if view.parent_uuid:
            inv = client.get(base + '/inventories',
                             version=PROVIDERS_VERSION)['inventories']
            view.inventories = {
                rc: {'total': v['total'], 'reserved': v.get('reserved', 0)}
                for rc, v in inv.items()}
            if is_gpu_provider(view):
                view.usages = client.get(
                    base + '/usages', version=PROVIDERS_VERSION)['usages']
        views.append(view)
    return views


# -- pure part -------------------------------------------------------------

def gpu_classes(view: ProviderView) -> list[str]:
    return [rc for rc in view.inventories
            if rc in GPU_RESOURCE_CLASSES
            or rc.startswith((naming.TRAIT_PREFIX, MDEV_CLASS_PREFIX)
                             + PCI_GPU_CLASS_PREFIXES)]


def is_gpu_provider(view: ProviderView) -> bool:
    if view.parent_uuid is None:
        return False
    if any(t.startswith((_MODEL_TRAIT, 'CUSTOM_GPU_MODE_'))
           for t in view.traits):
        return True
    return bool(gpu_classes(view))


def provider_address(name: str) -> str | None:
    """PCI address from a provider name Nova or we gave, else None."""
    m = _ADDR_RE.search(name)
    if not m:
        return None
    parts = [p for p in m.groups() if p is not None]
    return '%s:%s:%s.%s' % tuple(p.lower() for p in parts)


def _trait_value(traits: list[str], prefix: str) -> str | None:
    for trait in sorted(traits):
        if trait.startswith(prefix):
            return trait[len(prefix):]
    return None


def mode_of(views: list[ProviderView]) -> str:
    for view in views:
        if 'CUSTOM_GPU_MODE_VGPU' in view.traits:
            return 'vgpu'
        if PASSTHROUGH_TRAIT in view.traits:
            return 'passthrough'
        for rc in gpu_classes(view):
            if rc == 'VGPU' or rc.startswith((VGPU_CLASS_PREFIX,
                                              MDEV_CLASS_PREFIX)):
                return 'vgpu'
    return 'passthrough'


def model_of(views: list[ProviderView]) -> str | None:
    for view in views:
        model = _trait_value(view.traits, _MODEL_TRAIT)
        if model:
            return model
    for view in views:
        for rc in gpu_classes(view):
            if (rc.startswith(naming.TRAIT_PREFIX)
                    and not rc.startswith(VGPU_CLASS_PREFIX)):
                return rc[len(naming.TRAIT_PREFIX):]
            if rc.startswith(MDEV_CLASS_PREFIX):
                return rc[len(MDEV_CLASS_PREFIX):]
            if rc.startswith(PCI_GPU_CLASS_PREFIXES):
                return rc[len('CUSTOM_'):]
    return None


def _branch(driver: str | None) -> str | None:
    return driver.split('.')[0] if driver else None


def _group_providers(gpu_views: list[ProviderView],
                     state_by_provider: dict[str, tuple[str, dict]]):
    """-> list of (host_key, state gpu or None, [views]) per physical GPU."""
    joined: dict[tuple, list[ProviderView]] = collections.OrderedDict()
    state_of: dict[tuple, dict | None] = {}
    for view in gpu_views:
        known = state_by_provider.get(view.uuid)
        if known:
            key = (view.root_uuid, 'state', known[1]['pci_address'])
            state_of[key] = known[1]
        else:
            address = provider_address(view.name)
            if address and PASSTHROUGH_TRAIT in view.traits:
                key = (view.root_uuid, 'device', address)
            else:
                bus = address.rsplit(':', 1)[0] if address else view.uuid
                key = (view.root_uuid, 'bus', bus)
            state_of.setdefault(key, None)
        joined.setdefault(key, []).append(view)
    return [(key, state_of[key], views) for key, views in joined.items()]


def build_report(providers: list[ProviderView],
                 states: dict[str, dict] | None = None) -> AuditReport:
    """The audit of a cluster.  No I/O.

    From what :func:`collect` read and the live state payloads by host
    (design doc: State protocol), or the payloads read from Placement
    (``source`` ``placement``).
    """
    states = states or {}
    by_uuid = {p.uuid: p for p in providers}
    state_by_provider: dict[str, tuple[str, dict]] = {}
    state_by_root: dict[str, dict] = {}
    for host, payload in states.items():
        if payload.get('root_provider_uuid'):
            state_by_root[payload['root_provider_uuid']] = payload
        for gpu in payload.get('gpus', []):
            for uuid in gpu.get('provider_uuids') or []:
                state_by_provider[uuid] = (host, gpu)
    gpu_views = sorted((p for p in providers if is_gpu_provider(p)),
                       key=lambda p: p.name)
    notes = []
    gpus: list[GpuView] = []
    for (root, _kind, _key), sgpu, views in _group_providers(
            gpu_views, state_by_provider):
        root_view = by_uuid.get(root)
        host = root_view.name if root_view else root
        traits = sorted({t for v in views for t in v.traits})
        model = ((sgpu or {}).get('model') or model_of(views)
                 or 'UNKNOWN')
        driver = ((sgpu or {}).get('driver_version')
                  or _trait_value(traits, _DRIVER_TRAIT))
        vendor = ((sgpu or {}).get('vendor')
                  or (_trait_value(traits, _VENDOR_TRAIT) or '').lower()
                  or None)
        address = ((sgpu or {}).get('pci_address')
                   or min((provider_address(v.name) or '' for v in views),
                          default='') or None)
        view = GpuView(host=host, address=address, model=model,
                       mode=mode_of(views), vendor=vendor, driver=driver,
                       trait_driver=_trait_value(traits, _DRIVER_TRAIT),
                       providers=[v.uuid for v in views], traits=traits)
        for v in views:
            for rc in gpu_classes(v):
                view.total += v.inventories[rc]['total']
                view.reserved += v.inventories[rc]['reserved']
                view.used += v.usages.get(rc, 0)
        if sgpu:
            view.health = sgpu.get('health', {}).get('state')
            view.reasons = list(sgpu.get('health', {}).get('reasons', []))
            payload = states.get(state_by_provider[views[0].uuid][0], {})
            view.source = payload.get('source', 'agent')
            view.as_of = payload.get('reported_at')
        gpus.append(view)
    gpus.sort(key=lambda g: (g.host, g.address or '', g.model))

    groups: dict[tuple, dict[str, Any]] = {}
    for g in gpus:
        grp = groups.setdefault((g.host, g.model, g.mode), {
            'host': g.host, 'model': g.model, 'mode': g.mode, 'gpus': 0,
            'total': 0, 'used': 0, 'free': 0, 'reserved': 0,
            'unhealthy': 0})
        grp['gpus'] += 1
        for k in ('total', 'used', 'free', 'reserved'):
            grp[k] += getattr(g, k)
        grp['unhealthy'] += g.health == 'unhealthy'

    # driver consistency: one branch per host (mixed hosts count for each)
    host_branches: dict[str, set[str]] = collections.defaultdict(set)
    for g in gpus:
        if _branch(g.driver):
            host_branches[g.host].add(_branch(g.driver))
    branches: dict[str, list[str]] = collections.defaultdict(list)
    for host, host_set in sorted(host_branches.items()):
        for b in sorted(host_set):
            branches[b].append(host)
    reference = None
    outliers = []
    if branches:
        reference = max(branches, key=lambda b: (len(branches[b]),
                                                 _branch_key(b)))
        for host, host_set in sorted(host_branches.items()):
            if host_set != {reference}:
                outliers.append({'host': host,
                                 'branches': sorted(host_set,
                                                    key=_branch_key),
                                 'expected': reference})
    hosts_without = sorted({g.host for g in gpus} - set(host_branches))
    if hosts_without:
        notes.append('no driver known for %s (no CUSTOM_GPU_DRIVER_* trait '
                     'and no live state).' % ', '.join(hosts_without))
    sources = {host: {'source': p.get('source', 'agent'),
                      'reported_at': p.get('reported_at'),
                      'age_s': p.get('age_s'), 'stale': p.get('stale', False)}
               for host, p in sorted(states.items())}
    agents = {h for h, p in sources.items() if p['source'] == 'agent'}
    with_state = sorted(agents)
    live = {g.host for g in gpus if g.health is not None
            and g.host in agents}
    without_state = sorted({g.host for g in gpus} - live) if agents else []
    unknown = sorted({g.host for g in gpus if g.health is None})
    if not states:
        notes.append('no live GPU state and none published in Placement: '
                     'health is unknown (no agent keeps '
                     'CUSTOM_GPU_HOST_REPORTED_* on its compute node '
                     'provider: upgrade gpu-nova-agent; or use --state-wait '
                     'with the schedulers\' transport_url).')
    elif unknown:
        notes.append('no GPU state for %s: health unknown (is gpu-nova-agent '
                     'running there?).' % ', '.join(unknown))
    stale = sorted(h for h, p in sources.items() if p['stale'])
    if stale:
        notes.append('stale GPU state in Placement for %s: the agent has '
                     'not confirmed it for over %d h (is gpu-nova-agent '
                     'running there?).' % (', '.join(stale),
                                           live_state.STALE_AFTER /
                                           datetime.timedelta(hours=1)))
    return AuditReport(
        gpus=gpus, groups=list(groups.values()),
        driver_branches=dict(branches), reference_branch=reference,
        driver_outliers=outliers,
        unhealthy=[g for g in gpus if g.health == 'unhealthy'],
        reserved=[g for g in gpus if g.reserved > 0],
        hosts_with_state=with_state, notes=notes,
        hosts_without_state=without_state, state_sources=sources)


def _branch_key(branch: str):
    return (0, int(branch)) if branch.isdigit() else (1, branch)
