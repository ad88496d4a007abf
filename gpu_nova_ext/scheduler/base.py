"""What the GPU filters and weighers share.

Nova calls a filter's ``filter_all`` once per request with every host and
a weigher's ``weigh_objects`` once per request with every weighed host.
Both are overridden here so that per-request work (parsing the request,
reading options, deciding whether it is a GPU request at all) happens once,
and per-host work is dict lookups in the state cache:

* a non-GPU request returns from ``filter_all`` before looking at a host,
  and weighers that do not apply return constant weights (which Nova
  normalizes to 0) and a 0.0 multiplier without reading aggregates;
* a filter's verdict on a host (all GPUs pass, all fail, or the providers
  that fail) is memoized per constraint with the host's shape (its GPU
  facts without metrics), so the same flavor on the next request costs one
  lookup per host, and a payload with other facts (a new shape) starts
  afresh;
* candidates are pruned without Nova's per-candidate f-string logging.

Nova-loaded code: registers our option groups on nova.conf.CONF, imports
neither the agent nor the inventory sources, does no I/O per host.
"""
import dataclasses
import itertools
import threading
from typing import Any

import nova.conf
from nova.scheduler import filters
from nova.scheduler import utils as sched_utils
from nova.scheduler import weights
from oslo_log import log as logging

from gpu_nova_ext import conf as gconf
from gpu_nova_ext.scheduler import request as gpu_request
from gpu_nova_ext.state import cache as state_cache

LOG = logging.getLogger(__name__)

CONF = nova.conf.CONF
gconf.register_nova_opts(CONF)

# A RequestSpec's parsed context is reused for this long (seconds): the
# filters and weighers of one scheduling pass, every instance of a
# multi-create request.
CONTEXT_MAX_AGE = 2.0
_CTX_ATTR = '_gpu_nova_ext_ctx'
MEMO_LIMIT = 256

NONE = gpu_request.NONE
MAYBE = gpu_request.MAYBE


@dataclasses.dataclass(eq=False, slots=True)
class RequestContext:
    """One request as the plugins see it, built once per request."""

    request: gpu_request.GpuRequest
    cache: state_cache.GpuStateCache
    flavor: Any
    created: float            # cache clock
    oldest: float             # receive time before which state is missing
    fail_missing: bool        # [gpu_scheduler] missing_state_policy
    policy: str               # intra-host policy (flavor or option)
    logged: set = dataclasses.field(default_factory=set)
    extra: dict = dataclasses.field(default_factory=dict)


def request_context(spec_obj: Any) -> RequestContext:
    """The RequestContext of ``spec_obj``, parsed once and memoized."""
    cache = state_cache.get_cache()
    now = cache.clock()
    flavor = spec_obj.flavor if spec_obj.obj_attr_is_set('flavor') else None
    ctx = getattr(spec_obj, _CTX_ATTR, None)
    if (ctx is not None and ctx.cache is cache and ctx.flavor is flavor
            and now - ctx.created < CONTEXT_MAX_AGE):
        return ctx
    if cache.ensure_started(CONF) and cache.startup_wait > 0:
        # the first request of this process: let the agents' answers to
        # the listener's resend request arrive before judging hosts
        count = cache.wait_for_state(cache.startup_wait)
        LOG.info('GPU state listener started; %d host payloads arrived '
                 'within [gpu_scheduler] startup_state_wait', count)
        now = cache.clock()
    group = CONF.gpu_scheduler
    req = gpu_request.from_request_spec(spec_obj)
    ctx = RequestContext(
        request=req, cache=cache, flavor=flavor, created=now,
        oldest=now - cache.ttl,
        fail_missing=group.missing_state_policy == 'fail',
        policy=req.intra_host_policy or group.intra_host_policy)
    try:
        setattr(spec_obj, _CTX_ATTR, ctx)
    except Exception:  # pragma: no cover - an object refusing attributes
        pass
    return ctx


