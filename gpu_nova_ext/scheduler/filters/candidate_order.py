"""GpuCandidateOrderFilter: choose the GPU inside each host."""
from gpu_nova_ext.scheduler import base
from gpu_nova_ext.state import cache as state_cache

_LAST = state_cache.ORDER_LAST


class GpuCandidateOrderFilter(base.GpuFilter):
    """Order each host's candidates by the intra-host policy.

    Rejects no host: sorts each host's allocation candidates so that the
    first, which Nova claims, uses the GPU that ``gpu:intra_host_policy``
    (or ``[gpu_scheduler] intra_host_policy``) prefers: ``pack`` (least
    free capacity left), ``spread`` (most), ``coolest`` (most thermal
    headroom) or ``least_loaded`` (lowest utilization).  Healthy GPUs come
    before degraded ones, those before unhealthy ones.  The GPU ranks are
    computed when the host's state arrives (``HostRecord.order``).
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
            get = record.order[policy].get
            keys = []
            for cand in cands:
                # a candidate's rank: the best of its GPU providers (the
                # root provider and unknown ones rank last)
                key = _LAST
                for rp in cand['allocations']:
                    rank = get(rp, _LAST)
                    if rank < key:
                        key = rank
                keys.append(key)
            order = sorted(range(len(cands)), key=keys.__getitem__)
            host_state.allocation_candidates = [cands[i] for i in order]
        return host_states
