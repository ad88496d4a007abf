# SPDX-License-Identifier: Apache-2.0

"""The expected request mix and a host's GPU fragmentation under it.

Design doc: Fragmentation-aware placement (shapes, the mix, how it is
learned, and a host's fragmentation: the expected free GPU capacity a
request drawn from the mix could not use there, or its CPU and RAM feed).
"""
import bisect
import dataclasses
import functools
import itertools
import threading
from typing import Any, Iterable, NamedTuple
import weakref

from gpu_nova_ext.scheduler import context as request_context

# a GPU with this much free is whole (float sums of 1/n instances)
_WHOLE = 1.0 - 1e-6
# the slack of comparisons between sums of GPU units
EPS = 1e-9
# learned shapes whose decayed count falls below this are forgotten
_FORGET = 1e-3
# the CPU/RAM subsets of a mix kept (hosts short of CPU or RAM)
_SUBSETS = 256


class Shape(NamedTuple):
    """One request shape (a key of the learned counts)."""
    units: float      # GPU units its claim takes (0: no GPU)
    vcpus: float
    ram_mb: float


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class MixShape:
    """A shape of a mix with its probability."""
    prob: float
    vcpus: float
    ram_mb: float
    units: float      # whole GPUs of a whole shape, else its share of one


@dataclasses.dataclass(frozen=True, slots=True)
class _Sums:
    """The shapes of a mix that fit a host's CPU and RAM, as sums.

    By units ascending, with each suffix's probability (one bisection).
    """
    unfit: float                    # probability of the shapes that do not
    whole_units: tuple[float, ...]
    whole_above: tuple[float, ...]  # [k]: of whole_units[k:]
    part_limits: tuple[float, ...]  # units less the comparisons' slack
    part_above: tuple[float, ...]

    def whole_strand(self, whole: float, total: float,
                     rooms: tuple[int, int] | None = None) -> float:
        """The whole-GPU shapes' expected unusable units.

        ``whole`` whole GPUs free of ``total`` free units; ``rooms``: the
        most whole free GPUs in one link domain, the largest domain's size.
        """
        above, units = self.whole_above, self.whole_units
        where = bisect.bisect_right
        big = above[where(units, whole + EPS)]
        if rooms is not None and rooms[0] < whole:
            intact, largest = rooms
            big += (above[where(units, intact + EPS)]
                    - above[where(units, min(largest, whole) + EPS)])
        return big * total + (above[0] - big) * (total - whole)


def _sums(whole, part, unfit: float = 0.0) -> _Sums:
    def above(shapes):      # [k]: the probability of shapes[k:]
        return tuple(itertools.accumulate(
            (s.prob for s in reversed(shapes)), initial=0.0))[::-1]
    return _Sums(unfit, tuple(s.units for s in whole), above(whole),
                 tuple(s.units - EPS for s in part), above(part))


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Mix:
    """Shapes with their probabilities (summing to 1), split by kind."""
    whole: tuple[MixShape, ...] = ()   # shapes of whole GPUs, by units
    part: tuple[MixShape, ...] = ()    # shapes under one GPU, by share
    # derived (make_mix): every shape fits a host with this much free;
    # the mix's expected vCPUs and RAM per GPU unit
    max_vcpus: float = 0.0
    max_ram_mb: float = 0.0
    vcpus_per_unit: float = 0.0
    ram_per_unit: float = 0.0
    sums: _Sums = dataclasses.field(default=_sums((), ()), compare=False,
                                    repr=False)
    # fitting shapes (bools) -> their _Sums, for hosts short of CPU or RAM
    subsets: dict = dataclasses.field(default_factory=dict, compare=False,
                                      repr=False)

    def __bool__(self):
        return bool(self.whole or self.part)

    def fitting(self, vcpus: float, ram_mb: float) -> _Sums:
        """The _Sums of the shapes a host with this much free can take."""
        if vcpus >= self.max_vcpus and ram_mb >= self.max_ram_mb:
            return self.sums
        shapes = self.whole + self.part
        key = tuple(s.vcpus <= vcpus and s.ram_mb <= ram_mb for s in shapes)
        found = self.subsets.get(key)
        if found is None:
            if len(self.subsets) >= _SUBSETS:
                self.subsets.clear()
            fit = [s for s, fits in zip(shapes, key) if fits]
            found = self.subsets[key] = _sums(
                [s for s in fit if s.units >= _WHOLE],
                [s for s in fit if s.units < _WHOLE],
                sum(s.prob for s, fits in zip(shapes, key) if not fits))
        return found