def draws_gpu(record: state_cache.HostRecord, host_state: Any) -> bool:
    """True when any allocation candidate uses a GPU provider we know."""
    by_provider = record.by_provider
    for cand in host_state.allocation_candidates:
        for rp in cand['allocations']:
            if rp in by_provider:
                return True
    return False


_memo_keys: dict = {}
_memo_keys_lock = threading.Lock()
_key_ids = itertools.count()
# memo key -> ({fact-set id (HostRecord.fact_ids): verdict}, {one GPU's
# fact: verdict}): a verdict on GPU facts is a pure function of the facts
# and the constraint, valid across requests and hosts (a new payload may
# bring new fact sets, never a different verdict for a known one)
_fact_verdicts: dict[int, tuple[dict, dict]] = {}
MEMO_KEYS_LIMIT = 4096


def memo_key(*parts) -> int:
    """A small int standing for ``parts`` (a filter and its constraint).

    Memo dicts are keyed by it: an int hashes at once, a constraint tuple
    would be hashed again on every lookup.  Ids are never reused, so
    dropping the table (past MEMO_KEYS_LIMIT constraints) only costs
    recomputation.
    """
    key = _memo_keys.get(parts)
    if key is None:
        with _memo_keys_lock:
            if len(_memo_keys) >= MEMO_KEYS_LIMIT:
                _memo_keys.clear()
                _fact_verdicts.clear()
            key = _memo_keys.setdefault(parts, next(_key_ids))
    return key


def fact_verdicts(key: int) -> tuple[dict, dict]:
    """The cross-request verdict memos of one memo key.

    (fact-set id -> verdict, one GPU's fact -> verdict).
    """
    verdicts = _fact_verdicts.get(key)
    if verdicts is None:
        verdicts = _fact_verdicts.setdefault(key, ({}, {}))
    return verdicts


_missing_lock = threading.Lock()
_missing_logged: dict[str, float] = {}


def note_missing(ctx: RequestContext, host_state: Any) -> None:
    """Log a host without live GPU state, once per host per state_ttl."""
    host = host_state.host
    last = _missing_logged.get(host)
    if last is not None and 0 <= ctx.created - last < ctx.cache.ttl:
        return
    with _missing_lock:
        _missing_logged[host] = ctx.created
    if ctx.fail_missing:
        LOG.warning('No live GPU state for host %(host)s (none received or '
                    'older than [gpu_scheduler] state_ttl=%(ttl)s s): GPU '
                    'requests with hard GPU constraints do not land there '
                    '(missing_state_policy=fail). Check gpu-nova-agent on '
                    'that host.', {'host': host, 'ttl': ctx.cache.ttl})
    else:
        LOG.info('No live GPU state for host %(host)s: GPU filters pass it '
                 '(missing_state_policy=pass).', {'host': host})


def log_spec_errors(ctx: RequestContext, who: str, errors: tuple) -> None:
    """One warning per filter per request for bad gpu: extra specs."""
    if who in ctx.logged:
        return
    ctx.logged.add(who)
    LOG.warning('%(who)s rejects every host for this request: %(errors)s. '
                'Fix the flavor\'s extra specs (nova-api validates gpu: '
                'keys once gpu-nova-ext is installed there).',
                {'who': who,
                 'errors': '; '.join('%s=%r: %s' % (e.key, e.value, e.reason)
                                     for e in errors)})


