# SPDX-License-Identifier: Apache-2.0

"""The base of the GPU host filters (design doc: Scheduler plugins).

A GPU filter judges each GPU fact of its family once per request: it
keeps a host whose GPUs all pass, drops one whose GPUs all fail, and
prunes the candidates of one whose GPUs differ.
"""
import dataclasses
import threading
from typing import Any

from nova.scheduler import filters
from nova.scheduler import utils as sched_utils
from oslo_log import log as logging

from gpu_nova_ext.scheduler import context as request_context
from gpu_nova_ext.scheduler import request as gpu_request
from gpu_nova_ext.state import cache as state_cache
from gpu_nova_ext.state import records

LOG = logging.getLogger(__name__)
CONF = request_context.CONF


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """A filter's judgement of one host's GPUs."""

    passes: bool                       # at least one GPU passes
    failing: frozenset = frozenset()   # providers of the GPUs that fail


ALL_PASS = Verdict(passes=True)
NONE_PASS = Verdict(passes=False)

_limit_lock = threading.Lock()
_limit_warned = False


def check_candidate_limit(ctx: request_context.RequestContext,
                          host_states: list) -> bool:
    """Warn once per process when a GPU request's list hit Nova's limit.

    Placement cuts it in an order that knows nothing of load.
    """
    global _limit_warned
    weights = CONF.gpu_weights
    if ctx.limit_checked or _limit_warned or not (
            weights.packing_weight_multiplier
            or weights.fragmentation_weight_multiplier):
        return False
    ctx.limit_checked = True
    limit = CONF.scheduler.max_placement_results
    count = sum(len(h.allocation_candidates or ()) for h in host_states)
    with _limit_lock:
        if count < limit or _limit_warned:
            return False
        _limit_warned = True
    LOG.warning(
        'Placement returned %(count)d allocation candidates for a GPU '
        'request, Nova\'s limit [scheduler] max_placement_results='
        '%(limit)d: the list was most likely cut, and the hosts a packing, '
        'spreading or fragmentation-aware policy prefers may not be in it. '
        'Set Placement\'s [placement] max_allocation_candidates with '
        'allocation_candidates_generation_strategy = breadth-first and '
        'raise max_placement_results to match (doc/source/tuning.rst); '
        'with breadth-first and fewer hosts than that able to take the '
        'request this is a false alarm. Logged once per process.',
        {'count': count, 'limit': limit})
    return True


def removed_by(ctx: request_context.RequestContext, name: str, count: int,
               last: bool) -> None:
    """Count the hosts a GPU filter removed; INFO when none is left.

    Per rule (Nova's own "Filtering removed all hosts" names the last).
    """
    ctx.removed[name] = ctx.removed.get(name, 0) + count
    if last:
        LOG.info('GPU filters left no host for this request; hosts removed '
                 'per rule: %s', ', '.join(
                     '%s %d' % item for item in ctx.removed.items()))


