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
            ranks = record.order[policy]
            getitem = ranks.__getitem__
            try:
                # every provider known (the GPUs and the root): C speed
                cands.sort(key=lambda c: min(map(getitem, c['allocations'])))
            except KeyError:
                get = ranks.get
                cands.sort(key=lambda c: min(
                    [get(rp, _LAST) for rp in c['allocations']]))
        return host_states