class GpuFilter(filters.BaseHostFilter, filters.CandidateFilterMixin):
    """Base of the hard-constraint GPU filters.

    A subclass names the constraint it enforces for a request
    (:meth:`constraint`, None when the request has none) and judges one
    GPU against it (:meth:`gpu_passes`).  A candidate passes when every
    GPU provider it draws from passes; the host passes when a candidate is
    left.  Candidates that draw from no provider the cache knows (legacy
    PCI passthrough) are judged by the host: kept when any of its GPUs
    passes.
    """

    RUN_ON_REBUILD = False
    # hosts without live state follow [gpu_scheduler] missing_state_policy
    HARD = True
    # a state_cache.FAMILY_* whose facts fact_passes() judges; None: judge
    # each GPU with gpu_passes()
    FAMILY = None

    def constraint(self, req: gpu_request.GpuRequest) -> Any:
        raise NotImplementedError()

    def fact_passes(self, fact: Any, constraint: Any) -> bool:
        raise NotImplementedError()

    def gpu_passes(self, gpu: state_cache.GpuRecord, constraint: Any) -> bool:
        return self.fact_passes(gpu.facts()[self.FAMILY], constraint)

    def describe(self, constraint: Any) -> str:
        return repr(constraint)

    def host_passes(self, host_state: Any, spec_obj: Any) -> bool:
        return bool(self.filter_all([host_state], spec_obj))

    def filter_all(self, filter_obj_list, spec_obj):
        if spec_obj is None:
            return filter_obj_list
        if sched_utils.request_is_rebuild(spec_obj):
            return filter_obj_list
        ctx = request_context(spec_obj)
        req = ctx.request
        if req.kind == NONE:
            return filter_obj_list
        name = self.__class__.__name__
        errors = req.errors_for(name)
        if errors:
            log_spec_errors(ctx, name, errors)
            return []
        constraint = self.constraint(req)
        if constraint is None:
            return filter_obj_list
        return self._filter(filter_obj_list, ctx, constraint, name)

    def _verdict(self, record: state_cache.HostRecord, constraint: Any,
                 facts_memo: dict, fact_memo: dict):
        """True (all pass), False (all fail) or the failing providers."""
        if self.FAMILY is not None:
            fact_set = record.fact_sets.get(self.FAMILY)
            if not fact_set:
                return False
            # hosts whose GPUs have the same facts all pass or all fail
            set_id = record.fact_ids[state_cache.FAMILIES.index(
                self.FAMILY)]
            shared = facts_memo.get(set_id)
            if shared is not None:
                return shared
            groups = record.groups[self.FAMILY]
            failing = []
            passing = False
            for fact, providers in groups.items():
                ok = fact_memo.get(fact)
                if ok is None:
                    ok = fact_memo[fact] = self.fact_passes(fact, constraint)
                if ok:
                    passing = True
                else:
                    failing.extend(providers)
            if not passing:
                facts_memo[set_id] = False
                return False
            if not failing:
                facts_memo[set_id] = True
                return True
            return frozenset(failing)
        failing = set()
        passing = False
        for gpu in record.gpus:
            if self.gpu_passes(gpu, constraint):
                passing = True
            else:
                failing.update(gpu.provider_uuids)
        if not passing:
            return False
        if not failing:
            return True
        return frozenset(failing)

    def _filter(self, host_states, ctx: RequestContext, constraint: Any,
                name: str) -> list:
        lookup = ctx.cache.lookup
        oldest = ctx.oldest
        maybe = ctx.request.kind == MAYBE
        key = memo_key(name, constraint)
        facts_memo, fact_memo = fact_verdicts(key)
        family = self.FAMILY
        family_index = (state_cache.FAMILIES.index(family)
                        if family is not None else None)
        passed = []
        for host_state in host_states:
            record = lookup(host_state, oldest)
            if record is None:
                if maybe:
                    passed.append(host_state)
                    continue
                note_missing(ctx, host_state)
                if not (self.HARD and ctx.fail_missing):
                    passed.append(host_state)
                else:
                    LOG.debug('%(filter)s: host %(host)s has no live GPU '
                              'state (missing_state_policy=fail)',
                              {'filter': name, 'host': host_state.host})
                continue
            if maybe and not draws_gpu(record, host_state):
                passed.append(host_state)
                continue
            # hosts whose GPUs have the same facts share a verdict; a
            # host whose GPUs differ has its failing providers memoized
            verdict = (facts_memo.get(record.fact_ids[family_index])
                       if family is not None else None)
            if verdict is None:
                # a family's verdict depends on the host's shape only and
                # outlives payloads that changed only metrics
                memo = record.verdicts if family is not None else record.memo
                verdict = memo.get(key)
                if verdict is None:
                    verdict = self._verdict(record, constraint, facts_memo,
                                            fact_memo)
                    if verdict.__class__ is frozenset or family is None:
                        if len(memo) >= MEMO_LIMIT:
                            memo.clear()
                        memo[key] = verdict
            if verdict is True:
                passed.append(host_state)
            elif verdict is False:
                LOG.debug('%(filter)s: no GPU of host %(host)s meets '
                          '%(what)s', {'filter': name,
                                       'host': host_state.host,
                                       'what': self.describe(constraint)})
            else:
                cands = host_state.allocation_candidates
                if not cands:
                    passed.append(host_state)
                    continue
                if len(verdict) == 1:
                    # one failing provider (the usual case): look it up
                    # in each candidate (its keys are not read but on a
                    # hash match)
                    for rp in verdict:
                        keep = [c for c in cands
                                if rp not in c['allocations']]
                else:
                    keep = [c for c in cands
                            if verdict.isdisjoint(c['allocations'])]
                if keep:
                    if len(keep) != len(cands):
                        host_state.allocation_candidates = keep
                    passed.append(host_state)
                else:
                    LOG.debug('%(filter)s: no allocation candidate of host '
                              '%(host)s draws from a GPU that meets '
                              '%(what)s', {'filter': name,
                                           'host': host_state.host,
                                           'what': self.describe(constraint)})
                    host_state.allocation_candidates = keep
        return passed


