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

"""GpuCandidateOrderFilter: choose the GPU inside each host."""
from gpu_nova_ext.scheduler import context as request_context
from gpu_nova_ext.scheduler import filtering
from gpu_nova_ext.scheduler import fragmentation
from gpu_nova_ext.state import records

_LAST = records.ORDER_LAST
# how many of the best GPUs to look for before ranking every candidate
_PROBES = 2
FRAGMENTATION = 'fragmentation'


def _sort(cands, ranks):
    """Sort candidates by the rank of their best GPU provider (stable)."""
    get = ranks.get

    def rank(cand):
        return min((get(rp, _LAST) for rp in cand['allocations']),
                   default=_LAST)
    cands.sort(key=rank)


def _owner_first(ranks, best, mine):
    """The policy's order with the project's reserved GPUs first."""
    shift = len(best) + 1
    ranks = {rp: rank if rp in mine else rank + shift
             for rp, rank in ranks.items()}
    best = tuple(rp for rp in best if rp in mine) + tuple(
        rp for rp in best if rp not in mine)
    return ranks, best


def _fragmentation_order(record, host_state, ctx):
    """(provider -> rank, providers best first) for ``fragmentation``.

    A request that takes whole GPUs fragments a host the same whichever
    free GPUs it takes: the ``pack`` order.  One that takes part of a GPU
    (a vGPU) ranks each GPU by the host's fragmentation after taking its
    share there (design doc: Fragmentation-aware placement), healthy GPUs
    first, then as ``pack``.
    """
    ranks, best = record.order('pack')
    cands = host_state.allocation_candidates
    get = record.by_provider.get
    gpus, allocs = [], []
    for rp, alloc in cands[0]['allocations'].items():
        gpu = get(rp)
        if gpu is not None:
            gpus.append(gpu)
            allocs.append(alloc)
    if len(gpus) != 1:
        return ranks, best
    share = fragmentation.taken(gpus, allocs)[gpus[0].index]
    if share >= 1.0:
        return ranks, best
    mix = fragmentation.request_mix(
        ctx, request_context.CONF.gpu_scheduler, gpus, allocs)
    if not mix:
        return ranks, best
    free = fragmentation.gpu_free(record, host_state)
    vcpus, ram = fragmentation.free_cpu_ram(host_state)
    cpu, mem = fragmentation.flavor_cpu_ram(ctx)
    # free units of a GPU -> how taking the share there fragments
    cost = fragmentation.share_costs(free, vcpus - cpu, ram - mem, mix,
                                     share)
    order = sorted(record.gpus, key=lambda g: (
        record.health_rank[g.index], cost.get(free[g.index], _LAST),
        ranks.get(g.provider_uuids[0], _LAST) if g.provider_uuids
        else _LAST))
    out = dict.fromkeys(ranks, _LAST)
    for rank, gpu in enumerate(order):
        for rp in gpu.provider_uuids:
            out[rp] = rank
    return out, tuple(rp for g in order for rp in g.provider_uuids)


class GpuCandidateOrderFilter(filtering.GpuFilter):
    """Put the candidate of each host's preferred GPU first.

    Rejects no host.  Nova claims a host's first allocation candidate, so
    this filter moves to the front the first candidate (in Placement's
    order) that uses the GPU which ``gpu:intra_host_policy`` (or
    ``[gpu_scheduler] intra_host_policy``) prefers: ``pack`` (least free
    capacity left), ``spread`` (most), ``coolest`` (most thermal headroom)
    ``least_loaded`` (lowest utilization) or ``fragmentation`` (the GPU
    whose use fragments the host least for the expected request mix, as
    GpuFragmentationWeigher counts it); healthy GPUs before degraded
    ones, those before unhealthy ones; the GPUs reserved for the
    request's project (``openstack gpu reservation create``) before all
    others.  The candidates of the first GPU or two in that order are
    looked for; when none has a candidate, every candidate is ranked and
    the list sorted.
    """

    RUN_ON_REBUILD = False
    HARD = False

    def constraint(self, req):
        return True

    def _filter(self, host_states, ctx, constraint, name):
        policy = ctx.policy
        for host_state in host_states:
            cands = host_state.allocation_candidates
            if len(cands) < 2:
                continue
            record = ctx.record(host_state)
            if record is None:
                continue
            if policy == FRAGMENTATION:
                ranks, best = _fragmentation_order(record, host_state, ctx)
            else:
                ranks, best = record.order(policy)
            mine = record.facts.reserved_providers(ctx.project_id)
            if mine:
                ranks, best = _owner_first(ranks, best, frozenset(mine))
            for rp in best[:_PROBES]:
                for i, cand in enumerate(cands):
                    if rp in cand['allocations']:
                        if i:
                            cands.insert(0, cands.pop(i))
                        break
                else:
                    continue
                break
            else:
                _sort(cands, ranks)
        return host_states