EMPTY = Mix()


def make_mix(weights: Iterable[tuple[Shape, float]]) -> Mix:
    """A Mix of ``(shape, weight)`` pairs (GPU shapes only, weight > 0)."""
    pairs = sorted((s, w) for s, w in weights if s.units > 0 and w > 0)
    total = sum(w for _, w in pairs)
    shapes = [MixShape(prob=w / total, vcpus=s.vcpus, ram_mb=s.ram_mb,
                       units=s.units) for s, w in pairs]
    whole = tuple(s for s in shapes if s.units >= _WHOLE)
    part = tuple(s for s in shapes if s.units < _WHOLE)
    units = sum(s.prob * s.units for s in shapes) or 1.0
    return Mix(whole=whole, part=part,
               max_vcpus=max((s.vcpus for s in shapes), default=0.0),
               max_ram_mb=max((s.ram_mb for s in shapes), default=0.0),
               vcpus_per_unit=sum(s.prob * s.vcpus for s in shapes) / units,
               ram_per_unit=sum(s.prob * s.ram_mb for s in shapes) / units,
               sums=_sums(whole, part))


def domain_rooms(free: list[float], domains: tuple | None
                 ) -> tuple[dict[Any, int], int] | None:
    """(link domain -> its whole free GPUs, the largest domain's GPUs).

    ``domains``: ``HostFacts.link_domains`` (a GPU without one is a domain
    of its own); None: no links.
    """
    if domains is None:
        return None
    room: dict[Any, int] = {}
    size: dict[Any, int] = {}
    for index, f in enumerate(free):
        key = domains[index] or index
        size[key] = size.get(key, 0) + 1
        if f >= _WHOLE:
            room[key] = room.get(key, 0) + 1
    return room, max(size.values(), default=0)


def fragmentation(free: list[float], vcpus: float, ram_mb: float,
                  mix: Mix, domains: tuple | None = None) -> float:
    """A host's expected unusable free GPU units under ``mix``.

    Design doc: Fragmentation-aware placement.  ``free``: free units per
    GPU; ``vcpus`` and ``ram_mb``: the host's free (allocation ratios
    applied); ``domains``: per GPU its link domain, or None (no links).
    """
    rooms = domain_rooms(free, domains)
    free = [f for f in free if f > 0]
    total = sum(free)
    if total <= 0 or not mix:
        return 0.0
    sums = mix.fitting(vcpus, ram_mb)
    whole = sum(1 for f in free if f >= _WHOLE)
    out = sums.unfit * total + sums.whole_strand(
        whole, total, rooms and (max(rooms[0].values(), default=0),
                                 rooms[1]))
    # the part shapes asking more than f: part_above[bisect(limits, f)]
    above, limits = sums.part_above, sums.part_limits
    for f in free:
        out += f * above[bisect.bisect_right(limits, f)]
    unfed = total - max(0.0, min(
        total, vcpus / mix.vcpus_per_unit if mix.vcpus_per_unit else total,
        ram_mb / mix.ram_per_unit if mix.ram_per_unit else total))
    return out + unfed - out * unfed / total


def share_costs(free: list[float], vcpus: float, ram_mb: float, mix: Mix,
                share: float, domains: tuple | None = None
                ) -> dict[int, float]:
    """GPU index -> how taking ``share`` there fragments the host.

    :func:`fragmentation`'s change up to a term and a factor the same for
    every GPU (only the chosen GPU changes); ``vcpus`` and ``ram_mb``: the
    host's free after the request.
    """
    rooms = domain_rooms(free, domains)
    total = sum(f for f in free if f > 0) - share
    whole = sum(1 for f in free if f >= _WHOLE)
    sums = mix.fitting(vcpus, ram_mb)
    # whole-GPU shapes: the share from a whole GPU (its domain one short)
    from_domain = {}
    if rooms is None:
        from_domain[None] = sums.whole_strand(whole - 1, total)
        from_part = sums.whole_strand(whole, total)
    else:
        room, largest = rooms
        for key, count in room.items():
            rest = max((c for k, c in room.items() if k != key), default=0)
            from_domain[key] = sums.whole_strand(
                whole - 1, total, (max(count - 1, rest), largest))
        from_part = sums.whole_strand(
            whole, total, (max(room.values(), default=0), largest))
    above, limits = sums.part_above, sums.part_limits
    where = bisect.bisect_right
    out = {}
    for index, f in enumerate(free):
        if f > 0:
            after = max(0.0, f - share)
            if f >= _WHOLE:
                key = None if domains is None else (domains[index] or index)
                strand = from_domain[key]
            else:
                strand = from_part
            out[index] = (strand + after * above[where(limits, after)]
                          - f * above[where(limits, f)])
    return out


