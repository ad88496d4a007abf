# SPDX-License-Identifier: Apache-2.0

"""The GPU state channel: a versioned oslo.messaging RPC API.

Design doc: State protocol.  Every nova-scheduler process runs a
:class:`SchedulerStateServer` (a :class:`gpu_nova_ext.messaging.RpcServer`)
that hands each message to its state cache; the agent's side is
:mod:`gpu_nova_ext.agent.state_client`.

RPC API history: 1.0 ``update_gpu_state(state)`` on the scheduler topic,
``resend_gpu_state()`` on the agent topic; 1.1 ``resend_gpu_state(host)``
(only that host's agent answers), ``state`` a protocol 1.1 message.
"""
import atexit
import os
import threading
import time
from typing import Any
import weakref

from oslo_config import cfg
from oslo_log import log as logging
import oslo_messaging as messaging

from gpu_nova_ext import conf as gconf
from gpu_nova_ext import messaging as bus

LOG = logging.getLogger(__name__)

RPC_API_VERSION = '1.1'


class SchedulerStateEndpoint:
    """Scheduler-side RPC endpoint: agents' state goes to the cache."""

    target = messaging.Target(version=RPC_API_VERSION)

    def __init__(self, cache: Any) -> None:
        self._cache = cache

    def update_gpu_state(self, ctxt: dict, state: Any = None,
                         **kwargs: Any) -> None:
        # a later 1.x agent's extra arguments are ignored; the cache
        # validates ``state``, logs a rejection and never raises
        self._cache.update(state)


class SchedulerStateServer(bus.RpcServer):
    """Receives agents' GPU state inside one nova-scheduler process.

    ``conf``: Nova's CONF in nova-scheduler (``transport_url``, our
    ``[gpu_scheduler]``); ``cache``: a ``GpuStateCache``.
    """

    def __init__(self, conf: cfg.ConfigOpts, cache: Any) -> None:
        gconf.register_nova_opts(conf)
        super().__init__(conf, conf.gpu_scheduler.state_topic,
                         SchedulerStateEndpoint(cache), 'GPU state server',
                         RPC_API_VERSION)
        self._agent_topic = conf.gpu_scheduler.agent_topic
        self._resend_client = None

    def start(self, wait: float = bus.START_WAIT) -> None:
        """Listen on the state topic, then ask every agent to resend.

        Returns once the queues are bound, which the request follows (no
        answer is missed); with the bus unreachable, after ``wait`` s.
        """
        self._start(wait, self._ask_resend)

    def _ask_resend(self, transport: messaging.Transport) -> None:
        self._resend_client = messaging.get_rpc_client(
            transport,
            messaging.Target(topic=self._agent_topic, version='1.0'),
            retry=bus.CAST_RETRY)
        if bus.cast(self._resend_client, 'resend_gpu_state'):
            LOG.debug('Asked agents on topic %s to resend GPU state',
                      self._agent_topic)

    def ask_resend(self, host: str | None = None) -> None:
        """Ask the agent of ``host`` (None: every agent) to resend."""
        client = self._resend_client
        if client is not None and self.running:
            bus.cast(client, 'resend_gpu_state', version='1.1', host=host)


class StateListener:
    """The :class:`SchedulerStateServer` of one cache in one process.

    Started by the first GPU plugin that runs in a process
    (``[gpu_scheduler] state_listener``) or by :meth:`start` (tools, the
    simulator); a fork's child starts its own.  Stopped by :meth:`stop`,
    at exit, and, when a plugin started it, once every plugin instance is
    garbage-collected: no thread is left behind.
    """

    def __init__(self, sink) -> None:
        self._sink = sink
        self._lock = threading.Lock()
        self._server = None          # the SchedulerStateServer, once made
        self._failed_pid = None
        self._owners = 0
        # started by a plugin (ensure_started): stops with the plugins
        self._by_plugins = False
        self._arrived = threading.Condition()
        self._count = 0

    @property
    def running(self) -> bool:
        """Listening in this process (a fork's child is not)."""
        server = self._server
        return server is not None and server.running

    def start(self, conf) -> None:
        """Run the server in this process; idempotent.

        Raises what the RPC layer raises (a bad ``transport_url``).
        """
        with self._lock:
            if self.running:
                return
            if self._server is None:
                atexit.register(self.stop)
            self._server = SchedulerStateServer(conf, self._sink)
            self._server.start()
            self._by_plugins = False

    def stop(self) -> None:
        """Stop this process's server and wait for its threads."""
        server = self._server
        if server is not None:
            # in a fork's child it forgets the parent's server untouched
            server.stop()

    def ensure_started(self, conf) -> bool:
        """Start once per process when ``state_listener``; never raises.

        True when this call started it.
        """
        pid = os.getpid()
        if self.running or not conf.gpu_scheduler.state_listener:
            return False
        if self._failed_pid == pid:
            return False
        try:
            self.start(conf)
        except Exception as exc:
            self._failed_pid = pid
            LOG.error('GPU state listener could not start (%s); GPU '
                      'filters and weighers run without live GPU state '
                      'until nova-scheduler restarts. Check transport_url '
                      'and [gpu_scheduler].', exc)
            return False
        self._by_plugins = True
        return True

    def attach(self, owner) -> None:
        """Count ``owner`` (a plugin instance) as a user of the server."""
        with self._lock:
            self._owners += 1
        weakref.finalize(owner, self._detach)

    def _detach(self) -> None:
        with self._lock:
            self._owners -= 1
            last = self._owners <= 0 and self._by_plugins
        if last:
            self.stop()

    def ask_resend(self, host: str | None = None) -> None:
        """Ask one host's agent (None: every agent) to resend its facts."""
        server = self._server
        if server is not None:
            server.ask_resend(host)

    def arrived(self) -> None:
        """What the cache calls for each stored message."""
        with self._arrived:
            self._count += 1
            self._arrived.notify_all()

    def wait(self, timeout: float, quiet: float = 0.25) -> int:
        """Wait while messages keep arriving; return how many arrived.

        Returns ``quiet`` seconds after the last one (or after the call
        when none arrives), at the latest after ``timeout``.  Real time.
        """
        start = self._count
        deadline = time.monotonic() + timeout
        with self._arrived:
            seen = start
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._arrived.wait(min(quiet, left))
                if self._count == seen:
                    break
                seen = self._count
        return self._count - start
