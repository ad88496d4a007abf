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

"""The expected request mix and a host's GPU fragmentation under it.

Design doc: Fragmentation-aware placement (shapes, the mix, how it is
learned, and a host's fragmentation: the expected free GPU capacity a
request drawn from the mix could not use there).
"""
import dataclasses
import functools
import threading
from typing import Any, Iterable, NamedTuple
import weakref

from gpu_nova_ext.scheduler import context as request_context

# a GPU with at least this much free counts as whole (float sums of
# 1/n instances)
_WHOLE = 1.0 - 1e-6
# the slack of comparisons between sums of GPU units
_EPS = 1e-9
# learned shapes whose decayed count falls below this are forgotten
_FORGET = 1e-3


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


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Mix:
    """Shapes with their probabilities (summing to 1), split by kind."""

    whole: tuple[MixShape, ...] = ()   # shapes of whole GPUs
    part: tuple[MixShape, ...] = ()    # shapes under one GPU, by share

    def __bool__(self):
        return bool(self.whole or self.part)


EMPTY = Mix()


def make_mix(weights: Iterable[tuple[Shape, float]]) -> Mix:
    """A Mix of ``(shape, weight)`` pairs (GPU shapes only, weight > 0)."""
    pairs = sorted((s, w) for s, w in weights if s.units > 0 and w > 0)
    total = sum(w for _, w in pairs)
    shapes = [MixShape(prob=w / total, vcpus=s.vcpus, ram_mb=s.ram_mb,
                       units=s.units) for s, w in pairs]
    return Mix(whole=tuple(s for s in shapes if s.units >= _WHOLE),
               part=tuple(s for s in shapes if s.units < _WHOLE))


def fragmentation(free: Iterable[float], vcpus: float, ram_mb: float,
                  mix: Mix) -> float:
    """A host's expected unusable free GPU units under ``mix``.

    :param free: free units per GPU (1 for a whole free GPU).
    :param vcpus: free vCPUs of the host (allocation ratio applied);
        ``ram_mb`` likewise.
    """
    free = sorted(f for f in free if f > 0)
    total = sum(free)
    if total <= 0:
        return 0.0
    whole = sum(1 for f in free if f >= _WHOLE)
    partial = total - whole
    out = 0.0
    for shape in mix.whole:
        if (shape.vcpus > vcpus or shape.ram_mb > ram_mb
                or shape.units > whole + _EPS):
            out += shape.prob * total
        else:
            out += shape.prob * partial
    # part shapes ascend by share, free ascends: one walk
    below = 0.0
    i, n = 0, len(free)
    for shape in mix.part:
        if shape.vcpus > vcpus or shape.ram_mb > ram_mb:
            out += shape.prob * total
            continue
        while i < n and free[i] < shape.units - _EPS:
            below += free[i]
            i += 1
        out += shape.prob * below
    return out


def share_costs(free: list[float], vcpus: float, ram_mb: float, mix: Mix,
                share: float) -> dict[float, float]:
    """Free units of a GPU -> how taking ``share`` there fragments the host.

    The change of the host's fragmentation up to a term the same for every
    GPU: only the chosen GPU changes, so a whole-GPU shape only sees
    whether it was whole, a vGPU shape whether it falls below its share.

    :param vcpus: free vCPUs after the request; ``ram_mb`` likewise.
    """
    free = [f for f in free if f > 0]
    total = sum(free) - share
    whole = sum(1 for f in free if f >= _WHOLE)
    # whole-GPU shapes: the share from a whole GPU (one fewer) or not
    from_whole = from_part = 0.0
    for shape in mix.whole:
        if shape.vcpus <= vcpus and shape.ram_mb <= ram_mb:
            from_whole += shape.prob * (
                total if shape.units > whole - 1 + _EPS
                else total - (whole - 1))
            from_part += shape.prob * (
                total if shape.units > whole + _EPS else total - whole)
    part = [(shape.prob, shape.units - _EPS) for shape in mix.part
            if shape.vcpus <= vcpus and shape.ram_mb <= ram_mb]
    out = {}
    for f in free:
        if f not in out:
            after = max(0.0, f - share)
            cost = from_whole if f >= _WHOLE else from_part
            for prob, limit in part:
                if after < limit:
                    cost += prob * after
                if f < limit:
                    cost -= prob * f
            out[f] = cost
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


# one learner per GPU state cache: in nova-scheduler one per process; a
# simulation (or a test) that starts a new cache starts a new mix
_learners: 'weakref.WeakKeyDictionary[Any, MixLearner]' = (
    weakref.WeakKeyDictionary())
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


def request_mix(ctx: Any, claim: Any) -> Mix:
    """The mix of a request; its first GPU claim is learned."""
    if ctx.mix is not None:
        return ctx.mix
    group = request_context.CONF.gpu_scheduler
    if group.fragmentation_request_mix:
        ctx.mix = configured_mix(tuple(group.fragmentation_request_mix))
        return ctx.mix
    learned = learner(ctx.cache)
    if not claim.gpus:
        # not kept: a later host of the request may draw a GPU
        return learned.mix()
    vcpus, ram = flavor_cpu_ram(ctx)
    learned.learn(Shape(sum(claim.taken().values()), vcpus, ram),
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


def flavor_cpu_ram(ctx: Any) -> tuple[float, float]:
    """(vCPUs, RAM MiB) the request's flavor takes; zeros without one."""
    if ctx.flavor is None:
        return 0.0, 0.0
    return float(ctx.flavor.vcpus or 0), float(ctx.flavor.memory_mb or 0)


def gpu_free(record: Any, host_state: Any) -> list[float]:
    """Free units per GPU; unknown passthrough: free when offered."""
    free = list(record.free)
    if record.passthrough_unknown:
        offered = set()
        for cand in host_state.allocation_candidates:
            offered.update(cand['allocations'])
        for gpu in record.passthrough_unknown:
            if offered.isdisjoint(gpu.provider_uuids):
                free[gpu.index] = 0.0
    return free
