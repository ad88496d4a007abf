"""The scheduler-side GPU state cache (design doc: State protocol).

One :class:`GpuStateCache` per nova-scheduler process keeps the newest
valid payload per host.  Ingestion (:meth:`GpuStateCache.update`, also the
RPC endpoint's path) validates the payload and precomputes what the GPU
filters and weighers need, so that their per-request work is dict lookups
and attribute reads:

* :class:`GpuRecord` per GPU: normalized model, effective memory (a vGPU's
  framebuffer), parsed driver and CUDA versions, health rank, free
  capacity;
* :class:`HostRecord` per payload: the host's GPUs, ``provider UUID ->
  GpuRecord``, free/total GPU capacity, per GPU the utilization, thermal
  and power headroom and their host-wide fallbacks, the GPU order of each
  intra-host policy, and ``verdicts``, which filters fill per constraint;
* ``host/nodename/root provider UUID -> HostRecord`` and a process-wide
  ``provider UUID -> GpuRecord`` index (for tools; rebuilt when asked
  after a change, so ingestion does not maintain it).

A host's state is live for ``[gpu_scheduler] state_ttl`` seconds after it
was *received* (the scheduler's clock: agents' clocks may be skewed); an
older ``generated_at`` never replaces a newer one, and a payload generated
more than ``state_ttl`` ahead of this scheduler's wall clock is rejected.

Between two payloads of a host usually only the GPUs' metrics change.  The
cache keeps a host's last two :class:`HostShape` (what a payload gives
without its metrics: the GpuRecords and every lookup above that does not
depend on metrics, filter verdicts included) under a type-exact key of
that part (:func:`gpu_nova_ext.state.payload.static_part`): a payload with
a known key needs only its top-level fields, metrics and size checked
(:func:`~gpu_nova_ext.state.payload.quick_valid`) and its metrics read
into a new HostRecord that shares the rest with the shape.
"""
from collections.abc import Callable
import dataclasses
import itertools
import os
import threading
import time
from typing import Any

from oslo_config import cfg
from oslo_log import log as logging

from gpu_nova_ext import conf as gconf
from gpu_nova_ext import exception
from gpu_nova_ext import naming
from gpu_nova_ext.state import payload as schema

LOG = logging.getLogger(__name__)

HEALTH_RANK = {'healthy': 0, 'degraded': 1, 'unhealthy': 2}
VGPU_MODES = frozenset([naming.MODE_VGPU, naming.MODE_VGPU_VFIO,
                        naming.MODE_MIG_VGPU])
# Used for thermal headroom when NVML did not report the slowdown
# threshold (typical of current data-centre GPUs).
DEFAULT_SLOWDOWN_C = 90.0

# Filter families: the GPU facts a filter judges.  A host's GPUs grouped
# by fact (most hosts have one group per family) let a filter judge a
# host with one memoized lookup per distinct fact instead of per GPU.
FAMILY_MODEL = 'model'
FAMILY_MEMORY = 'memory'
FAMILY_CAPABILITY = 'capability'
FAMILY_HEALTH = 'health'
FAMILIES = (FAMILY_MODEL, FAMILY_MEMORY, FAMILY_CAPABILITY, FAMILY_HEALTH)

_DEFAULT_TTL = 120.0
_DEFAULT_MAX_BYTES = 1048576
_DEFAULT_MAX_GPUS = 64


def _parse_version(value: str | None) -> tuple[int, ...] | None:
    if not value:
        return None
    try:
        return tuple(int(p) for p in value.split('.'))
    except ValueError:
        return None


_MISSING = object()


def _remembered(table: dict, limit: int, key, make):
    """``table[key]``, made by ``make(key)`` the first time.

    Bounded: the table is cleared when it holds ``limit`` entries.
    """
    found = table.get(key, _MISSING)
    if found is _MISSING:
        if len(table) >= limit:
            table.clear()
        found = table.setdefault(key, make(key))
    return found


# A fleet has few distinct models and versions: their parsed forms are
# remembered (bounded: cleared when full).
_MEMO_LIMIT = 4096
_versions: dict = {}
_models: dict = {}


def _version(value: str | None) -> tuple[int, ...] | None:
    return _remembered(_versions, _MEMO_LIMIT, value, _parse_version)


