# SPDX-License-Identifier: Apache-2.0

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


def _fragmentation_order(record, host_state, ctx, room):
    """(provider -> rank, providers best first) for ``fragmentation``.

    Design doc: Fragmentation-aware placement; ``room``: :func:`_room`'s.
    """
    taken = weighing.taken(record, host_state.allocation_candidates[0])
    if len(taken) != 1:
        return record.order('pack', room)
    (share,) = taken.values()
    mix = fragmentation.request_mix(ctx, taken) if share < 1.0 else None
    if not mix:
        return record.order('pack', room)
    free = room or fragmentation.gpu_free(record, host_state)
    vcpus, ram = fragmentation.free_cpu_ram(host_state)
    # free units of a GPU -> how taking the share there fragments
    cost = fragmentation.share_costs(
        free, vcpus - ctx.vcpus, ram - ctx.ram_mb, mix, share,
        record.facts.link_domains).get
    health, least = record.health_rank, room or record.free
    # then as pack (records.HostRecord.order): least free, PCI address
    return record.facts.ranked(lambda g: (
        health[g.index], cost(g.index, _LAST), least[g.index],
        g.pci_address))


def _topology_sort(record, host_state, cands, ranks, room):
    """Sort multi-GPU candidates by topology (design doc: Topology).

    Healthiest GPUs, best connected, the least free capacity left in the
    islands they take from, then the policy's order.
    """
    free = room or fragmentation.gpu_free(record, host_state)
    left: dict = {}
    for gpu in record.gpus:
        name = topology.island(gpu)
        if name is not None:
            left[name] = left.get(name, 0.0) + free[gpu.index]
    health = record.health_rank

    def key(cand):
        gpus = topology.candidate_gpus(record, cand)
        if not gpus:
            return (_LAST,)
        islands = {topology.island(g) for g in gpus} - {None}
        return (max(health[g.index] for g in gpus),
                topology.connectedness(gpus),
                sum(left[name] for name in islands),
                sum(ranks.get(rp, _LAST) for rp in cand['allocations']
                    if rp in record.by_provider))
    cands.sort(key=key)


def _room(ctx, record, host_state, cands):
    """Free units per GPU less what the request's own servers took there.

    A multi-create (design doc: Scheduler plugins; Nova 34's
    ``SchedulerManager._schedule``): the candidates that no longer fit
    go.  None: none of the request's servers landed here.
    """
    seen = ctx.placed.get(host_state.uuid or host_state.nodename)
    if seen is None:
        return None
    count, first, used = seen
    if host_state.num_instances > count:
        for index, units in first.items():
            used[index] = used.get(index, 0.0) + units
    if not used:
        return None
    room = fragmentation.gpu_free(record, host_state)
    for index, units in used.items():
        room[index] -= units
    cands[:] = [c for c in cands if all(
        units <= room[index] + fragmentation.EPS for index, units in
        weighing.taken(record, c).items())]
    return room


def _remember(ctx, record, host_state) -> None:
    """Note what Nova claims on the host if it takes the request's next."""
    key = host_state.uuid or host_state.nodename
    seen = ctx.placed.get(key)
    cands = host_state.allocation_candidates    # none left: takes nothing
    ctx.placed[key] = (host_state.num_instances,
                       weighing.taken(record, cands[0]) if cands else {},
                       seen[2] if seen else {})


def _put_first(ctx, record, host_state, cands, room, by_record) -> bool:
    """Order one host's candidates; whether the record ordered by itself."""
    if by_record:
        try:
            ranks, best = record.order(ctx.policy, room)
        except KeyError:
            # the one of request.POLICIES a record cannot order by
            # itself: fragmentation needs the request's mix
            by_record = False
    if not by_record:
        ranks, best = _fragmentation_order(record, host_state, ctx, room)
    mine = record.facts.reserved_providers(ctx.project_id)
    if mine:
        ranks, best = _owner_first(ranks, best, frozenset(mine))
    if (ctx.request.topology != 'any'
            and len(topology.candidate_gpus(record, cands[0])) > 1):
        _topology_sort(record, host_state, cands, ranks, room)
        return by_record
    for rp in best[:_PROBES]:
        for i, cand in enumerate(cands):
            if rp in cand['allocations']:
                if i:
                    cands.insert(0, cands.pop(i))
                return by_record
    _sort(cands, ranks)
    return by_record


class GpuCandidateOrderFilter(filtering.GpuFilter):
    """Put the candidate of each host's preferred GPU first.

    Rejects no host (design doc: Scheduler plugins, Topology).  The
    request's project's reserved GPUs first, then the intra-host policy's
    order; the first GPU or two are looked for, else every candidate is
    ranked.
    """

    HARD = False

    def constraint(self, req):
        return True

    def _filter(self, host_states, ctx, constraint, name):
        multi, by_record = ctx.num_instances > 1, True
        for host_state in host_states:
            cands = host_state.allocation_candidates
            if len(cands) < 2 and not (multi and cands):
                continue
            record = ctx.record(host_state)
            if record is None:
                continue
            room = _room(ctx, record, host_state, cands) if multi else None
            if len(cands) > 1:
                by_record = _put_first(ctx, record, host_state, cands, room,
                                       by_record)
            if multi:
                _remember(ctx, record, host_state)
        return host_states
