# SPDX-License-Identifier: Apache-2.0

"""What the scheduler plugins read of a host's GPU state.

Design doc: State protocol.  Built from validated messages only, and
read-only once built: a :class:`HostFacts` (its :class:`GpuFacts`) per
facts message, a :class:`HostRecord` per metrics message.
"""
import dataclasses
import functools
from typing import Any

from gpu_nova_ext import naming
from gpu_nova_ext.state import schema

VGPU_MODES = frozenset([naming.MODE_VGPU, naming.MODE_VGPU_VFIO,
                        naming.MODE_MIG_VGPU])
# the thermal headroom's base where NVML tells no slowdown threshold
DEFAULT_SLOWDOWN_C = 90.0

# Filter families: the GPU fact a filter judges.  A host's GPUs grouped by
# fact (usually one group per family) are judged once per distinct fact.
FAMILY_MODEL = 'model'
FAMILY_MEMORY = 'memory'
FAMILY_CAPABILITY = 'capability'
FAMILY_HEALTH = 'health'
# the project a GPU is reserved for (None: not reserved)
FAMILY_RESERVATION = 'reservation'
_FACT_FAMILIES = (FAMILY_MODEL, FAMILY_MEMORY, FAMILY_CAPABILITY,
                  FAMILY_RESERVATION)

ORDER_LAST = float('inf')


@functools.lru_cache(maxsize=4096)
def parse_version(value: str | None) -> tuple[int, ...] | None:
    """'550.54.15' -> (550, 54, 15); None when empty."""
    if not value:
        return None
    return tuple(int(p) for p in value.split('.'))


@functools.lru_cache(maxsize=4096)
def _model(value: str) -> str:
    return naming.normalize_model(value)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class GpuFacts:
    """One GPU as its facts describe it."""

    index: int                        # position in the message's gpus
    pci_address: str
    provider_uuids: tuple[str, ...]
    vendor: str | None                # lower case
    model: str                        # normalized; '' when unknown
    memory_mib: int | None            # physical memory
    mode: str | None
    offered_vgpu_type: str | None
    vgpu_type_keys: frozenset         # ids and names of the offered type(s)
    effective_memory_mib: int | None  # vGPU framebuffer or physical memory
    driver: tuple[int, ...] | None
    cuda_cc: tuple[int, ...] | None
    capacity: float                   # GPU equivalents free when usable
    unit_per_instance: float          # GPU equivalents one instance takes
    # free only when not assigned: a whole GPU without vGPU capacity data
    whole: bool
    # project id (openstack gpu reservation create)
    reserved_for: str | None
    # topology (design doc: Topology): None when unknown or unlinked
    numa_node: int | None
    link_domain: str | None           # NVLink/xGMI connected component
    pci_switch: str | None            # the PCIe switch it sits behind
    source: dict                      # the validated facts object

    def fact(self, family: str) -> Any:
        """The hashable fact a filter family judges (not health)."""
        if family == FAMILY_MODEL:
            return (self.vendor, self.model, self.mode, self.vgpu_type_keys)
        if family == FAMILY_MEMORY:
            return self.effective_memory_mib
        if family == FAMILY_RESERVATION:
            return self.reserved_for
        return (self.cuda_cc, self.driver)


def _offered_entry(gpu: dict) -> dict | None:
    offered = gpu.get('offered_vgpu_type')
    types = gpu.get('vgpu_types') or []
    if offered:
        for entry in types:
            if entry.get('id') == offered or entry.get('name') == offered:
                return entry
        return None
    return types[0] if len(types) == 1 else None


def gpu_facts(index: int, gpu: dict) -> GpuFacts:
    """GpuFacts of one validated facts object."""
    mode = gpu.get('mode')
    entry = _offered_entry(gpu)
    offered = gpu.get('offered_vgpu_type')
    # the offered type's ids and names; none offered: every type's
    named = ([entry] if entry is not None else [] if offered
             else gpu.get('vgpu_types') or [])
    keys = frozenset(k for k in [offered] + [
        t.get(f) for t in named for f in ('id', 'name')] if k)
    if mode == naming.MODE_PASSTHROUGH:
        keys = frozenset()          # a whole GPU offers no vGPU type
    capacity, per_instance, whole = 1.0, 1.0, True
    if mode in VGPU_MODES and entry is not None:
        available = entry.get('available') or 0
        most = entry.get('max')
        whole = False
        if most:
            capacity, per_instance = min(1.0, available / most), 1.0 / most
        else:
            capacity = 1.0 if available else 0.0
    memory = gpu.get('memory_mib')
    numa = gpu.get('numa_node')
    if mode in VGPU_MODES:
        effective = entry.get('framebuffer_mib') if entry else None
    else:
        effective = memory
    return GpuFacts(
        index=index, pci_address=gpu['pci_address'],
        provider_uuids=tuple(gpu.get('provider_uuids') or ()),
        vendor=(gpu.get('vendor') or '').lower() or None,
        model=_model(gpu.get('model') or ''), memory_mib=memory, mode=mode,
        offered_vgpu_type=offered, vgpu_type_keys=keys,
        effective_memory_mib=effective,
        driver=parse_version(gpu.get('driver_version')),
        cuda_cc=parse_version(gpu.get('cuda_cc')),
        capacity=capacity, unit_per_instance=per_instance, whole=whole,
        reserved_for=gpu.get('reserved_for') or None,
        numa_node=numa if numa is not None and numa >= 0 else None,
        link_domain=gpu.get('link_domain') or None,
        pci_switch=gpu.get('pci_switch') or None, source=gpu)