def _model(value: str) -> str:
    return _remembered(_models, _MEMO_LIMIT, value, naming.normalize_model)


@dataclasses.dataclass(eq=False, slots=True)
class GpuRecord:
    """One GPU of a host, in the shape the plugins read.

    What the GPU's payload entry gives without its metrics: built once per
    host shape (:class:`HostShape`) and shared by every :class:`HostRecord`
    of that shape.  The values a payload's metrics give are the
    HostRecord's, per GPU ``index`` (``record.utilization[gpu.index]``).
    """

    host: str
    index: int                       # position in the payload's gpus
    # from here to unit_per_instance: _gpu_static(), in this order
    pci_address: str
    provider_uuids: tuple[str, ...]
    vendor: str | None
    model: str                       # normalized; '' when unknown
    memory_mib: int | None           # physical memory
    mode: str | None
    offered_vgpu_type: str | None
    vgpu_type_keys: frozenset        # ids and names of the offered type(s)
    effective_memory_mib: int | None  # vGPU framebuffer or physical memory
    driver: tuple[int, ...] | None
    cuda_cc: tuple[int, ...] | None
    health: str
    health_rank: int
    free_units: float                # GPU equivalents free (0..1)
    unit_per_instance: float         # GPU equivalents one instance takes

    def facts(self) -> dict[str, Any]:
        """What each filter family reads, as hashable values."""
        return {
            FAMILY_MODEL: (self.vendor, self.model, self.mode,
                           self.vgpu_type_keys),
            FAMILY_MEMORY: self.effective_memory_mib,
            FAMILY_CAPABILITY: (self.cuda_cc, self.driver),
            FAMILY_HEALTH: self.health_rank,
        }


@dataclasses.dataclass(eq=False, slots=True)
class HostRecord:
    """The live state of one host: one payload.

    What does not depend on the payload's metrics comes from its
    :class:`HostShape` and is shared with the host's other payloads of
    that shape (read-only).
    """

    host: str
    nodename: str | None
    root_provider_uuid: str | None
    generated_at: float
    received_at: float
    # the payload itself where its shape has no key (see payload()); None
    # once replaced
    kept: dict[str, Any] | None
    shape: 'HostShape'
    gpus: tuple[GpuRecord, ...]
    by_provider: dict[str, GpuRecord]
    free_units: float                # over healthy and degraded GPUs
    total_units: float               # GPUs that are not unhealthy
    idle_gpus: int                   # usable GPUs with nothing on them
    # usable whole-GPU passthrough GPUs whose use the payload does not
    # tell (no "assigned"): counted free above; Placement's candidates tell
    passthrough_unknown: tuple[GpuRecord, ...]
    # from the metrics, per GpuRecord.index (None: not reported)
    utilization: tuple[float | None, ...]       # 0..1
    thermal_headroom: tuple[float | None, ...]  # degrees C below slowdown
    power_headroom: tuple[float | None, ...]    # 0..1 of the power limit
    # the same over usable GPUs: mean, max, max
    mean_utilization: float | None
    max_thermal_headroom: float | None
    max_power_headroom: float | None
    # family -> {fact: provider UUIDs of the GPUs with that fact}
    groups: dict[str, dict[Any, tuple[str, ...]]]
    # family -> frozenset of the facts of the host's GPUs (hosts alike
    # share a verdict)
    fact_sets: dict[str, frozenset]
    # intra-host policy -> ({provider UUID: rank, 0 best}, provider UUIDs
    # best GPU first) of the policies that follow from the shape (pack,
    # spread); the root provider ranks last (ORDER_LAST) so that a
    # candidate's rank is the min over its providers.  order() gives any
    # policy.
    orders: dict[str, tuple[dict[str, float], tuple[str, ...]]]
    # FAMILIES order -> small int id of the interned fact set (or -1):
    # filters look verdicts up by it without touching the set itself
    fact_ids: tuple[int, ...]
    # filters' verdicts on facts of this shape, per constraint: shared by
    # the host's payloads of this shape
    verdicts: dict
    # what depends on this payload's metrics: filters' verdicts, the
    # metric-dependent policies' orders (order())
    memo: dict = dataclasses.field(default_factory=dict)
    # set when a newer payload (or remove()) supersedes this record
    replaced: bool = False
    # with the shape's key, what payload() rebuilds the payload from: its
    # fields but "gpus" (plain values) and its GPUs' metrics objects
    top: dict[str, Any] | None = None
    metrics: tuple | None = None

    def payload(self) -> dict[str, Any] | None:
        """The payload, None once replaced.

        The cache does not keep decoded payloads (about a hundred
        containers per host, which the garbage collector would walk on
        every full pass): an equal one is rebuilt, a new copy on every
        call, from the shape's key, ``top`` and ``metrics``; where the
        shape has no key, the payload itself was kept.
        """
        # each read once: a newer payload may replace this record (and
        # clear these) meanwhile
        kept, top, metrics = self.kept, self.top, self.metrics
        if self.replaced:
            return None
        if kept is not None:
            return kept
        if top is None or metrics is None:
            return None
        return schema.rebuild(self.shape.key, top, metrics)

    def names(self) -> tuple[str, ...]:
        return tuple(n for n in (self.root_provider_uuid, self.nodename,
                                 self.host) if n)

    def order(self, policy: str
              ) -> tuple[dict[str, float], tuple[str, ...]]:
        """(provider -> rank, providers best first) for a policy.

        The policies that depend on metrics (coolest, least_loaded) are
        sorted on first use and kept in ``memo`` (most requests use one
        policy; concurrent first uses compute the same value).  KeyError
        for an unknown policy.
        """
        found = self.orders.get(policy)
        if found is None:
            key = ('order', policy)
            found = self.memo.get(key)
            if found is None:
                if policy not in INTRA_HOST_POLICIES:
                    raise KeyError(policy)
                found = self.memo[key] = _order(
                    self.gpus, self.root_provider_uuid, policy,
                    self.utilization, self.thermal_headroom)
        return found


