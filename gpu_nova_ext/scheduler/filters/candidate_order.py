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


class GpuCandidateOrderFilter(filtering.GpuFilter):
    """Put the candidate of each host's preferred GPU first.

    Rejects no host.  Nova claims a host's first allocation candidate, so
    this filter moves to the front the first candidate (in Placement's
    order) that uses the GPU which ``gpu:intra_host_policy`` (or
    ``[gpu_scheduler] intra_host_policy``) prefers: ``pack`` (least free
    capacity left), ``spread`` (most), ``coolest`` (most thermal headroom)
    or ``least_loaded`` (lowest utilization); healthy GPUs before degraded
    ones, those before unhealthy ones; the GPUs reserved for the
    request's project (``gpu-nova-ext reserve``) before all others.  The
    candidates of the first GPU or two in that order are looked for; when
    none has a candidate, every candidate is ranked and the list sorted.
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
