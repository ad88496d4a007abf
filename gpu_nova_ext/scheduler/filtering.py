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

"""The base of the GPU host filters (design doc: Scheduler plugins).

Nova calls a filter's ``filter_all`` once per request (and per instance of
a multi-create request) with the request's HostStates.  A GPU filter
judges each GPU fact of its family once per request (the request's
verdict memo, ``{fact: verdict}``): a host whose GPUs all pass is kept, a
host whose GPUs all fail is dropped, and a host whose GPUs differ keeps
the allocation candidates that draw from passing GPUs only.  Filters
prune ``host_state.allocation_candidates`` as Nova's own filters do.
"""
from typing import Any

from nova.scheduler import filters
from nova.scheduler import utils as sched_utils
from oslo_log import log as logging

from gpu_nova_ext.scheduler import candidate_limit
from gpu_nova_ext.scheduler import context as request_context
from gpu_nova_ext.scheduler import request as gpu_request
from gpu_nova_ext.state import cache as state_cache
from gpu_nova_ext.state import records

LOG = logging.getLogger(__name__)

NONE = request_context.NONE
MAYBE = request_context.MAYBE


def draws_gpu(record: records.HostRecord, host_state: Any) -> bool:
    """True when any allocation candidate uses a GPU provider we know."""
    by_provider = record.by_provider
    for cand in host_state.allocation_candidates:
        for rp in cand['allocations']:
            if rp in by_provider:
                return True
    return False


class GpuFilter(filters.BaseHostFilter, filters.CandidateFilterMixin):
    """Base of the GPU filters.

    A subclass names the constraint it enforces for a request
    (:meth:`constraint`, None when the request has none), the filter
    family whose GPU facts it judges (``FAMILY``, a
    ``gpu_nova_ext.state.records.FAMILY_*``) and judges one fact
    (:meth:`fact_passes`).  Candidates that draw from no provider the
    cache knows (legacy PCI passthrough) are judged by the host: kept when
    any of its GPUs passes.
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
        req = ctx.request
        if req.kind == NONE:
            return filter_obj_list
        if candidate_limit.CTX_KEY not in ctx.extra:
            filter_obj_list = list(filter_obj_list)
            candidate_limit.check(ctx, filter_obj_list, request_context.CONF)
        name = self.__class__.__name__
        errors = req.errors_for(name)
        if errors:
            request_context.log_spec_errors(ctx, name, errors)
            return []
        constraint = self.request_constraint(ctx)
        if constraint is None:
            return filter_obj_list
        return self._filter(list(filter_obj_list), ctx, constraint, name)

    def _fact_groups(self, record: records.HostRecord):
        """(fact, GPU providers with that fact) pairs of a host."""
        return record.groups(self.FAMILY).items()

    def _verdict(self, record: records.HostRecord, constraint: Any,
                 memo: dict):
        """True (all pass), False (all fail) or the failing providers."""
        failing = []
        passing = False
        for fact, providers in self._fact_groups(record):
            ok = memo.get(fact)
            if ok is None:
                ok = memo[fact] = self.fact_passes(fact, constraint)
            if ok:
                passing = True
            else:
                failing.extend(providers)
        if not passing:
            return False
        return frozenset(failing) if failing else True

    def _missing(self, ctx, host_state, name: str) -> bool:
        """Whether a host without live state passes."""
        request_context.note_missing(ctx, host_state)
        if self.HARD and ctx.fail_missing:
            LOG.debug('%(filter)s: host %(host)s has no live GPU state',
                      {'filter': name, 'host': host_state.host})
            return False
        return True

    def _filter(self, host_states: list, ctx, constraint: Any,
                name: str) -> list:
        maybe = ctx.request.kind == MAYBE
        memo = ctx.verdict_memo(name)
        passed = []
        for host_state in host_states:
            record = ctx.record(host_state)
            if record is None:
                if maybe or self._missing(ctx, host_state, name):
                    passed.append(host_state)
                continue
            if maybe and not draws_gpu(record, host_state):
                passed.append(host_state)
                continue
            verdict = self._verdict(record, constraint, memo)
            if verdict is True:
                passed.append(host_state)
            elif verdict is False:
                LOG.debug('%(filter)s: no GPU of host %(host)s meets '
                          '%(what)s', {'filter': name,
                                       'host': host_state.host,
                                       'what': self.describe(constraint)})
            else:
                cands = host_state.allocation_candidates
                keep = [c for c in cands
                        if verdict.isdisjoint(c['allocations'])]
                if keep or not cands:
                    passed.append(host_state)
                else:
                    LOG.debug('%(filter)s: no allocation candidate of host '
                              '%(host)s draws from a GPU that meets '
                              '%(what)s', {'filter': name,
                                           'host': host_state.host,
                                           'what': self.describe(constraint)})
                if len(keep) != len(cands):
                    host_state.allocation_candidates = keep
        return passed