def _capacity(gpu: dict[str, Any], mode: str | None
              ) -> tuple[float, float, dict | None]:
    """(free units, units per instance, offered vGPU type entry)."""
    offered = gpu.get('offered_vgpu_type')
    types = gpu.get('vgpu_types') or []
    entry = None
    if offered:
        for t in types:
            if t.get('id') == offered or t.get('name') == offered:
                entry = t
                break
    elif len(types) == 1:
        entry = types[0]
    if mode in VGPU_MODES and entry is not None:
        available = entry.get('available') or 0
        most = entry.get('max')
        if most:
            return min(1.0, available / most), 1.0 / most, entry
        return (1.0 if available else 0.0), 1.0, entry
    if gpu.get('assigned'):
        return 0.0, 1.0, entry
    return 1.0, 1.0, entry


def _gpu_static(gpu: dict[str, Any]) -> tuple:
    """GpuRecord fields pci_address..unit_per_instance of a GPU object.

    They depend on everything of the (validated) object but its metrics.
    """
    mode = gpu.get('mode')
    free, per_instance, entry = _capacity(gpu, mode)
    health = (gpu.get('health') or {}).get('state') or 'unhealthy'
    offered = gpu.get('offered_vgpu_type')
    if mode == naming.MODE_PASSTHROUGH:
        keys = frozenset()       # a whole GPU offers no vGPU type
    elif entry is not None:
        keys = frozenset(k for k in (entry.get('id'), entry.get('name'),
                                     offered) if k)
    elif offered:
        keys = frozenset([offered])
    else:
        keys = frozenset(k for t in gpu.get('vgpu_types') or []
                         for k in (t.get('id'), t.get('name')) if k)
    memory = gpu.get('memory_mib')
    if mode in VGPU_MODES:
        effective = entry.get('framebuffer_mib') if entry else None
    else:
        effective = memory
    if health == 'unhealthy':
        free = 0.0
    return (gpu['pci_address'],
            tuple(gpu.get('provider_uuids') or ()),
            (gpu.get('vendor') or '').lower() or None,
            _model(gpu.get('model') or ''),
            memory,
            mode,
            offered,
            keys,
            effective,
            _version(gpu.get('driver_version')),
            _version(gpu.get('cuda_cc')),
            health,
            HEALTH_RANK.get(health, 2),
            free,
            per_instance)


ORDER_LAST = float('inf')
INTRA_HOST_POLICIES = ('pack', 'spread', 'coolest', 'least_loaded')


