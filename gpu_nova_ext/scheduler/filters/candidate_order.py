"""GpuCandidateOrderFilter: choose the GPU inside each host."""
from gpu_nova_ext.scheduler import base
from gpu_nova_ext.state import cache as state_cache

_LAST = state_cache.ORDER_LAST
# how many of the best GPUs to look for before ranking every candidate
_PROBES = 2
# HostState attribute: GPU provider -> index of the candidate that drew
# from it in an earlier request (checked before use, so only a hint)
_HINTS = '_gpu_nova_ext_candidate_hints'
_HINTS_LIMIT = 64


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
    candidate is ranked and the list sorted.  The candidate moved is the
    first in Placement's order that draws from the preferred GPU, or the
    one found at the same position in an earlier request when it still
    draws from that GPU (a host's candidates keep their order between
    requests, so usually one candidate is read).
    """

    RUN_ON_REBUILD = False
    HARD = False

    def constraint(self, req):
        return True

    def _filter(self, host_states, ctx, constraint, name):
        lookup = ctx.cache.lookup
        oldest = ctx.oldest
        policy = ctx.policy
        # the weighers' claimed GPUs, resolved here while the host's data
        # is at hand (base._resolve)
        claims = ctx.extra[base.CLAIMS] = {}
        claim = base.claim
        for host_state in host_states:
            cands = host_state.allocation_candidates
            n = len(cands)
            if not n:
                continue
            record = lookup(host_state, oldest)
            if record is None:
                continue
            if n == 1:
                claims[id(host_state)] = claim(record, cands[0], host_state)
                continue
            ranks, best = (record.orders.get(policy)
                           or record.order(policy))
            # where each GPU's candidate was on this host last time:
            # Placement lists a host's candidates in a stable order, so
            # one candidate is read instead of half of them
            hints = host_state.__dict__.get(_HINTS)
            if hints is None or len(hints) > _HINTS_LIMIT:
                hints = {}
                setattr(host_state, _HINTS, hints)
            for k in range(min(len(best), _PROBES)):
                rp = best[k]
                i = hints.get(rp)
                if i is None or i >= n or rp not in cands[i]['allocations']:
                    for i, cand in enumerate(cands):
                        if rp in cand['allocations']:
                            hints[rp] = i
                            break
                    else:
                        continue
                if i:
                    cands.insert(0, cands.pop(i))
                break
            else:
                _sort(cands, ranks)
            claims[id(host_state)] = claim(record, cands[0], host_state)
        return host_states
