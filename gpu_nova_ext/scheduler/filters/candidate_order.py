"""GpuCandidateOrderFilter: choose the GPU inside each host."""
from gpu_nova_ext.scheduler import base
from gpu_nova_ext.state import cache as state_cache

_LAST = state_cache.ORDER_LAST
# how many of the best GPUs to look for before ranking every candidate
_PROBES = 2


def _sort(cands, ranks):
    """Sort candidates by the rank of their best GPU provider."""
    get = ranks.get
    keys = []
    for cand in cands:
        key = _LAST
        for rp in cand['allocations']:
            rank = get(rp, _LAST)
            if rank < key:
                key = rank
        keys.append(key)
    order = sorted(range(len(cands)), key=keys.__getitem__)
    cands[:] = [cands[i] for i in order]


class GpuCandidateOrderFilter(base.GpuFilter):
    """Put the candidate of each host's preferred GPU first.

    Rejects no host.  Nova claims a host's first allocation candidate, so
    this filter moves to the front the candidate that uses the GPU which
    ``gpu:intra_host_policy`` (or ``[gpu_scheduler] intra_host_policy``)
    prefers: ``pack`` (least free capacity left), ``spread`` (most),
    ``coolest`` (most thermal headroom) or ``least_loaded`` (lowest
    utilization); healthy GPUs before degraded ones, those before
    unhealthy ones.  The GPU order is computed when the host's state
    arrives (``HostRecord.order()``): usually the first GPU or two looked for
    find their candidate, so few candidates are read; otherwise every
    candidate is ranked and the list sorted.
    """

    RUN_ON_REBUILD = False
    HARD = False

    def constraint(self, req):
        return True

    def _filter(self, host_states, ctx, constraint, name):
        lookup = ctx.cache.lookup
        oldest = ctx.oldest
        policy = ctx.policy
        for host_state in host_states:
            cands = host_state.allocation_candidates
            if len(cands) < 2:
                continue
            record = lookup(host_state, oldest)
            if record is None:
                continue
            found = False
            ranks, best = (record.orders.get(policy)
                           or record.order(policy))
            for rp in best[:_PROBES]:
                for i, cand in enumerate(cands):
                    if rp in cand['allocations']:
                        if i:
                            cands.insert(0, cands.pop(i))
                        found = True
                        break
                if found:
                    break
            if not found:
                _sort(cands, ranks)
        return host_states
