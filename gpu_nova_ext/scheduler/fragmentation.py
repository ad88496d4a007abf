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

Design doc: Fragmentation-aware placement; after Fragmentation Gradient
Descent (Weng et al., USENIX ATC'23).  A request *shape* is
``(GPU units, vCPUs, RAM MiB)``: the GPU units its claim takes (a whole
GPU is 1, a vGPU ``1/n`` of a GPU holding ``n``), the flavor's vCPUs and
RAM.  The *mix* is the expected shapes with their probabilities: set by
the operator (``[gpu_scheduler] fragmentation_request_mix``) or learned
by this process from the GPU requests it weighs, each earlier request
counting ``fragmentation_mix_decay`` times less per new one.  The learned
counts live in this module (one table per nova-scheduler process, kept
beside its GPU state cache, never on Nova's objects) and are lost when
the process restarts.

A host's *fragmentation* under a mix is the expected free GPU capacity a
request drawn from the mix could not use there: for each shape, all the
host's free GPU units when the shape does not fit (too few whole free
GPUs, or not enough free vCPUs or RAM beside them), otherwise the units
left on GPUs the shape cannot use (partly used GPUs for a whole-GPU
shape; GPUs with less free than a vGPU shape needs), weighted by the
shape's probability.  The policy puts each request where this grows
least.
"""
import threading
from typing import Any, Iterable, NamedTuple
import weakref

# a GPU with at least this much free counts as whole (float sums of
# 1/n instances)
_WHOLE = 1.0 - 1e-6
# learned shapes whose decayed count falls below this are forgotten
_FORGET = 1e-3


class Shape(NamedTuple):
    """One request shape."""

    units: float      # GPU units its claim takes (0: no GPU)
    vcpus: float
    ram_mb: float


class Mix(NamedTuple):
    """Shapes with their probabilities (summing to 1), split by kind."""

    # (probability, vcpus, ram_mb, GPUs) of whole-GPU shapes
    whole: tuple[tuple[float, float, float, float], ...]
    # (probability, vcpus, ram_mb, units) of shapes under one GPU
    part: tuple[tuple[float, float, float, float], ...]

    def __bool__(self):
        return bool(self.whole or self.part)


EMPTY = Mix((), ())


def make_mix(weights: Iterable[tuple[Shape, float]]) -> Mix:
    """A Mix of ``(shape, weight)`` pairs (GPU shapes only, weight > 0)."""
    pairs = [(s, w) for s, w in weights if s.units > 0 and w > 0]
    total = sum(w for _, w in pairs)
    if not total:
        return EMPTY
    whole, part = [], []
    for shape, weight in sorted(pairs):
        entry = (weight / total, shape.vcpus, shape.ram_mb, shape.units)
        (whole if shape.units >= _WHOLE else part).append(entry)
    return Mix(tuple(whole), tuple(part))


def fragmentation(free: Iterable[float], vcpus: float, ram_mb: float,
                  mix: Mix) -> float:
    """A host's expected unusable free GPU units under ``mix``.

    :param free: free units per GPU (1 for a whole free GPU).
    :param vcpus: free vCPUs of the host (allocation ratio applied).
    :param ram_mb: free RAM of the host in MiB (allocation ratio applied).
    """
    free = sorted(f for f in free if f > 0)
    total = sum(free)
    if total <= 0:
        return 0.0
    whole = 0
    for f in free:
        if f >= _WHOLE:
            whole += 1
    partial = total - whole
    whole += 1e-9
    out = 0.0
    for prob, cpu, ram, gpus in mix.whole:
        if cpu > vcpus or ram > ram_mb or gpus > whole:
            out += prob * total
        else:
            out += prob * partial
    if mix.part:
        # part shapes ascend by share, free ascends: one walk
        below = 0.0
        i, n = 0, len(free)
        for prob, cpu, ram, units in mix.part:
            if cpu > vcpus or ram > ram_mb:
                out += prob * total
                continue
            limit = units - 1e-9
            while i < n and free[i] < limit:
                below += free[i]
                i += 1
            out += prob * below
    return out


def share_costs(free: list[float], vcpus: float, ram_mb: float, mix: Mix,
                share: float) -> dict[float, float]:
    """Free units of a GPU -> how taking ``share`` there fragments the host.

    For a request of part of one GPU (a vGPU) on a host: the change of the
    host's fragmentation, up to a term that is the same whichever GPU
    gives the share, keyed by the GPU's free units before.  Only the
    chosen GPU changes, so a whole-GPU shape only sees whether it was
    whole, and a vGPU shape whether it falls below the shape's share.

    :param vcpus: free vCPUs after the request; ``ram_mb`` likewise.
    """
    free = [f for f in free if f > 0]
    total = sum(free) - share
    whole = sum(1 for f in free if f >= _WHOLE)
    # the whole-GPU shapes' term when the share comes from a whole GPU
    # (one whole GPU fewer) and when from a partly used one
    from_whole = from_part = 0.0
    partial_w = total - (whole - 1)     # after: one whole GPU fewer
    partial_p = total - whole
    for prob, cpu, ram, gpus in mix.whole:
        if cpu > vcpus or ram > ram_mb:
            continue
        from_whole += prob * (total if gpus > whole - 1 + 1e-9
                              else partial_w)
        from_part += prob * (total if gpus > whole + 1e-9 else partial_p)
    part = [(prob, units - 1e-9) for prob, cpu, ram, units in mix.part
            if cpu <= vcpus and ram <= ram_mb]
    out = {}
    for f in free:
        if f in out:
            continue
        after = f - share
        if after < 0.0:
            after = 0.0
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
            if decay < 1.0:
                for key in list(counts):
                    left = counts[key] * decay
                    if left < _FORGET:
                        del counts[key]
                    else:
                        counts[key] = left
            counts[shape] = counts.get(shape, 0.0) + 1.0
            if len(counts) > self.size:
                del counts[min(counts, key=counts.get)]
            self._mix = None

    def mix(self) -> Mix:
        """The learned mix (cached until the next request is learned)."""
        found = self._mix
        if found is not None:
            return found
        with self._lock:
            found = self._mix = make_mix(list(self._counts.items()))
        return found

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()
            self._mix = EMPTY


# one learner per GPU state cache: in nova-scheduler one per process;
# a simulation (or a test) that starts a new cache starts a new mix
_learners: 'weakref.WeakKeyDictionary[Any, MixLearner]' = (
    weakref.WeakKeyDictionary())
_learners_lock = threading.Lock()


def learner(cache: Any) -> MixLearner:
    """The MixLearner of this process (of its GPU state cache)."""
    found = _learners.get(cache)
    if found is None:
        with _learners_lock:
            found = _learners.setdefault(cache, MixLearner())
    return found


_configured: tuple[Any, Mix] | None = None


def configured_mix(entries: list | None) -> Mix:
    """The Mix of ``[gpu_scheduler] fragmentation_request_mix`` entries.

    :param entries: ``(GPUs, vCPUs, RAM MiB, weight)`` tuples as the
        option type parses them.
    """
    global _configured
    key = tuple(entries or ())
    found = _configured
    if found is not None and found[0] == key:
        return found[1]
    mix = make_mix((Shape(float(g), float(c), float(r)), float(w))
                   for g, c, r, w in key)
    _configured = (key, mix)
    return mix


def free_cpu_ram(host_state: Any) -> tuple[float, float]:
    """(free vCPUs, free RAM MiB) of a HostState, ratios applied.

    As Nova's own checks count them (nova.scheduler.host_manager
    HostState: ``vcpus_total * cpu_allocation_ratio - vcpus_used``;
    ``total_usable_ram_mb * ram_allocation_ratio`` less what is used).
    """
    cpu_ratio = host_state.cpu_allocation_ratio or 1.0
    vcpus = (host_state.vcpus_total or 0) * cpu_ratio - (
        host_state.vcpus_used or 0)
    total_ram = host_state.total_usable_ram_mb or 0
    ram = total_ram * (host_state.ram_allocation_ratio or 1.0) - (
        total_ram - (host_state.free_ram_mb or 0))
    return vcpus, ram


def gpu_free(record: Any, host_state: Any) -> list[float]:
    """Free GPU units per GPU of a host, as GpuPackingWeigher counts them.

    A passthrough GPU whose use the agent does not tell counts free only
    when one of the host's allocation candidates uses it (Placement
    offers candidates from free providers only).
    """
    free = list(record.free)
    unknown = record.passthrough_unknown
    if unknown:
        offered = set()
        for cand in host_state.allocation_candidates:
            offered.update(cand['allocations'])
        for gpu in unknown:
            if offered.isdisjoint(gpu.provider_uuids):
                free[gpu.index] = 0.0
    return free


def taken(gpus: list, allocs: list) -> dict[int, float]:
    """GPU index -> units a claim takes (several VFs of one GPU add up)."""
    out: dict[int, float] = {}
    for gpu, alloc in zip(gpus, allocs):
        out[gpu.index] = out.get(gpu.index, 0.0) + (
            gpu.unit_per_instance * max(alloc['resources'].values()))
    return out


_CTX_KEY = 'fragmentation_mix'


def request_mix(ctx: Any, group: Any, gpus: list, allocs: list) -> Mix:
    """The mix a request is weighed against, the same for all its plugins.

    The first call of a request learns its shape (the claim's GPU units,
    the flavor's vCPUs and RAM) unless the operator set the mix; a
    request whose claim draws no GPU learns nothing.

    :param ctx: the request's RequestContext (the mix is kept in it).
    :param group: ``CONF.gpu_scheduler``.
    """
    found = ctx.extra.get(_CTX_KEY)
    if found is not None:
        return found
    entries = group.fragmentation_request_mix
    if entries:
        mix = configured_mix(entries)
    else:
        learned = learner(ctx.cache)
        if gpus:
            vcpus, ram = flavor_cpu_ram(ctx)
            learned.learn(Shape(sum(taken(gpus, allocs).values()), vcpus,
                                ram), group.fragmentation_mix_decay)
        mix = learned.mix()
        if not gpus:
            # not kept: a later host of the request may draw a GPU
            return mix
    ctx.extra[_CTX_KEY] = mix
    return mix


def flavor_cpu_ram(ctx: Any) -> tuple[float, float]:
    """(vCPUs, RAM MiB) the request's flavor takes; zeros without one."""
    flavor = ctx.flavor
    if flavor is None:
        return 0.0, 0.0
    return float(flavor.vcpus or 0), float(flavor.memory_mb or 0)