def _order_key(policy: str, utilization: list, thermal: list
               ) -> Callable[[GpuRecord], tuple]:
    """Sort key of a host's GPUs for an intra-host policy (best first).

    Healthy GPUs come before degraded ones, those before unhealthy ones.
    ``utilization`` and ``thermal`` are the host record's, per GPU index.
    """
    if policy == 'spread':
        return lambda g: (g.health_rank, -g.free_units, g.pci_address)
    if policy == 'coolest':
        def coolest(g):
            headroom = thermal[g.index]
            return (g.health_rank,
                    -(headroom if headroom is not None else -ORDER_LAST),
                    g.pci_address)
        return coolest
    if policy == 'least_loaded':
        def least_loaded(g):
            used = utilization[g.index]
            return (g.health_rank, used if used is not None else ORDER_LAST,
                    g.pci_address)
        return least_loaded
    # pack: the GPU with the least free capacity left
    return lambda g: (g.health_rank, g.free_units, g.pci_address)


# Intra-host policies whose order follows from the GPU objects without
# their metrics (the rest also depend on the metrics).
STATIC_POLICIES = ('pack', 'spread')


def _order(gpus, root: str | None, policy: str, utilization: list,
           thermal: list) -> tuple[dict[str, float], tuple[str, ...]]:
    """For one policy: provider -> rank, and providers best first."""
    ranks = {}
    if root:
        ranks[root] = ORDER_LAST
    ordered = sorted(gpus, key=_order_key(policy, utilization, thermal))
    for rank, gpu in enumerate(ordered):
        for rp in gpu.provider_uuids:
            ranks[rp] = rank
    return ranks, tuple(rp for gpu in ordered for rp in gpu.provider_uuids)


# Equal fact sets of different hosts interned to one object, so that a
# filter's per-request verdict memo finds them by identity, not by deep
# comparison.  Bounded: cleared when it grows past _INTERN_LIMIT.
_INTERN_LIMIT = 65536
_interned: dict = {}
_fact_set_ids: dict = {}
_next_fact_set_id = itertools.count()


def _intern(value):
    return _remembered(_interned, _INTERN_LIMIT, value, lambda v: v)


def fact_set_id(fact_set: frozenset) -> int:
    """A stable small int per distinct fact set (never reused)."""
    return _remembered(_fact_set_ids, _INTERN_LIMIT, fact_set,
                       lambda _s: next(_next_fact_set_id))


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