_UNSET = object()


def claim(record: state_cache.HostRecord, cand: dict,
          host_state: Any) -> tuple:
    """(record, GPUs, allocations, HostState, candidate) of a candidate.

    The GPUs are the GpuRecords of the providers the candidate draws
    from, in its order, and the allocations what it draws from each
    (``{'resources': {...}}``).
    """
    get = record.by_provider.get
    gpus = []
    allocs = []
    for rp, alloc in cand['allocations'].items():
        gpu = get(rp)
        if gpu is not None:
            gpus.append(gpu)
            allocs.append(alloc)
    return record, gpus, allocs, host_state, cand


# RequestContext.extra key: id(HostState) -> claim() of the candidate
# GpuCandidateOrderFilter put first, made while it had the host's data at
# hand; the weighers use it while that candidate is still first
CLAIMS = 'claims'


def _resolve(weighed_obj_list, ctx: RequestContext) -> list:
    """Per host: (record or None, GPUs, allocations, HostState, candidate).

    The claim() of the host's first allocation candidate (the one Nova
    claims): the GpuRecords it draws from and the allocations what it
    draws from each, in the same order.  Shared by all weighers of one
    weighing pass (Nova passes them the same list).
    """
    # kept with the request's context, so that it goes with the request
    # (not with the next one, as a thread-local would)
    extra = ctx.extra
    memo = extra.get('resolved')
    if memo is not None and memo[0] is weighed_obj_list:
        return memo[1]
    lookup = ctx.cache.lookup
    oldest = ctx.oldest
    out = []
    append = out.append
    if ctx.request.kind == NONE:
        # a non-GPU request draws no GPU: skip the candidates
        for weighed in weighed_obj_list:
            host_state = weighed.obj
            append((lookup(host_state, oldest), (), (), host_state, None))
    else:
        claims = extra.get(CLAIMS) or {}
        get_claim = claims.get
        for weighed in weighed_obj_list:
            host_state = weighed.obj
            cands = host_state.allocation_candidates
            found = get_claim(id(host_state))
            if found is not None and cands and cands[0] is found[4]:
                append(found)
                continue
            record = lookup(host_state, oldest)
            if record is None:
                append((None, (), (), host_state, None))
            elif not cands:
                append((record, (), (), host_state, None))
            else:
                append(claim(record, cands[0], host_state))
    extra['resolved'] = (weighed_obj_list, out)
    return out


