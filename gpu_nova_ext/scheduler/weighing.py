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

"""The base of the GPU host weighers (design doc: Scheduler plugins).

Nova calls each weigher's ``weigh_objects`` once per request with the
weighed hosts, normalizes the raw values to [0, 1] and multiplies them by
``weight_multiplier(host_state)``: here Nova's own
``nova.scheduler.utils.get_weight_multiplier`` (aggregate metadata of the
option's name overrides the ``[gpu_weights]`` option), as for Nova's
weighers.  A host whose value is unknown (no live state) weighs as the
mean of the known values.
"""
from typing import Any

from nova.scheduler import utils as sched_utils
from nova.scheduler import weights

from gpu_nova_ext.scheduler import context as request_context
from gpu_nova_ext.state import cache as state_cache
from gpu_nova_ext.state import records

CONF = request_context.CONF
NONE = request_context.NONE
MAYBE = request_context.MAYBE


def claim(record: records.HostRecord | None, host_state: Any) -> tuple:
    """(record, GPUs, allocations, HostState) of the candidate Nova claims.

    Nova claims a host's first allocation candidate (GpuCandidateOrderFilter
    put the preferred GPU's there).  The GPUs are the GpuFacts of the
    providers it draws from, in its order, and the allocations what it
    draws from each (``{'resources': {...}}``).
    """
    cands = host_state.allocation_candidates
    if record is None or not cands:
        return record, (), (), host_state
    get = record.by_provider.get
    gpus = []
    allocs = []
    for rp, alloc in cands[0]['allocations'].items():
        gpu = get(rp)
        if gpu is not None:
            gpus.append(gpu)
            allocs.append(alloc)
    return record, gpus, allocs, host_state


def _claims(weighed_obj_list, ctx) -> list:
    """claim() per weighed host, shared by the weighers of one pass."""
    if ctx.claims is not None and ctx.claims[0] is weighed_obj_list:
        return ctx.claims[1]
    record = ctx.record
    if ctx.request.kind == NONE:
        # a non-GPU request draws no GPU: skip the candidates
        out = [(record(w.obj), (), (), w.obj) for w in weighed_obj_list]
    else:
        out = [claim(record(w.obj), w.obj) for w in weighed_obj_list]
    ctx.claims = (weighed_obj_list, out)
    return out


class GpuWeigher(weights.BaseHostWeigher):
    """Base of the GPU weighers.

    A subclass names its multiplier option (``OPTION`` in
    ``[gpu_weights]``) and gives a raw value per host (:meth:`value`;
    None when unknown).  ``FOR_GPU_REQUESTS`` False makes it weigh
    non-GPU requests instead.
    """

    OPTION = ''
    FOR_GPU_REQUESTS = True
    # [gpu_weights] OPTION as the last pass read it (the same in every
    # thread: the option's value)
    _default = None

    def __init__(self):
        super().__init__()
        # the state listener lives as long as nova-scheduler's plugins
        state_cache.get_cache().listener.attach(self)

    def value(self, record: records.HostRecord | None, gpus: list,
              allocs: list, host_state: Any,
              ctx: request_context.RequestContext) -> float | None:
        """The raw weight of one host, None when unknown.

        :param gpus: the GpuFacts the claimed candidate draws from.
        :param allocs: what it draws from each (``{'resources': ...}``).
        """
        raise NotImplementedError()

    def _weigh_object(self, host_state, weight_properties):
        return self.weigh_objects(
            [weights.WeighedHost(host_state, 0.0)], weight_properties)[0]

    def applies(self, ctx: request_context.RequestContext) -> bool:
        if self.FOR_GPU_REQUESTS:
            return ctx.request.kind != NONE
        return not ctx.request.is_gpu

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
        resolved = _claims(weighed_obj_list, ctx)
        # a "maybe" request is a GPU request where the claim uses a GPU
        gpu_only = self.FOR_GPU_REQUESTS and ctx.request.kind == MAYBE
        raw = [None if gpu_only and not gpus
               else value(record, gpus, allocs, host_state, ctx)
               for record, gpus, allocs, host_state in resolved]
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
            # what get_weight_multiplier() gives without aggregate
            # metadata, without its per-host set and validation
            return default
        return sched_utils.get_weight_multiplier(host_state, self.OPTION,
                                                 default)
