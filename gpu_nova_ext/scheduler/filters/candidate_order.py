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
from gpu_nova_ext.scheduler import filtering
from gpu_nova_ext.scheduler.filters import topology
from gpu_nova_ext.scheduler import fragmentation
from gpu_nova_ext.scheduler import weighing
from gpu_nova_ext.state import records

_LAST = records.ORDER_LAST
# how many of the best GPUs to look for before ranking every candidate
_PROBES = 2


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

    Whole GPUs fragment a host the same whichever it takes: ``pack``.  A
    vGPU ranks each GPU by the host's fragmentation after taking its share
    there (design doc: Fragmentation-aware placement), then as ``pack``.
    """
    claim = weighing.claim(record, host_state)
    if len(claim.gpus) != 1:
        return record.order('pack')
    share = claim.taken()[claim.gpus[0].index]
    mix = fragmentation.request_mix(ctx, claim) if share < 1.0 else None
    if not mix:
        return record.order('pack')
    free = fragmentation.gpu_free(record, host_state)
    vcpus, ram = fragmentation.free_cpu_ram(host_state)
    # free units of a GPU -> how taking the share there fragments
    cost = fragmentation.share_costs(
        free, vcpus - ctx.vcpus, ram - ctx.ram_mb, mix, share,
        record.facts.link_domains).get
    health, least = record.health_rank, record.free
    # then as pack (records.HostRecord.order): least free, PCI address
    order = sorted(record.gpus, key=lambda g: (
        health[g.index], cost(g.index, _LAST), least[g.index],
        g.pci_address))
    ranks = {rp: rank for rank, gpu in enumerate(order)
             for rp in gpu.provider_uuids}
    return ranks, tuple(ranks)


def _multi_gpu(record, cand) -> bool:
    """Whether a candidate draws from more than one GPU."""
    get = record.by_provider.get
    first = None
    for rp in cand['allocations']:
        gpu = get(rp)
        if gpu is not None:
            if first is None:
                first = gpu.index
            elif gpu.index != first:
                return True
    return False


def _topology_sort(record, host_state, cands, ranks):
    """Sort multi-GPU candidates by topology (design doc: Topology).

    Healthiest GPUs, best connected, then the tightest fit, then the
    policy's order.  The tightest fit: the least free capacity in the
    islands (link domains, else PCIe switches) the candidate takes from,
    so that a half-used island is used up before a whole one is broken.
    """
    free = fragmentation.gpu_free(record, host_state)
    room: dict = {}
    for gpu in record.gpus:
        name = topology.island(gpu)
        if name is not None:
            room[name] = room.get(name, 0.0) + free[gpu.index]
    health = record.health_rank

    def key(cand):
        gpus = topology.candidate_gpus(record, cand)
        if not gpus:
            return (_LAST,)
        islands = {topology.island(g) for g in gpus} - {None}
        return (max(health[g.index] for g in gpus),
                topology.connectedness(gpus),
                sum(room[name] for name in islands),
                sum(ranks.get(rp, _LAST) for rp in cand['allocations']
                    if rp in record.by_provider))
    cands.sort(key=key)


class GpuCandidateOrderFilter(filtering.GpuFilter):
    """Put the candidate of each host's preferred GPU first.

    Rejects no host.  Nova claims a host's first allocation candidate:
    this moves to the front the first candidate that uses the GPU the
    intra-host policy prefers (``request.POLICIES``), healthy GPUs first,
    the GPUs reserved for the request's project before all.  The first
    GPU or two are looked for; else every candidate is ranked.  A
    multi-GPU server's candidates are ranked by topology first, unless
    ``gpu:topology=any``.
    """

    HARD = False

    def constraint(self, req):
        return True

    def _filter(self, host_states, ctx, constraint, name):
        policy, by_record = ctx.policy, True
        for host_state in host_states:
            cands = host_state.allocation_candidates
            if len(cands) < 2:
                continue
            record = ctx.record(host_state)
            if record is None:
                continue
            if by_record:
                try:
                    ranks, best = record.order(policy)
                except KeyError:
                    # the one of request.POLICIES a record cannot order by
                    # itself: fragmentation needs the request's mix
                    by_record = False
            if not by_record:
                ranks, best = _fragmentation_order(record, host_state, ctx)
            mine = record.facts.reserved_providers(ctx.project_id)
            if mine:
                ranks, best = _owner_first(ranks, best, frozenset(mine))
            if (ctx.request.topology != 'any'
                    and _multi_gpu(record, cands[0])):
                _topology_sort(record, host_state, cands, ranks)
                continue
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
