# SPDX-License-Identifier: Apache-2.0

"""The scheduler-side GPU state cache (design doc: State protocol).

One :class:`GpuStateCache` per nova-scheduler process keeps per host the
facts it last received and the record of its latest metrics
(:mod:`gpu_nova_ext.state.records`).  ``update`` is the only way in: it
validates each message before anything is stored, and never raises.  The
rules of identity, ordering, liveness, resends and bounds are the design
doc's; every per-host table is bounded by :data:`_TABLE_LIMIT`.
"""
from collections.abc import Callable
import logging as std_logging
import threading
import time
from typing import Any

from oslo_config import cfg
from oslo_log import log as logging

from gpu_nova_ext import conf as gconf
from gpu_nova_ext.state import records
from gpu_nova_ext.state import rpc
from gpu_nova_ext.state import schema

LOG = logging.getLogger(__name__)

# re-exported for the plugins
HostRecord = records.HostRecord

RESEND_INTERVAL = 10.0
# bound of the per-host tables a hostile sender could grow with made-up
# host names
_TABLE_LIMIT = 65536
_DEFAULT_TTL = 120.0
_DEFAULT_MAX_GPUS = 64


class GpuStateCache:
    """Newest valid GPU state per host.

    ``conf``: ``[gpu_scheduler]`` (None: the defaults until
    :meth:`configure`); ``clock``: monotonic seconds (the simulator's).
    """

    def __init__(self, conf: cfg.ConfigOpts | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.ttl = _DEFAULT_TTL
        self.startup_wait = 0.0
        self._max_gpus = _DEFAULT_MAX_GPUS
        self._conf = None
        self._lock = threading.Lock()
        self._facts: dict[str, records.HostFacts] = {}
        self._seen: dict[str, float] = {}        # host -> last accepted
        self._seq: dict[str, int] = {}           # host -> last seq
        self._records: dict[str, records.HostRecord] = {}
        self._index: dict[str, str] = {}         # name -> host
        self._providers: dict[str, str] = {}     # GPU provider -> host
        self._logged: dict[tuple, float] = {}    # (host, what) -> when
        self._asked: dict[str, float] = {}       # host -> resend asked
        # host -> the latest metrics message for facts not held (yet)
        self._pending: dict[str, dict] = {}
        self.listener = rpc.StateListener(self)
        #: called with a host name to ask its agent for its facts
        self.ask_resend: Callable[[str], None] = self.listener.ask_resend
        if conf is not None:
            self.configure(conf)

    def configure(self, conf: cfg.ConfigOpts) -> None:
        """Read ``[gpu_scheduler]`` options from ``conf``."""
        gconf.register_nova_opts(conf)
        self._conf = conf
        group = conf.gpu_scheduler
        self.ttl = group.state_ttl
        self.startup_wait = group.startup_state_wait
        self._max_gpus = group.max_gpus_per_host

    def start(self, conf: cfg.ConfigOpts) -> None:
        """Listen for agents' state in this process; idempotent."""
        self.configure(conf)
        self.listener.start(conf)

    def stop(self) -> None:
        """Stop this process's listener; idempotent."""
        self.listener.stop()

    def ensure_started(self, conf: cfg.ConfigOpts) -> bool:
        """Apply ``conf``; start the listener if configured; never raises.

        True when this call started it.
        """
        if self._conf is not conf:
            self.configure(conf)
        return self.listener.ensure_started(conf)

    def update(self, message: Any) -> bool:
        """Validate and ingest one message; False when not stored.

        Never raises: a bad message is logged (once per host per
        ``state_ttl``, with the reason) and changes nothing.
        """
        try:
            reason = self._update(message, self.clock())
        except Exception as exc:    # a bug must not stop ingestion
            reason = 'cannot be ingested: %r' % (exc,)
        if reason is True:
            # which worker of a forked nova-scheduler holds which host's
            # state since when; a hot path: nothing computed without DEBUG
            if LOG.isEnabledFor(std_logging.DEBUG):
                LOG.debug('GPU state of %s stored', schema.host_of(message))
            self.listener.arrived()
            return True
        if reason:
            self.log_once(std_logging.WARNING, schema.host_of(message),
                          'rejected', 'Rejected GPU state message from '
                          '%(host)s: %(reason)s', reason=reason)
        return False

    def _update(self, message: Any, now: float) -> bool | str | None:
        """True: stored; a string: why rejected; None: ignored quietly."""
        reason = schema.problem(message, self._max_gpus)
        if reason:
            return reason
        host = message['host']
        if message['kind'] == schema.METRICS:
            facts = self._facts.get(host)
            if facts is None or facts.digest != message['digest']:
                # the facts may be on their way (the RPC server's workers
                # can swap two messages): kept until they come, and the
                # host is asked for them
                if len(self._pending) >= _TABLE_LIMIT:
                    self._pending.clear()
                self._pending[host] = message
                self._resend(host, now)
                return None
            return self._metrics(facts, message, now)
        facts = records.host_facts(message, self._facts.get(host))
        with self._lock:
            reason = self._bind(facts, now)
            if reason:
                return reason
            # a facts message starts the agent's sequence
            self._seq[host] = message['seq']
            self._seen[host] = now
            pending = self._pending.pop(host, None)
        if (pending is not None and pending['digest'] == facts.digest
                and pending['seq'] > message['seq']):
            self._metrics(facts, pending, now)
        return True

    def _metrics(self, facts: records.HostFacts, message: dict,
                 now: float) -> bool | str | None:
        gpus = message['gpus']
        if len(gpus) != len(facts.gpus):
            return ('%d GPUs in metrics for facts of %d GPUs'
                    % (len(gpus), len(facts.gpus)))
        record = records.host_record(
            facts, gpus, generated_at=message['generated_at'],
            received_at=now, seq=message['seq'])
        host = facts.host
        with self._lock:
            if self._facts.get(host) is not facts:
                return None      # other facts arrived meanwhile
            if record.seq <= self._seq.get(host, -1):
                # the newer (held) state wins, whatever the older one
                # says: a late "healthy" never undoes a GPU turning
                # unhealthy after it
                LOG.debug('Ignored GPU state of %s: older than the held '
                          'state', host)
                return None
            self._seq[host] = record.seq
            self._records[host] = record
            self._seen[host] = now
        return True

    def _live(self, host: str, now: float) -> bool:
        seen = self._seen.get(host)
        return seen is not None and seen >= now - self.ttl

    def _bind(self, facts: records.HostFacts, now: float) -> str | None:
        """Hold ``facts`` unless another host owns a name; why not (locked)."""
        host = facts.host
        if host not in self._facts and len(self._facts) >= _TABLE_LIMIT:
            for old in [h for h in self._facts if not self._live(h, now)]:
                self._forget(old)
            if len(self._facts) >= _TABLE_LIMIT:
                return ('%d hosts with live state, the most this cache '
                        'holds' % _TABLE_LIMIT)
        owned = self._owned(facts)
        for table, keys, what in owned:
            for key in keys:
                owner = table.get(key)
                if owner not in (None, host) and self._live(owner, now):
                    return ('it claims %s %s, which host %s holds with live '
                            'state; check [DEFAULT] host and the Placement '
                            'providers of both agents' % (what, key, owner))
        self._forget_names(host)
        for table, keys, _ in owned:
            table.update(dict.fromkeys(keys, host))
        self._facts[host] = facts
        return None

    def _owned(self, facts: records.HostFacts) -> tuple:
        """(table, the keys ``facts`` own in it, what they are)."""
        return ((self._index, facts.names(), 'name'),
                (self._providers, tuple(facts.by_provider), 'GPU provider'))

    def _forget_names(self, host: str) -> None:
        old = self._facts.get(host)
        for table, keys, _ in self._owned(old) if old is not None else ():
            for key in keys:
                if table.get(key) == host:
                    del table[key]

    def _resend(self, host: str, now: float) -> None:
        asked = self._asked.get(host)
        if asked is not None and 0 <= now - asked < RESEND_INTERVAL:
            return
        if len(self._asked) >= _TABLE_LIMIT:
            self._asked.clear()
        self._asked[host] = now
        LOG.info('GPU metrics from %s for facts this scheduler does not '
                 'hold: asking that host to resend them', host)
        try:
            self.ask_resend(host)
        except Exception as exc:
            LOG.warning('Could not ask %(host)s for its GPU facts: %(err)s',
                        {'host': host, 'err': exc})

    def log_once(self, level: int, host: str, what: str, msg: str,
                 repeats: int | None = std_logging.DEBUG, **kw) -> None:
        """Log at ``level`` once per host and kind per ``state_ttl``.

        The repeats at level ``repeats`` (None: not logged).
        """
        now = self.clock()
        last = self._logged.get((host, what))
        if last is not None and 0 <= now - last < self.ttl:
            if repeats is not None:
                LOG.log(repeats, msg, dict(kw, host=host))
            return
        if len(self._logged) >= _TABLE_LIMIT:
            self._logged.clear()
        self._logged[(host, what)] = now
        LOG.log(level, msg, dict(kw, host=host))

    def remove(self, host: str) -> None:
        """Forget a host's state (tools, tests)."""
        with self._lock:
            self._forget(host)

    def _forget(self, host: str) -> None:
        self._forget_names(host)
        for table in (self._facts, self._seen, self._seq, self._records,
                      self._pending):
            table.pop(host, None)

    def oldest_live(self) -> float:
        """Receive time before which state counts as missing."""
        return self.clock() - self.ttl

    def host_record(self, name: str) -> records.HostRecord | None:
        """Live record by host, nodename or root provider UUID."""
        return self._live_record(self._index.get(name), self.oldest_live())

    def lookup(self, host_state: Any,
               oldest: float) -> records.HostRecord | None:
        """Live record of a HostState: by node UUID, nodename, then host.

        ``oldest``: :meth:`oldest_live`, computed once per request.
        """
        index = self._index
        return self._live_record(
            index.get(host_state.uuid) or index.get(host_state.nodename)
            or index.get(host_state.host), oldest)

    def _live_record(self, host: str | None,
                     oldest: float) -> records.HostRecord | None:
        record = self._records.get(host)
        if record is None or record.received_at < oldest:
            return None
        return record

    def get(self, host: str) -> dict[str, Any] | None:
        """Live state of a host (or nodename, root provider), for tools."""
        record = self.host_record(host)
        if record is None:
            return None
        facts = record.facts
        return {'host': facts.host, 'nodename': facts.nodename,
                'root_provider_uuid': facts.root_provider_uuid,
                'agent_mode': facts.agent_mode,
                'generated_at': record.generated_at,
                'gpus': [{**gpu.source, **entry} for gpu, entry
                         in zip(facts.gpus, record.dynamic)]}

    def hosts(self) -> list[str]:
        """Hosts with live state, sorted."""
        oldest = self.oldest_live()
        return sorted(h for h, r in list(self._records.items())
                      if r.received_at >= oldest)


_CACHE: GpuStateCache | None = None
_CACHE_LOCK = threading.Lock()


def get_cache() -> GpuStateCache:
    """The process singleton."""
    global _CACHE
    with _CACHE_LOCK:
        if _CACHE is None:
            _CACHE = GpuStateCache()
        return _CACHE


def reset_cache() -> None:
    """Drop the singleton, stopping its listener (tests, tools)."""
    global _CACHE
    with _CACHE_LOCK:
        cache, _CACHE = _CACHE, None
    if cache is not None:
        cache.stop()