class GpuFilter(filters.BaseHostFilter, filters.CandidateFilterMixin):
    """Base of the GPU filters (subclasses: filters.facts).

    Candidates that draw from no provider the cache knows (legacy PCI
    passthrough) are kept when any GPU of the host passes.
    """

    RUN_ON_REBUILD = False
    # hosts without live state follow [gpu_scheduler] missing_state_policy
    HARD = True
    FAMILY: str = ''

    def __init__(self):
        super().__init__()
        # the state listener lives as long as nova-scheduler's plugins
        state_cache.get_cache().listener.attach(self)

    def constraint(self, req: gpu_request.GpuRequest) -> Any:
        raise NotImplementedError()

    def request_constraint(self, ctx: request_context.RequestContext
                           ) -> Any:
        """The constraint of a request; by default of its extra specs."""
        return self.constraint(ctx.request)

    def fact_passes(self, fact: Any, constraint: Any) -> bool:
        raise NotImplementedError()

    def describe(self, constraint: Any) -> str:
        return repr(constraint)

    def host_passes(self, host_state: Any, spec_obj: Any) -> bool:
        return bool(self.filter_all([host_state], spec_obj))

    def filter_all(self, filter_obj_list, spec_obj):
        if spec_obj is None or sched_utils.request_is_rebuild(spec_obj):
            return filter_obj_list
        ctx = request_context.request_context(spec_obj)
        if ctx.request.kind == request_context.NONE:
            return filter_obj_list
        filter_obj_list = list(filter_obj_list)
        check_candidate_limit(ctx, filter_obj_list)
        name = self.__class__.__name__
        errors = ctx.request.errors_for(name)
        if errors:
            request_context.log_spec_errors(ctx, name, errors)
            passed = []
        else:
            constraint = self.request_constraint(ctx)
            if constraint is None:
                return filter_obj_list
            passed = self._filter(filter_obj_list, ctx, constraint, name)
        if len(passed) < len(filter_obj_list):
            removed_by(ctx, name, len(filter_obj_list) - len(passed),
                       not passed)
        return passed

    def fact_groups(self, record: records.HostRecord):
        """(fact, GPU providers with that fact) pairs of a host."""
        return record.groups(self.FAMILY).items()

    def verdict(self, record: records.HostRecord, constraint: Any,
                memo: dict) -> Verdict:
        failing = []
        passing = False
        for fact, providers in self.fact_groups(record):
            ok = memo.get(fact)
            if ok is None:
                ok = memo[fact] = self.fact_passes(fact, constraint)
            if ok:
                passing = True
            else:
                failing.extend(providers)
        if not passing:
            return NONE_PASS
        return Verdict(passes=True, failing=frozenset(failing)) \
            if failing else ALL_PASS

    def _filter(self, host_states: list, ctx, constraint: Any,
                name: str) -> list:
        maybe = ctx.request.kind == request_context.MAYBE
        memo = ctx.verdicts.setdefault(name, {})
        passed = []
        for host_state in host_states:
            record = ctx.record(host_state)
            if record is None:
                ok = maybe or self._missing(ctx, host_state, name)
            elif maybe and not any(rp in record.by_provider for c in
                                   host_state.allocation_candidates
                                   for rp in c['allocations']):
                ok = True       # draws no GPU we know
            else:
                ok = self.judge(host_state, record, ctx, constraint, name,
                                memo)
            if ok:
                passed.append(host_state)
        return passed

    def judge(self, host_state, record: records.HostRecord, ctx,
              constraint: Any, name: str, memo: dict) -> bool:
        """Whether a host with live state passes; may prune candidates."""
        verdict = self.verdict(record, constraint, memo)
        if verdict is ALL_PASS:
            return True
        if verdict.passes:
            return self.keep_candidates(host_state, [
                c for c in host_state.allocation_candidates
                if verdict.failing.isdisjoint(c['allocations'])],
                constraint, name)
        LOG.debug('%(filter)s: no GPU of host %(host)s meets %(what)s',
                  {'filter': name, 'host': host_state.host,
                   'what': self.describe(constraint)})
        return False

    def keep_candidates(self, host_state, keep: list, constraint: Any,
                        name: str) -> bool:
        """Keep only ``keep`` of a host's candidates; whether it passes.

        A host Placement gave no candidate (legacy PCI claim) passes.
        """
        cands = host_state.allocation_candidates
        if len(keep) != len(cands):
            host_state.allocation_candidates = keep
        if keep or not cands:
            return True
        LOG.debug('%(filter)s: no allocation candidate of host %(host)s '
                  'meets %(what)s', {'filter': name, 'host': host_state.host,
                                     'what': self.describe(constraint)})
        return False

    def _missing(self, ctx, host_state, name: str) -> bool:
        """Whether a host without live state passes."""
        request_context.note_missing(ctx, host_state)
        if self.HARD and ctx.fail_missing:
            LOG.debug('%(filter)s: host %(host)s has no live GPU state',
                      {'filter': name, 'host': host_state.host})
            return False
        return True
