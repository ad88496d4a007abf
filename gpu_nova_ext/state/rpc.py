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

"""The GPU state channel: a versioned oslo.messaging RPC API.

Agents fanout-cast ``update_gpu_state(ctxt, state=<message>)`` on
``[agent] scheduler_topic`` (``gpu_nova_ext_scheduler``) every report
interval and at once on a health change.  Every nova-scheduler process runs
a :class:`SchedulerStateServer` that hands each message to its state cache
(validation happens there).  A scheduler that starts fanout-casts
``resend_gpu_state(ctxt)`` on ``[gpu_scheduler] agent_topic``
(``gpu_nova_ext_agent``) and the agents answer with their facts at once,
so a new scheduler has full state after one round trip.  The agent's side
is :mod:`gpu_nova_ext.agent.state_client`; :class:`RpcServer` is shared.

Both servers use oslo.messaging's ``threading`` executor (native threads,
no eventlet), so they work in Nova 2025.2+ services, which run threaded,
and in the agent.  Each server owns its own transport, created from the
``conf`` it is given (Nova's ``transport_url`` inside nova-scheduler), and
created in the process that starts it: nova-scheduler forks its workers
before the first filter runs, so each worker gets its own connection.

RPC API history:

* 1.0: ``update_gpu_state(state)`` on the scheduler topic,
  ``resend_gpu_state()`` on the agent topic.
* 1.1: ``resend_gpu_state(host=None)``: only the agent of ``host``
  answers (a scheduler got metrics for facts it does not hold); ``state``
  is a protocol 1.1 facts or metrics message (the only ones read since
  protocol 1.0 payloads went).
"""
import atexit
from collections.abc import Callable
import os
import threading
import time
from typing import Any, Protocol
import weakref

from oslo_config import cfg
from oslo_log import log as logging
import oslo_messaging as messaging

from gpu_nova_ext import conf as gconf
from gpu_nova_ext.state import transport as bus

LOG = logging.getLogger(__name__)

RPC_API_VERSION = '1.1'

# what tools and the simulator call to use a private ConfigOpts
register_messaging_opts = bus.register_messaging_opts

# Seconds start() waits for the broker before returning and letting the
# listener come up in the background (a connection takes milliseconds).
START_WAIT = 5.0


class StateSink(Protocol):
    """What the scheduler-side server feeds: the state cache."""

    def update(self, payload: Any) -> bool:
        """Validate and ingest one payload; False when it is rejected."""


class RpcServer:
    """One threading-executor RPC server with its own transport.

    Starting connects to the broker and declares the queues in a helper
    thread; :meth:`_start` waits up to ``wait`` seconds for that.  With the
    broker down (oslo.messaging then retries for ever) the caller goes on
    and the server starts listening when the broker is back.
    """

    def __init__(self, conf: cfg.ConfigOpts, topic: str, endpoint: object,
                 what: str) -> None:
        self._conf = conf
        self._topic = topic
        self._endpoint = endpoint
        self._what = what
        self._lock = threading.Lock()
        self._transport = None
        self._server = None
        self._starting = None       # threading.Event while a start runs
        self._stop_requested = False
        self._pid = None
        self.server_name = None

    @property
    def running(self) -> bool:
        """True when listening in this process (started, not stopped).

        After a fork the child inherits the object but not the server's
        threads and connection: it is not running there.
        """
        return self._server is not None and self._pid == os.getpid()

    def _forget_if_forked(self) -> None:
        # Called with the lock held.  What a parent process started
        # belongs to the parent: drop it without touching it.
        if self._pid is not None and self._pid != os.getpid():
            self._server = self._transport = self._starting = None
            self._pid = None

    def _start(self, wait: float,
               after_start: Callable[[messaging.Transport], None] | None = (
                   None)) -> None:
        with self._lock:
            self._forget_if_forked()
            if self._server is not None or self._starting is not None:
                return
            # Configuration errors (a bad transport_url) raise here.
            transport = bus.get_transport(self._conf)
            self.server_name = bus.server_name(self._conf)
            target = messaging.Target(topic=self._topic,
                                      server=self.server_name,
                                      version=RPC_API_VERSION)
            server = messaging.get_rpc_server(
                transport, target, [self._endpoint], executor='threading')
            self._stop_requested = False
            self._pid = os.getpid()
            started = self._starting = threading.Event()
            errors = []
            thread = threading.Thread(
                target=self._run_start, name='gpu-state-rpc-start',
                args=(transport, server, started, errors, after_start),
                daemon=True)
            thread.start()
        if not started.wait(wait):
            LOG.warning('%(what)s: the message bus is unreachable; it '
                        'listens on topic %(topic)s as soon as the bus is '
                        'back.', {'what': self._what, 'topic': self._topic})
        elif errors:
            raise errors[0]

    def _run_start(self, transport, server, started, errors, after_start):
        try:
            # Connects and declares the topic, server and fanout queues
            # before returning, so a cast sent afterwards reaches us.
            server.start()
        except Exception as exc:
            LOG.exception('%(what)s could not listen on topic %(topic)s',
                          {'what': self._what, 'topic': self._topic})
            with self._lock:
                if self._starting is started:
                    self._starting = None
            bus.cleanup(transport, self._conf)
            errors.append(exc)
            started.set()
            return
        with self._lock:
            abandoned = self._stop_requested or self._starting is not started
            if not abandoned:
                self._transport, self._server = transport, server
                self._starting = None
        if abandoned:
            # stop() came first: undo quietly.
            self._shutdown(server, transport)
            started.set()
            return
        LOG.info('%(what)s listening on topic %(topic)s as %(server)s',
                 {'what': self._what, 'topic': self._topic,
                  'server': self.server_name})
        started.set()
        if after_start is not None:
            after_start(transport)

    def _shutdown(self, server, transport) -> None:
        try:
            server.stop()
            server.wait()
        finally:
            bus.cleanup(transport, self._conf)

    def _stop(self) -> None:
        with self._lock:
            self._forget_if_forked()
            self._stop_requested = True
            self._starting = None
            server, transport = self._server, self._transport
            self._server = self._transport = None
        if server is None:
            return
        self._shutdown(server, transport)
        LOG.info('%(what)s on topic %(topic)s stopped',
                 {'what': self._what, 'topic': self._topic})


