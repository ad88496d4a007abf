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

"""A WARNING when Placement's candidate list was cut at Nova's limit.

Nova asks Placement for at most ``[scheduler] max_placement_results``
allocation candidates.  Placement (by default depth-first) cuts the list
in an order that knows nothing of load, so the partly used hosts a
packing weigher wants, or the empty ones a spreading weigher wants, may
be missing, and no filter or weigher can bring them back.

What a filter is handed is all that is used: the first of our GPU
filters to see a GPU request counts the allocation candidates of the
hosts it gets.  When that count reaches the limit while a packing,
spreading or fragmentation multiplier is set (``[gpu_weights]``
options, not aggregate metadata), one WARNING per process says so.  It
is a lower bound: Nova's own filters that run before ours can drop hosts
(and with them their candidates), so a cut list can go unnoticed; it
never warns about a list shorter than the limit.  It cannot see
Placement's generation strategy: with ``breadth-first`` a full list still
holds every host that can take the request while there are fewer such
hosts than the limit, and the warning is then a false alarm (its text
says so).
"""
import threading

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

CTX_KEY = 'candidate_limit_checked'
_lock = threading.Lock()
_warned = False


def check(ctx, host_states: list, conf) -> bool:
    """Warn once per process when a GPU request's list hit the limit.

    :param ctx: the request's RequestContext (checked once per request).
    :param host_states: the HostStates the filter was handed.
    :param conf: nova's CONF.
    :returns: True when this call logged the warning.
    """
    global _warned
    if ctx.extra.get(CTX_KEY):
        return False
    ctx.extra[CTX_KEY] = True
    if _warned:
        return False
    weights = conf.gpu_weights
    if not (weights.packing_weight_multiplier
            or weights.fragmentation_weight_multiplier):
        return False
    limit = conf.scheduler.max_placement_results
    count = 0
    for host_state in host_states:
        count += len(host_state.allocation_candidates or ())
    if count < limit:
        return False
    with _lock:
        if _warned:
            return False
        _warned = True
    LOG.warning(
        'Placement returned %(count)d allocation candidates for a GPU '
        'request, Nova\'s limit [scheduler] max_placement_results='
        '%(limit)d: the list was most likely cut, and the hosts a packing, '
        'spreading or fragmentation-aware policy prefers may not be in it, '
        'so the policy may be defeated. Set Placement\'s '
        '[placement] max_allocation_candidates (a cap applied while the '
        'candidates are generated) with [placement] '
        'allocation_candidates_generation_strategy = breadth-first (every '
        'viable host before any second candidate), and raise [scheduler] '
        'max_placement_results to match (doc/source/tuning.rst). If '
        'Placement already generates breadth-first and fewer hosts than '
        'that can take the request, every one of them is in the list and '
        'this is a false alarm. Logged once per nova-scheduler process.',
        {'count': count, 'limit': limit})
    return True


def reset() -> None:
    """Forget that the warning was logged (tests)."""
    global _warned
    with _lock:
        _warned = False