class HostShape:
    """What a validated payload gives without its GPUs' metrics.

    Built from the host name, the root provider and the GPU objects (their
    metrics are not read); :meth:`record` adds a payload's metrics.  The
    cache keeps a host's last shapes under :func:`schema.static_part`'s
    key, so that a payload whose GPUs changed only their metrics is checked
    and ingested without redoing this: its record shares the shape's
    GpuRecords, lookups and filter verdicts.  Read-only once built, but for
    ``verdicts``, which filters fill.
    """

    __slots__ = ('host', 'gpus_size', 'root', 'gpus', 'by_provider',
                 'usable_flags', 'passthrough', 'free_units', 'total_units',
                 'idle_gpus', 'groups', 'fact_sets', 'fact_ids', 'orders',
                 'verdicts', 'key')

    def __init__(self, host: str, gpus: list, root: str | None,
                 gpus_size: int = -1, key: bytes | None = None) -> None:
        self.host = host
        #: schema.static_part()'s key of the payloads of this shape (None:
        #: the shape's records keep their payloads)
        self.key = key
        #: compact JSON size of the GPU objects without metrics (-1: unknown)
        self.gpus_size = gpus_size
        self.root = root
        records = self.gpus = tuple(GpuRecord(host, i, *_gpu_static(g))
                                    for i, g in enumerate(gpus))
        self.by_provider = {rp: g for g in records for rp in g.provider_uuids}
        self.usable_flags = tuple(g.health_rank < 2 for g in records)
        usable = [g for g in records if g.health_rank < 2]
        self.passthrough = tuple(
            g for g in usable
            if g.mode == naming.MODE_PASSTHROUGH
            and gpus[g.index].get('assigned') is None and g.provider_uuids)
        self.free_units = sum(g.free_units for g in usable)
        self.total_units = float(len(usable))
        self.idle_gpus = sum(1 for g in usable if g.free_units >= 1.0)
        groups: dict[str, dict[Any, list[str]]] = {}
        for gpu in records:
            for family, fact in gpu.facts().items():
                groups.setdefault(family, {}).setdefault(fact, []).extend(
                    gpu.provider_uuids)
        self.groups = {family: {fact: tuple(rps)
                                for fact, rps in facts.items()}
                       for family, facts in groups.items()}
        self.fact_sets = {family: _intern(frozenset(facts))
                          for family, facts in groups.items()}
        self.fact_ids = tuple(fact_set_id(self.fact_sets[f])
                              if f in self.fact_sets else -1
                              for f in FAMILIES)
        self.orders = {policy: _order(records, root, policy, (), ())
                       for policy in STATIC_POLICIES}
        self.verdicts = {}

    def record(self, payload: dict[str, Any], received_at: float,
               metrics: list | None = None) -> HostRecord:
        """The HostRecord of a validated payload of this shape.

        :param metrics: the payload's metrics per GPU as
            :func:`schema.static_part` gives them (with a shape that has a
            key, the record keeps them and the payload's top-level fields,
            not the payload); None reads them from the payload.
        """
        if metrics is None or self.key is None:
            kept = payload
            top = None
            if metrics is None:
                metrics = [g.get('metrics') for g in payload['gpus']]
        else:
            kept = None
            top = {k: v for k, v in payload.items() if k != 'gpus'}
        absent = schema.ABSENT
        utils = []
        temps = []
        powers = []
        # over usable GPUs, for the host-wide fallbacks
        util_sum = 0.0
        util_count = 0
        thermal = None
        power = None
        for values, usable in zip(metrics, self.usable_flags):
            if not values or values is absent:
                utils.append(None)
                temps.append(None)
                powers.append(None)
                continue
            get = values.get
            util = get('utilization_pct')
            temp = get('temperature_c')
            watts = get('power_w')
            limit = get('power_limit_w')
            if util is not None:
                util = util / 100.0
            if temp is not None:
                temp = (get('slowdown_temperature_c')
                        or DEFAULT_SLOWDOWN_C) - temp
            if watts is None or not limit:
                watts = None
            else:
                watts = (limit - watts) / limit
                if watts < 0.0:
                    watts = 0.0
            utils.append(util)
            temps.append(temp)
            powers.append(watts)
            if usable:
                if util is not None:
                    util_sum += util
                    util_count += 1
                if temp is not None and (thermal is None or temp > thermal):
                    thermal = temp
                if watts is not None and (power is None or watts > power):
                    power = watts
        gpus = self.gpus
        root = self.root
        # positional: HostRecord's field order
        return HostRecord(
            self.host,
            payload.get('nodename'),
            root,
            float(payload['generated_at']),
            received_at,
            kept,
            self,
            gpus,
            self.by_provider,
            self.free_units,
            self.total_units,
            self.idle_gpus,
            self.passthrough,
            # tuples: of plain values, the garbage collector stops
            # tracking them at its first pass (it keeps walking lists)
            tuple(utils),
            tuple(temps),
            tuple(powers),
            util_sum / util_count if util_count else None,
            thermal,
            power,
            self.groups,
            self.fact_sets,
            self.orders,
            self.fact_ids,
            self.verdicts,
            {},
            False,
            top,
            None if kept is not None else tuple(metrics),
        )


def build_host_record(payload: dict[str, Any],
                      received_at: float) -> HostRecord:
    """Precompute a host's lookups from a validated payload."""
    return HostShape(payload['host'], payload['gpus'],
                     payload.get('root_provider_uuid')).record(payload,
                                                               received_at)


class _HostSlot:
    """A host's newest HostRecord (None once removed)."""

    __slots__ = ('record',)

    def __init__(self) -> None:
        self.record: HostRecord | None = None