class SchedulerStateEndpoint:
    """Scheduler-side RPC endpoint: agents' state goes to the cache."""

    target = messaging.Target(version=RPC_API_VERSION)

    def __init__(self, cache: StateSink) -> None:
        self._cache = cache

    def update_gpu_state(self, ctxt: dict, state: Any = None,
                         **kwargs: Any) -> None:
        # Extra keyword arguments (a later 1.x agent) are ignored; the
        # cache validates ``state`` and logs a rejection itself.
        try:
            self._cache.update(state)
        except Exception:
            LOG.exception('GPU state cache failed to ingest a payload')


class SchedulerStateServer(RpcServer):
    """Receives agents' GPU state inside one nova-scheduler process.

    :param conf: a ConfigOpts with ``[gpu_scheduler]`` registered
        (``gpu_nova_ext.conf.register_nova_opts`` is applied here) and
        oslo.messaging's ``transport_url`` (Nova's CONF in nova-scheduler).
    :param cache: the object whose ``update(payload) -> bool`` validates
        and ingests a payload (``GpuStateCache``).
    """

    def __init__(self, conf: cfg.ConfigOpts, cache: StateSink) -> None:
        gconf.register_nova_opts(conf)
        super().__init__(conf, conf.gpu_scheduler.state_topic,
                         SchedulerStateEndpoint(cache), 'GPU state server')
        self._agent_topic = conf.gpu_scheduler.agent_topic
        self._resend_client = None

    def start(self, wait: float = START_WAIT) -> None:
        """Listen on the state topic, then ask every agent to resend.

        Normally returns once the fanout queue is bound and the request
        sent, so no answer is missed.  With the message bus unreachable it
        returns after ``wait`` seconds and does both once the bus is back.
        Idempotent while running.
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
            bus.cast(client, 'resend_gpu_state', version='1.1',
                     host=host)

    def stop(self) -> None:
        """Stop listening and wait for in-flight messages; idempotent."""
        self._stop()


class StateListener:
    """The :class:`SchedulerStateServer` of one cache in one process.

    Started by the first GPU filter or weigher that runs in a
    nova-scheduler process (``[gpu_scheduler] state_listener``), or by
    :meth:`start` (tools, the simulator); stopped by :meth:`stop`, at
    process exit, and (when a plugin started it) once every GPU filter and
    weigher instance is garbage-collected: no thread is left behind.  A
    fork's child starts its own.  The first request after the start may
    wait for the agents' answers to the start's ``resend_gpu_state``
    (:meth:`wait`).
    """

    def __init__(self, sink) -> None:
        self._sink = sink
        self._lock = threading.Lock()
        self._server = None
        self._pid = None
        self._failed_pid = None
        self._owners = 0
        # started by a plugin (ensure_started): stops with the plugins
        self._by_plugins = False
        self._arrived = threading.Condition()
        self._count = 0
        self._exit_hook = False

    @property
    def running(self) -> bool:
        return self._server is not None and self._pid == os.getpid()

    def start(self, conf) -> None:
        """Run the server in this process; idempotent.

        Raises what the RPC layer raises (a bad ``transport_url``).
        """
        with self._lock:
            if self.running:
                return
            server = SchedulerStateServer(conf, self._sink)
            server.start()
            self._server, self._pid = server, os.getpid()
            self._by_plugins = False
            if not self._exit_hook:
                atexit.register(self.stop)
                self._exit_hook = True

    def stop(self) -> None:
        """Stop this process's server and wait for its threads."""
        with self._lock:
            server, self._server = self._server, None
            pid, self._pid = self._pid, None
        if server is not None and pid == os.getpid():
            server.stop()

    def ensure_started(self, conf) -> bool:
        """Start once per process when ``state_listener``; never raises.

        :returns: True when this call started it.
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
        """Count ``owner`` (a plugin instance) as a user of the server.

        When every owner is garbage-collected, the server stops.
        """
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
        if server is not None and self._pid == os.getpid():
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