def _groups(gpus) -> dict[str, dict[Any, tuple[str, ...]]]:
    """family -> {fact: provider UUIDs} of the fact families."""
    out = {}
    for family in _FACT_FAMILIES:
        groups: dict[Any, tuple[str, ...]] = {}
        for gpu in gpus:
            fact = gpu.fact(family)
            groups[fact] = groups.get(fact, ()) + gpu.provider_uuids
        out[family] = groups
    return out


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class HostFacts:
    """One host's facts: its identity and its GPUs."""

    host: str
    nodename: str | None
    root_provider_uuid: str | None
    agent_mode: str | None
    digest: str                      # the agent's, of these facts
    gpus: tuple[GpuFacts, ...]
    by_provider: dict[str, GpuFacts]
    # family -> {fact: provider UUIDs of the GPUs with that fact}
    groups: dict[str, dict[Any, tuple[str, ...]]]
    # per GPU its link domain; None when no GPU of the host has one
    link_domains: tuple[str | None, ...] | None = None

    def reserved_providers(self, project: str | None) -> tuple[str, ...]:
        """Provider UUIDs of the GPUs reserved for ``project``."""
        if not project:
            return ()
        return self.groups[FAMILY_RESERVATION].get(project, ())

    def names(self) -> tuple[str, ...]:
        """What the host is looked up by: root provider, node, host."""
        return tuple(n for n in (self.root_provider_uuid, self.nodename,
                                 self.host) if n)

    def ranked(self, key) -> tuple[dict[str, float], tuple[str, ...]]:
        """(provider -> rank, providers best first) of GPUs by ``key``."""
        ordered = sorted(self.gpus, key=key)
        ranks = {rp: rank for rank, gpu in enumerate(ordered)
                 for rp in gpu.provider_uuids}
        best = tuple(ranks)
        if self.root_provider_uuid:     # ranks last
            ranks[self.root_provider_uuid] = ORDER_LAST
        return ranks, best


def host_facts(message: dict, held: HostFacts | None = None) -> HostFacts:
    """HostFacts of a validated facts message.

    ``held``: the host's previous facts, whose unchanged GpuFacts serve.
    """
    old = held.gpus if held is not None else ()
    records = tuple(old[i] if i < len(old) and old[i].source == g
                    else gpu_facts(i, g)
                    for i, g in enumerate(message['gpus']))
    return HostFacts(
        host=message['host'], nodename=message.get('nodename'),
        root_provider_uuid=message.get('root_provider_uuid'),
        agent_mode=message.get('agent_mode'), digest=message['digest'],
        gpus=records,
        by_provider={rp: g for g in records for rp in g.provider_uuids},
        groups=_groups(records),
        link_domains=tuple(g.link_domain for g in records) if any(
            g.link_domain for g in records) else None)