class GpuWeigher(weights.BaseHostWeigher):
    """Base of the GPU weighers.

    A subclass names its multiplier option (``OPTION`` in ``[gpu_weights]``,
    overridable by aggregate metadata of the same name) and gives a raw
    value per host (:meth:`value`; None when unknown, which weighs as the
    mean of the known values).  ``FOR_GPU_REQUESTS`` False makes it weigh
    non-GPU requests instead.
    """

    OPTION = ''
    FOR_GPU_REQUESTS = True
    # [gpu_weights] OPTION as the last weighing pass that applied read it
    _option_value = 0.0

    def __init__(self):
        super().__init__()
        self._local = threading.local()

    def value(self, record: state_cache.HostRecord | None, gpus: list,
              allocs: list, host_state: Any,
              ctx: RequestContext) -> float | None:
        """The raw weight of one host, None when unknown.

        :param gpus: the GpuRecords the claimed candidate draws from.
        :param allocs: what it draws from each (``{'resources': ...}``).
        """
        raise NotImplementedError()

    def _weigh_object(self, host_state, weight_properties):
        return self.weigh_objects(
            [weights.WeighedHost(host_state, 0.0)], weight_properties)[0]

    def applies(self, ctx: RequestContext) -> bool:
        kind = ctx.request.kind
        if self.FOR_GPU_REQUESTS:
            return kind != NONE
        return not ctx.request.is_gpu

    def weigh_objects(self, weighed_obj_list, weight_properties):
        local = self._local
        ctx = request_context(weight_properties)
        if not self.applies(ctx):
            local.multiplier = None
            return [0.0] * len(weighed_obj_list)
        default = getattr(CONF.gpu_weights, self.OPTION)
        if default == 0.0 and not _any_aggregates(weighed_obj_list):
            # off, and no aggregate can turn it on: skip the work
            local.multiplier = None
            return [0.0] * len(weighed_obj_list)
        local.multiplier = default
        # the same for every thread (the option's value)
        self._option_value = default
        value = self.value
        resolved = _resolve(weighed_obj_list, ctx)
        if self.FOR_GPU_REQUESTS and ctx.request.kind == MAYBE:
            # a GPU request only where the claimed candidate uses a GPU
            raw = [value(record, gpus, allocs, host_state, ctx)
                   if gpus else None
                   for record, gpus, allocs, host_state, _cand in resolved]
        else:
            raw = [value(record, gpus, allocs, host_state, ctx)
                   for record, gpus, allocs, host_state, _cand in resolved]
        known = [v for v in raw if v is not None]
        if len(known) == len(raw):
            return raw
        fill = sum(known) / len(known) if known else 0.0
        return [fill if v is None else v for v in raw]

    def weight_multiplier(self, host_state):
        if not host_state.aggregates:
            # Nova multiplies each host's normalized weight by this: the
            # option's value where the weigher applied, and where it did
            # not, all weights are equal and normalized to 0, so any
            # number does (one attribute read per host and weigher)
            return self._option_value
        # what weigh_objects() decided for this pass (this thread): None
        # when it returned equal weights (normalized to 0), so that the
        # aggregates of hosts are not read in vain
        multiplier = getattr(self._local, 'multiplier', _UNSET)
        if multiplier is None:
            return 0.0
        if multiplier is _UNSET:
            multiplier = getattr(CONF.gpu_weights, self.OPTION)
        if not host_state.aggregates:
            return multiplier
        return sched_utils.get_weight_multiplier(host_state, self.OPTION,
                                                 multiplier)


def _any_aggregates(weighed_obj_list) -> bool:
    for weighed in weighed_obj_list:
        if weighed.obj.aggregates:
            return True
    return False