class MixLearner:
    """The decayed counts of the request shapes one process served."""

    def __init__(self, size: int = 32):
        self.size = size
        self._counts: dict[Shape, float] = {}
        self._mix: Mix | None = EMPTY
        self._lock = threading.Lock()

    def learn(self, shape: Shape, decay: float) -> None:
        """Count one request; every earlier one now counts ``decay`` x."""
        if shape.units <= 0:
            return
        with self._lock:
            counts = self._counts
            for key in list(counts) if decay < 1.0 else ():
                counts[key] *= decay
                if counts[key] < _FORGET:
                    del counts[key]
            counts[shape] = counts.get(shape, 0.0) + 1.0
            if len(counts) > self.size:
                del counts[min(counts, key=counts.get)]
            self._mix = None

    def mix(self) -> Mix:
        """The learned mix (kept until the next request is learned)."""
        with self._lock:
            if self._mix is None:
                self._mix = make_mix(list(self._counts.items()))
            return self._mix


# GPU state cache -> its MixLearner: in nova-scheduler one per process; a
# simulation (or a test) that starts a new cache starts a new mix
_learners = weakref.WeakKeyDictionary()
_learners_lock = threading.Lock()


def learner(cache: Any) -> MixLearner:
    """The MixLearner of this process (of its GPU state cache)."""
    with _learners_lock:
        return _learners.setdefault(cache, MixLearner())


@functools.lru_cache(maxsize=4)
def configured_mix(entries: tuple) -> Mix:
    """The Mix of ``fragmentation_request_mix``: (GPUs, vCPUs, RAM, weight)."""
    return make_mix((Shape(float(g), float(c), float(r)), float(w))
                    for g, c, r, w in entries)


def request_mix(ctx: Any, taken: dict[int, float]) -> Mix:
    """The mix of a request; its first GPU claim (``taken``) is learned."""
    if ctx.mix is not None:
        return ctx.mix
    group = request_context.CONF.gpu_scheduler
    if group.fragmentation_request_mix:
        ctx.mix = configured_mix(tuple(group.fragmentation_request_mix))
        return ctx.mix
    learned = learner(ctx.cache)
    if not taken:
        # not kept: a later host of the request may draw a GPU
        return learned.mix()
    learned.learn(Shape(sum(taken.values()), ctx.vcpus, ctx.ram_mb),
                  group.fragmentation_mix_decay)
    ctx.mix = learned.mix()
    return ctx.mix


def free_cpu_ram(host_state: Any) -> tuple[float, float]:
    """(free vCPUs, RAM MiB) of a HostState, as Nova counts them."""
    vcpus = (host_state.vcpus_total or 0) * (
        host_state.cpu_allocation_ratio or 1.0) - (host_state.vcpus_used or 0)
    total_ram = host_state.total_usable_ram_mb or 0
    ram = total_ram * (host_state.ram_allocation_ratio or 1.0) - (
        total_ram - (host_state.free_ram_mb or 0))
    return vcpus, ram


def gpu_free(record: Any, host_state: Any) -> list[float]:
    """Free units per GPU; unknown passthrough: free when offered."""
    free = list(record.free)
    if record.passthrough_unknown:
        offered = {rp for cand in host_state.allocation_candidates
                   for rp in cand['allocations']}
        for gpu in record.passthrough_unknown:
            if offered.isdisjoint(gpu.provider_uuids):
                free[gpu.index] = 0.0
    return free
