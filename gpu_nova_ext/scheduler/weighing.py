# SPDX-License-Identifier: Apache-2.0

"""The base of the GPU host weighers (design doc: Scheduler plugins).

A raw value per host; an unknown one (no live state) weighs as the mean.
"""
import dataclasses
from typing import Any

from nova.scheduler import utils as sched_utils
from nova.scheduler import weights

from gpu_nova_ext.scheduler import context as request_context
from gpu_nova_ext.scheduler import fragmentation
from gpu_nova_ext.state import cache as state_cache
from gpu_nova_ext.state import records

CONF = request_context.CONF


@dataclasses.dataclass(slots=True, kw_only=True, eq=False)
class Claim:
    """What Nova claims on a host: its first allocation candidate."""

    host_state: Any
    record: records.HostRecord | None
    gpus: tuple = ()     # GpuFacts of the GPU providers it draws from
    cand: dict | None = None
    # computed once for the weighers of a pass (read-only)
    _taken: dict | None = dataclasses.field(default=None, init=False)
    _free: list | None = dataclasses.field(default=None, init=False)

    def taken(self) -> dict[int, float]:
        """:func:`taken` of the candidate."""
        if self._taken is None:
            self._taken = taken(self.record, self.cand) if self.gpus else {}
        return self._taken

    def free(self) -> list[float]:
        """The host's free units per GPU (``fragmentation.gpu_free``)."""
        if self._free is None:
            self._free = fragmentation.gpu_free(self.record,
                                                self.host_state)
        return self._free


def claim(record: records.HostRecord | None, host_state: Any,
          cand: dict | None = None) -> Claim:
    """The Claim of ``cand``, by default the host's first candidate."""
    if cand is None:
        cands = host_state.allocation_candidates
        cand = cands[0] if cands else None
    if record is None or cand is None:
        return Claim(host_state=host_state, record=record)
    gpus = map(record.by_provider.get, cand['allocations'])
    return Claim(host_state=host_state, record=record, cand=cand,
                 gpus=tuple(gpu for gpu in gpus if gpu is not None))


def taken(record: records.HostRecord, cand: dict) -> dict[int, float]:
    """GPU index -> GPU units ``cand`` takes (several VFs of a GPU add up)."""
    get = record.by_provider.get
    out: dict[int, float] = {}
    for rp, alloc in cand['allocations'].items():
        gpu = get(rp)
        if gpu is not None:
            out[gpu.index] = out.get(gpu.index, 0.0) + (
                gpu.unit_per_instance * max(alloc['resources'].values()))
    return out


def _claims(weighed_obj_list, ctx) -> list[Claim]:
    """claim() per weighed host, shared by the weighers of one pass."""
    if ctx.claims_of is weighed_obj_list:
        return ctx.claims
    record = ctx.record
    if ctx.request.kind == request_context.NONE:
        # a non-GPU request draws no GPU: skip the candidates
        out = [Claim(host_state=w.obj, record=record(w.obj))
               for w in weighed_obj_list]
    else:
        out = [claim(record(w.obj), w.obj) for w in weighed_obj_list]
    ctx.claims, ctx.claims_of = out, weighed_obj_list
    return out


class GpuWeigher(weights.BaseHostWeigher):
    """Base of the GPU weighers.

    ``OPTION`` in ``[gpu_weights]`` and a raw :meth:`value` per host;
    ``FOR_GPU_REQUESTS`` False weighs requests without GPUs instead.
    """

    OPTION = ''
    FOR_GPU_REQUESTS = True
    _default = None      # [gpu_weights] OPTION as the last pass read it

    def __init__(self):
        super().__init__()
        # the state listener lives as long as nova-scheduler's plugins
        state_cache.get_cache().listener.attach(self)

    def value(self, claim: Claim,
              ctx: request_context.RequestContext) -> float | None:
        """The raw weight of one host, None when unknown."""
        raise NotImplementedError()

    def _weigh_object(self, host_state, weight_properties):
        return self.weigh_objects(
            [weights.WeighedHost(host_state, 0.0)], weight_properties)[0]

    def applies(self, ctx: request_context.RequestContext) -> bool:
        if self.FOR_GPU_REQUESTS:
            return ctx.request.kind != request_context.NONE
        return ctx.request.kind != request_context.GPU

    def weigh_objects(self, weighed_obj_list, weight_properties):
        ctx = request_context.request_context(weight_properties)
        default = self._default = getattr(CONF.gpu_weights, self.OPTION)
        if not self.applies(ctx) or (
                default == 0.0
                and not any(w.obj.aggregates for w in weighed_obj_list)):
            # equal weights (Nova normalizes them to 0): the weigher does
            # not apply, or is off and no aggregate can turn it on
            return [0.0] * len(weighed_obj_list)
        value = self.value
        # a "maybe" request is a GPU request where the claim uses a GPU
        gpu_only = (self.FOR_GPU_REQUESTS
                    and ctx.request.kind == request_context.MAYBE)
        raw = [None if gpu_only and not c.gpus else value(c, ctx)
               for c in _claims(weighed_obj_list, ctx)]
        known = [v for v in raw if v is not None]
        if len(known) == len(raw):
            return raw
        fill = sum(known) / len(known) if known else 0.0
        return [fill if v is None else v for v in raw]

    def weight_multiplier(self, host_state):
        default = self._default
        if default is None:
            default = getattr(CONF.gpu_weights, self.OPTION)
        if not host_state.aggregates:
            return default      # get_weight_multiplier()'s answer
        return sched_utils.get_weight_multiplier(host_state, self.OPTION,
                                                 default)