# not frozen: built for every metrics message, and a frozen dataclass sets
# each field through object.__setattr__; read-only by convention
@dataclasses.dataclass(slots=True, kw_only=True, eq=False)
class HostRecord:
    """The live state of one host: its facts and its latest metrics."""

    facts: HostFacts
    generated_at: float
    received_at: float                 # the cache's clock
    seq: int                           # the agent's
    # per GPU, the metrics message's entry: health, assigned, metrics
    dynamic: tuple[dict, ...]
    health_rank: tuple[int, ...]       # per GPU: 0 healthy .. 2 unhealthy
    free: tuple[float, ...]            # per GPU: GPU equivalents free
    utilization: tuple[float | None, ...]       # 0..1
    thermal_headroom: tuple[float | None, ...]  # degrees C below slowdown
    power_headroom: tuple[float | None, ...]    # 0..1 of the power limit
    free_units: float                  # over usable GPUs
    idle_gpus: int                     # usable GPUs with nothing on them
    # usable whole GPUs whose use the agent does not tell (no assigned)
    passthrough_unknown: tuple[GpuFacts, ...]
    health_groups: dict[int, tuple[str, ...]]
    # policy -> order(policy), filled on first use
    orders: dict = dataclasses.field(default_factory=dict)
    # link domain -> GPU units free in it, filled on first use
    domains: dict | None = None

    @property
    def host(self) -> str:
        return self.facts.host

    @property
    def gpus(self) -> tuple[GpuFacts, ...]:
        return self.facts.gpus

    @property
    def by_provider(self) -> dict[str, GpuFacts]:
        return self.facts.by_provider

    def groups(self, family: str) -> dict[Any, tuple[str, ...]]:
        """{fact: provider UUIDs} of a filter family."""
        if family == FAMILY_HEALTH:
            return self.health_groups
        return self.facts.groups[family]

    def domain_free(self) -> dict[str, float]:
        """Link domain -> the GPU units free in it (design doc: Topology)."""
        if self.domains is None:
            out: dict[str, float] = {}
            for gpu in self.facts.gpus:
                if gpu.link_domain is not None:
                    out[gpu.link_domain] = (out.get(gpu.link_domain, 0.0)
                                            + self.free[gpu.index])
            self.domains = out
        return self.domains

    def order(self, policy: str, free: list[float] | None = None
              ) -> tuple[dict[str, float], tuple[str, ...]]:
        """:meth:`HostFacts.ranked` by health, then a policy's order.

        KeyError for an unknown policy.  ``free``: the free units per GPU
        to order by instead of the record's (a multi-create's earlier
        servers taken off; not kept).
        """
        if free is not None:
            return self._order(policy, free)
        found = self.orders.get(policy)
        if found is None:
            found = self.orders[policy] = self._order(policy, self.free)
        return found

    def _order(self, policy: str, free: list[float]) -> tuple[dict, tuple]:
        # per GPU: the value a policy puts first (None: last)
        if policy == 'pack':
            first = free
        elif policy == 'spread':
            first = [-f for f in free]
        elif policy == 'coolest':
            first = [None if h is None else -h
                     for h in self.thermal_headroom]
        elif policy == 'least_loaded':
            first = self.utilization
        else:
            raise KeyError(policy)
        health = self.health_rank
        return self.facts.ranked(lambda g: (
            health[g.index],
            ORDER_LAST if first[g.index] is None else first[g.index],
            g.pci_address))


def _headrooms(values: dict | None) -> tuple:
    """(utilization 0..1, thermal headroom, power headroom) or Nones."""
    if not values:
        return None, None, None
    get = values.get
    util = get('utilization_pct')
    temp = get('temperature_c')
    watts = get('power_w')
    limit = get('power_limit_w')
    if util is not None:
        util = util / 100.0
    if temp is not None:
        temp = (get('slowdown_temperature_c') or DEFAULT_SLOWDOWN_C) - temp
    if watts is None or not limit:
        watts = None
    else:
        watts = max(0.0, (limit - watts) / limit)
    return util, temp, watts


def host_record(facts: HostFacts, dynamic: list, *, generated_at: float,
                received_at: float, seq: int) -> HostRecord:
    """The HostRecord of a validated metrics message's ``gpus``."""
    ranks, free, utils, temps, powers = [], [], [], [], []
    passthrough, health_groups = [], {}
    for gpu, state in zip(facts.gpus, dynamic):
        rank = schema.HEALTH_RANK[state['health']['state']]
        health_groups.setdefault(rank, []).extend(gpu.provider_uuids)
        assigned = state.get('assigned')
        units = gpu.capacity
        if rank == 2 or (assigned and gpu.whole):
            units = 0.0     # an unhealthy GPU has nothing free
        elif (assigned is None and gpu.mode == naming.MODE_PASSTHROUGH
                and gpu.provider_uuids):
            passthrough.append(gpu)
        util, temp, watts = _headrooms(state.get('metrics'))
        ranks.append(rank)
        free.append(units)
        utils.append(util)
        temps.append(temp)
        powers.append(watts)
    return HostRecord(
        facts=facts, generated_at=float(generated_at),
        received_at=received_at, seq=seq, dynamic=tuple(dynamic),
        health_rank=tuple(ranks), free=tuple(free),
        utilization=tuple(utils), thermal_headroom=tuple(temps),
        power_headroom=tuple(powers),
        free_units=sum(free), idle_gpus=sum(1 for f in free if f >= 1.0),
        passthrough_unknown=tuple(passthrough),
        health_groups={rank: tuple(rps)
                       for rank, rps in health_groups.items()})
