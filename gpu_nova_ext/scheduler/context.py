# SPDX-License-Identifier: Apache-2.0

"""One scheduling request as the GPU plugins see it.

Design doc: Scheduler plugins.  Nothing is kept on Nova's objects (new
HostStates per request): a request's plugins share its RequestContext,
held as long as its RequestSpec (weakly).
"""
import dataclasses
import logging as std_logging
import threading
from typing import Any
import weakref

import nova.conf
from oslo_log import log as logging

from gpu_nova_ext import conf as gconf
from gpu_nova_ext.scheduler import request as gpu_request
from gpu_nova_ext.state import cache as state_cache

LOG = logging.getLogger(__name__)

CONF = nova.conf.CONF
gconf.register_nova_opts(CONF)

NONE = gpu_request.NONE
MAYBE = gpu_request.MAYBE
GPU = gpu_request.GPU


@dataclasses.dataclass(eq=False, slots=True, kw_only=True,
                       weakref_slot=True)
class RequestContext:
    """What one request's GPU filters and weighers share."""

    request: gpu_request.GpuRequest
    cache: state_cache.GpuStateCache
    flavor: Any
    now: float                 # the cache's clock when the request began
    oldest: float              # receive time before which state is missing
    fail_missing: bool         # hard filters reject hosts without state
    policy: str                # intra-host policy (flavor or option)
    project_id: str | None = None   # the request's project (reservations)
    # what the flavor takes of the host's CPU and RAM (0: no flavor)
    vcpus: float = 0.0
    ram_mb: float = 0.0
    # compute node UUID -> its record (or None) for the whole request
    hosts: dict = dataclasses.field(default_factory=dict)
    # filter name -> {GPU fact: passes}
    verdicts: dict = dataclasses.field(default_factory=dict)
    spec_errors_logged: set = dataclasses.field(default_factory=set)
    # filter name -> hosts it removed, over the request's instances
    removed: dict = dataclasses.field(default_factory=dict)
    limit_checked: bool = False     # the candidate-limit warning's check
    # the weighers' claims (weighing.Claim) and the list they are of
    claims: list | None = None
    claims_of: list | None = None
    mix: Any = None                 # fragmentation.Mix, once known
    # [gpu_weights] capability_scores as sorted pairs, read once
    capability_scores: tuple | None = None
    # servers in the request (a multi-create's count), and per compute
    # node what GpuCandidateOrderFilter last put first there:
    # (host's num_instances then, GPU index -> units, units the
    # request's servers already took there)
    num_instances: int = 1
    placed: dict = dataclasses.field(default_factory=dict)

    def record(self, host_state: Any) -> state_cache.HostRecord | None:
        """The live state record of a host, the same for the request."""
        key = host_state.uuid or host_state.nodename
        hosts = self.hosts
        if key not in hosts:
            hosts[key] = self.cache.lookup(host_state, self.oldest)
        return hosts[key]


_contexts: 'weakref.WeakKeyDictionary[Any, RequestContext]' = (
    weakref.WeakKeyDictionary())
_contexts_lock = threading.Lock()


def fail_missing(policy: str, req: gpu_request.GpuRequest) -> bool:
    """Whether hard GPU filters reject hosts without live state."""
    # [gpu_scheduler] missing_state_policy
    if policy == 'pass':
        return False
    if policy == 'fail_constrained':
        return req.constrained
    return True        # fail_all, and its deprecated name fail


def request_context(spec_obj: Any) -> RequestContext:
    """The RequestContext of ``spec_obj``, made on its first use."""
    flavor = spec_obj.flavor if spec_obj.obj_attr_is_set('flavor') else None
    cache = state_cache.get_cache()
    ctx = _contexts.get(spec_obj)
    if ctx is not None and ctx.cache is cache and ctx.flavor is flavor:
        return ctx
    if cache.ensure_started(CONF) and cache.startup_wait > 0:
        # the first request: the agents answer within milliseconds
        count = cache.listener.wait(cache.startup_wait)
        LOG.info('GPU state listener started; %d GPU state messages '
                 'arrived before the first request', count)
    group = CONF.gpu_scheduler
    req = gpu_request.from_request_spec(spec_obj)
    now = cache.clock()
    project = (spec_obj.project_id or None
               if spec_obj.obj_attr_is_set('project_id') else None)
    ctx = RequestContext(
        request=req, cache=cache, flavor=flavor, now=now,
        oldest=now - cache.ttl,
        fail_missing=fail_missing(group.missing_state_policy, req),
        policy=req.intra_host_policy or group.intra_host_policy,
        project_id=project,
        vcpus=float(flavor.vcpus or 0) if flavor is not None else 0.0,
        ram_mb=float(flavor.memory_mb or 0) if flavor is not None else 0.0,
        num_instances=(spec_obj.num_instances or 1
                       if spec_obj.obj_attr_is_set('num_instances') else 1))
    with _contexts_lock:
        _contexts[spec_obj] = ctx
    return ctx


def note_missing(ctx: RequestContext, host_state: Any) -> None:
    """Log a host without live GPU state, once per host per state_ttl."""
    if ctx.fail_missing:
        level, effect = std_logging.WARNING, (
            'this GPU request does not land there')
    else:
        level, effect = std_logging.INFO, (
            'GPU requests without gpu: constraints pass it and it weighs '
            'as average')
    ctx.cache.log_once(
        level, host_state.host, 'missing',
        'No live GPU state for host %(host)s (none received or older than '
        '[gpu_scheduler] state_ttl=%(ttl)s s): %(effect)s '
        '(missing_state_policy=%(policy)s). Check gpu-nova-agent on that '
        'host.', repeats=None, ttl=ctx.cache.ttl, effect=effect,
        policy=CONF.gpu_scheduler.missing_state_policy)


def log_spec_errors(ctx: RequestContext, who: str, errors: tuple) -> None:
    """One warning per filter per request for bad gpu: extra specs."""
    if who in ctx.spec_errors_logged:
        return
    ctx.spec_errors_logged.add(who)
    LOG.warning('%(who)s rejects every host for this request: %(errors)s. '
                'Fix the flavor\'s extra specs (nova-api validates gpu: '
                'keys once gpu-nova-ext is installed there).',
                {'who': who,
                 'errors': '; '.join('%s=%r: %s' % (e.key, e.value, e.reason)
                                     for e in errors)})