class GpuStateCache:
    """Newest valid GPU state per host, with precomputed lookups.

    :param conf: a ConfigOpts with ``gpu_nova_ext.conf.register_nova_opts``
        applied (``[gpu_scheduler]`` is read from it); None uses the
        option defaults until :meth:`configure` or :meth:`start` is called.
    :param clock: seconds, monotonic; tests inject their own.
    :param wall_clock: seconds since the epoch, what ``generated_at`` is
        compared with; tests inject their own.
    """

    def __init__(self, conf: cfg.ConfigOpts | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.wall_clock = wall_clock
        self._conf = None
        self._lock = threading.Lock()
        self._hosts: dict[str, HostRecord] = {}
        # host -> its _HostSlot (kept after remove(): HostStates hold it)
        self._slots: dict[str, _HostSlot] = {}
        # host, nodename and root provider UUID -> record
        self._index: dict[str, _HostSlot] = {}
        # provider UUID -> GpuRecord of the hosts' records, rebuilt on use
        # after a change of shape (only tools and tests ask; ingestion
        # does not pay for it)
        self._providers: dict[str, GpuRecord] = {}
        self._providers_stale = False
        # host -> ((static_part key, HostShape), ...), newest first
        self._shapes: dict[str, tuple] = {}
        self._server = None
        self._server_pid = None
        self._start_failed_pid = None
        self._host_attr = '_gpu_nova_ext_state_%x' % id(self)
        # counts ingested payloads; notified on each (wait_for_state)
        self._ingested = 0
        self._arrived = threading.Condition()
        self._waiting = 0          # threads in wait_for_state()
        self.startup_wait = 0.0
        self.ttl = _DEFAULT_TTL
        self._max_bytes = _DEFAULT_MAX_BYTES
        self._max_gpus = _DEFAULT_MAX_GPUS
        if conf is not None:
            self.configure(conf)

    # -- configuration and the RPC listener ---------------------------

    def configure(self, conf: cfg.ConfigOpts) -> None:
        """Read ``[gpu_scheduler]`` options from ``conf``."""
        gconf.register_nova_opts(conf)
        self._conf = conf
        group = conf.gpu_scheduler
        self.ttl = group.state_ttl
        self.startup_wait = group.startup_state_wait
        self._max_bytes = group.max_payload_bytes
        self._max_gpus = group.max_gpus_per_host

    def start(self, conf: cfg.ConfigOpts) -> None:
        """Run the state RPC server of this process; idempotent.

        After a fork, the child (another ``os.getpid()``) starts its own
        server.  Raises what the RPC layer raises.
        """
        with self._lock:
            pid = os.getpid()
            if self._server is not None and self._server_pid == pid:
                return
            self.configure(conf)
            from gpu_nova_ext.state import rpc
            server = rpc.SchedulerStateServer(conf, self)
            server.start()
            self._server, self._server_pid = server, pid

    def stop(self) -> None:
        """Stop this process's RPC server; idempotent."""
        with self._lock:
            server, self._server = self._server, None
            pid, self._server_pid = self._server_pid, None
        if server is not None and pid == os.getpid():
            server.stop()

    @property
    def started(self) -> bool:
        return self._server is not None and self._server_pid == os.getpid()

    def ensure_started(self, conf: cfg.ConfigOpts) -> bool:
        """What filters and weighers call on each request; never raises.

        Applies ``conf`` and, when ``[gpu_scheduler] state_listener`` is
        True, starts the listener once per process.  Returns True when
        this call started it (the caller may then :meth:`wait_for_state`
        for the agents' answers to the listener's resend request, as the
        plugins do for ``[gpu_scheduler] startup_state_wait``).  A failure
        is logged once (per process) and not retried: the plugins then
        see no live state and ``missing_state_policy`` decides.
        """
        pid = os.getpid()
        if self._server is not None and self._server_pid == pid:
            return False
        try:
            if self._conf is not conf:
                self.configure(conf)
            if not conf.gpu_scheduler.state_listener:
                return False
            if self._start_failed_pid == pid:
                return False
            self.start(conf)
            return True
        except Exception as exc:
            if self._start_failed_pid != pid:
                self._start_failed_pid = pid
                LOG.error('GPU state listener could not start (%s); GPU '
                          'filters and weighers run without live GPU state '
                          'until nova-scheduler restarts. Check '
                          'transport_url and [gpu_scheduler].', exc)
            return False

    def wait_for_state(self, timeout: float, quiet: float = 0.25) -> int:
        """Block while payloads keep arriving; return how many arrived.

        Returns ``quiet`` seconds after the last payload that arrived
        during the call (at least one must arrive), or after ``timeout``
        seconds.  Real time, not the injectable clock.
        """
        with self._arrived:
            self._waiting += 1
        start = self._ingested
        deadline = time.monotonic() + timeout
        try:
            self._wait_quiet(start, deadline, quiet)
        finally:
            with self._arrived:
                self._waiting -= 1
        return self._ingested - start

    def _wait_quiet(self, start: int, deadline: float, quiet: float) -> None:
        with self._arrived:
            while True:
                now = time.monotonic()
                if now >= deadline:
                    break
                seen = self._ingested
                if seen == start:
                    self._arrived.wait(deadline - now)
                    continue
                self._arrived.wait(min(quiet, deadline - now))
                if self._ingested == seen:
                    break

    # -- ingestion -------------------------------------------------------

    def update(self, payload: Any) -> bool:
        """Validate and ingest one payload; False when it is rejected.

        A malformed payload is dropped with one warning and leaves every
        other host's state as it was, and so is a payload generated more
        than ``state_ttl`` ahead of this scheduler's wall clock (its
        ``generated_at`` would keep every later payload of the host out);
        a payload whose ``generated_at`` is older than the one held is
        ignored (logged at debug).

        The payload is handed over: the cache keeps its GPUs' metrics
        objects (do not change them afterwards; :meth:`get` rebuilds the
        rest from the host's shape) and takes them out of the GPU objects
        for a moment while reading it (put back in place).
        """
        shape = None
        metrics = None
        part = schema.static_part(payload)
        if part is not None:
            key, metrics = part
            host = payload.get('host')
            if host.__class__ is str:
                for known_key, known in self._shapes.get(host, ()):
                    if known_key == key:
                        shape = known
                        break
        if shape is None or not schema.quick_valid(
                payload, metrics, shape.gpus_size, self._max_bytes,
                self._max_gpus):
            try:
                gpus_size = schema.check(payload, self._max_bytes,
                                         self._max_gpus)
            except exception.InvalidStatePayload as exc:
                LOG.warning('%s', exc)
                return False
        host = payload['host']
        try:
            generated_at = float(payload['generated_at'])
            if shape is None:
                shape = HostShape(host, payload['gpus'],
                                  payload.get('root_provider_uuid'),
                                  gpus_size,
                                  key if part is not None else None)
                if part is not None:
                    # the host's last two shapes: a GPU whose health or
                    # free vGPUs flip between two states keeps a match
                    shapes = self._shapes.get(host, ())
                    self._shapes[host] = ((key, shape),) + shapes[:1]
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            LOG.warning('Rejected GPU state payload from %(host)s: %(err)s',
                        {'host': host, 'err': exc})
            return False
        wall = self.wall_clock()
        if generated_at > wall + self.ttl:
            LOG.warning('Rejected GPU state payload from %(host)s: '
                        'generated_at %(at).3f is %(ahead).0f s ahead of '
                        'this scheduler\'s clock, more than [gpu_scheduler] '
                        'state_ttl (%(ttl)s s). Synchronize the clocks of '
                        'that host and this scheduler (NTP).',
                        {'host': host, 'at': generated_at,
                         'ahead': generated_at - wall, 'ttl': self.ttl})
            return False
        try:
            record = shape.record(payload, self.clock(), metrics)
        except (KeyError, TypeError, ValueError) as exc:
            LOG.warning('Rejected GPU state payload from %(host)s: %(err)s',
                        {'host': host, 'err': exc})
            return False
        with self._lock:
            old = self._hosts.get(host)
            if old is not None and record.generated_at < old.generated_at:
                LOG.debug('Ignored GPU state of %(host)s generated at '
                          '%(new)s: holding newer state from %(old)s',
                          {'host': host, 'new': record.generated_at,
                           'old': old.generated_at})
                return False
            slot = self._slots.get(host)
            if slot is None:
                slot = self._slots[host] = _HostSlot()
            index = self._index
            if old is not None:
                old.replaced = True
                # a request may still hold the old record (plugins never
                # read its payload): let the payload go here
                old.kept = old.top = old.metrics = None
                renamed = (old.root_provider_uuid != record.root_provider_uuid
                           or old.nodename != record.nodename)
                if renamed:
                    for name in old.names():
                        if index.get(name) is slot:
                            del index[name]
                if old.shape is not shape:
                    # another shape: other GpuRecords, maybe other providers
                    self._providers_stale = True
            else:
                renamed = True
                self._providers_stale = True
            self._hosts[host] = record
            # HostStates that looked the host up hold its slot: they see
            # the new record at once, and the old one is released here
            slot.record = record
            if renamed:
                for name in record.names():
                    index[name] = slot
            self._ingested += 1
        if self._waiting:
            with self._arrived:
                self._arrived.notify_all()
        return True

    def remove(self, host: str) -> None:
        """Forget a host's state (tools, tests)."""
        with self._lock:
            self._shapes.pop(host, None)
            old = self._hosts.pop(host, None)
            if old is None:
                return
            old.replaced = True
            old.kept = old.top = old.metrics = None
            slot = self._slots[host]
            slot.record = None
            for name in old.names():
                if self._index.get(name) is slot:
                    del self._index[name]
            self._providers_stale = True

    # -- lookups -----------------------------------------------------------

    def _oldest_live(self, now: float | None) -> float:
        return (self.clock() if now is None else now) - self.ttl

    def get(self, host: str) -> dict[str, Any] | None:
        """The live payload of ``host`` (or of a nodename / root RP UUID)."""
        for _attempt in range(3):
            record = self.host_record(host)
            if record is None:
                return None
            payload = record.payload()
            if payload is not None or not record.replaced:
                return payload
            # replaced since it was looked up: the newer one
        return None

    def hosts(self) -> list[str]:
        """Hosts with live state, sorted."""
        oldest = self._oldest_live(None)
        return sorted(h for h, r in list(self._hosts.items())
                      if r.received_at >= oldest)

    def host_record(self, name: str,
                    now: float | None = None) -> HostRecord | None:
        """Live record by host, nodename or root provider UUID."""
        slot = self._index.get(name)
        record = slot.record if slot is not None else None
        if record is None or record.received_at < self._oldest_live(now):
            return None
        return record

    def lookup(self, host_state: Any, oldest: float) -> HostRecord | None:
        """Live record of a nova HostState.

        Looked up by compute node UUID (the root provider), then nodename,
        then host.

        :param oldest: ``now - state_ttl`` as :meth:`oldest_live` gives it
            (computed once per request, not per host).
        """
        # The host's slot is remembered on the HostState (nova-scheduler
        # keeps those between requests) under a name unique to this
        # cache, so a lookup is one dict read and one attribute read, also
        # after new payloads (the slot holds the host's newest record).
        attr = self._host_attr
        slot = host_state.__dict__.get(attr)
        if slot is None:
            index = self._index
            slot = (index.get(host_state.uuid)
                    or index.get(host_state.nodename)
                    or index.get(host_state.host))
            if slot is None:
                return None
            setattr(host_state, attr, slot)
        record = slot.record
        if record is None or record.received_at < oldest:
            return None
        return record

    def oldest_live(self, now: float | None = None) -> float:
        """Receive time before which state counts as missing."""
        return self._oldest_live(now)

    def gpu_for_provider(self, provider_uuid: str,
                         now: float | None = None) -> GpuRecord | None:
        """The live GPU a Placement provider is backed by, or None."""
        gpu = self._provider_index().get(provider_uuid)
        if gpu is None:
            return None
        record = self._hosts.get(gpu.host)
        if record is None or record.received_at < self._oldest_live(now):
            return None
        return gpu

    def is_gpu_provider(self, provider_uuid: str) -> bool:
        """True when any payload (live or not) named this provider."""
        return provider_uuid in self._provider_index()

    def _provider_index(self) -> dict[str, GpuRecord]:
        if self._providers_stale:
            with self._lock:
                if self._providers_stale:
                    providers = {}
                    for record in self._hosts.values():
                        providers.update(record.by_provider)
                    self._providers = providers
                    self._providers_stale = False
        return self._providers

    def free_capacity(self, host: str) -> tuple[float, float] | None:
        """(free, total) GPU equivalents of a host with live state."""
        record = self.host_record(host)
        if record is None:
            return None
        return record.free_units, record.total_units


_CACHE: GpuStateCache | None = None
_CACHE_LOCK = threading.Lock()


def get_cache() -> GpuStateCache:
    """The process singleton."""
    global _CACHE
    cache = _CACHE
    if cache is None:
        with _CACHE_LOCK:
            if _CACHE is None:
                _CACHE = GpuStateCache()
            cache = _CACHE
    return cache


def reset_cache() -> None:
    """Drop the singleton, stopping its listener (tests, tools)."""
    global _CACHE
    with _CACHE_LOCK:
        cache, _CACHE = _CACHE, None
    if cache is not None:
        cache.stop()
