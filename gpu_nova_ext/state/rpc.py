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

"""The GPU state channel: a versioned oslo.messaging RPC API, both sides.

Agents fanout-cast ``update_gpu_state(ctxt, state=<payload>)`` on
``[agent] scheduler_topic`` (``gpu_nova_ext_scheduler``) every report
interval and at once on a health change.  Every nova-scheduler process runs
a :class:`SchedulerStateServer` that hands each payload to its state cache
(validation happens there).  A scheduler that starts fanout-casts
``resend_gpu_state(ctxt)`` on ``[gpu_scheduler] agent_topic``
(``gpu_nova_ext_agent``) and the agents' :class:`AgentStateClient` answer
with an immediate update, so a new scheduler has full state after one round
trip.

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
  may be a protocol 1.1 facts or metrics message.
"""
from collections.abc import Callable
import os
import threading
from typing import Any, Protocol

from oslo_config import cfg
from oslo_log import log as logging
import oslo_messaging as messaging

from gpu_nova_ext import conf as gconf
from gpu_nova_ext.conf import agent as agent_conf
from gpu_nova_ext.state import transport as bus

LOG = logging.getLogger(__name__)

RPC_API_VERSION = '1.1'

# what tools and the simulator call to use a private ConfigOpts
register_messaging_opts = bus.register_messaging_opts

# Seconds start() waits for the broker before returning and letting the
# listener come up in the background (a connection takes milliseconds).
START_WAIT = 5.0


class Publisher(Protocol):
    """What turns an agent's whole state into the messages it casts."""

    def messages(self, payload: dict, resend: bool = False) -> list[dict]:
        """The messages to cast."""

    def forget(self) -> None:
        """A cast failed: send the facts again next time."""


class StateSink(Protocol):
    """What the scheduler-side server feeds: the state cache."""

    def update(self, payload: Any) -> bool:
        """Validate and ingest one payload; False when it is rejected."""


class _RpcServer:
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


class AgentStateEndpoint:
    """Agent-side RPC endpoint: a starting scheduler wants our state."""

    target = messaging.Target(version=RPC_API_VERSION)

    def __init__(self, on_resend: Callable[[], None], host: str) -> None:
        self._on_resend = on_resend
        self._host = host
        #: set by a scheduler's request, cleared by take_resend()
        self.resend_requested = threading.Event()

    def resend_gpu_state(self, ctxt: dict, host: str | None = None,
                         **kwargs: Any) -> None:
        if host is not None and host != self._host:
            return
        self.resend_requested.set()
        try:
            self._on_resend()
        except Exception:
            LOG.exception('Answering resend_gpu_state failed')


class SchedulerStateServer(_RpcServer):
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


class AgentStateClient(_RpcServer):
    """The agent's side: casts state, answers resend requests.

    :param conf: the agent's ConfigOpts (``[agent]`` options,
        ``gpu_nova_ext.conf.register_agent_opts``) with ``transport_url``.
    :param on_resend: called (in an RPC worker thread) when a scheduler
        asks for state; it should only wake the agent loop, which then
        calls :meth:`cast_state`.
    :param publisher: turns a host's whole state into the protocol 1.1
        messages (``gpu_nova_ext.agent.payload.Publisher``); None casts
        the state as it is given (protocol 1.0).
    """

    def __init__(self, conf: cfg.ConfigOpts,
                 on_resend: Callable[[], None],
                 publisher: Publisher | None = None) -> None:
        self._publisher = publisher
        # [agent] only: registering the same options again is a no-op.
        agent_conf.register_opts(conf)
        self._endpoint = AgentStateEndpoint(on_resend,
                                            bus.host_name(conf))
        super().__init__(conf, conf.agent.agent_topic, self._endpoint,
                         'GPU agent resend listener')
        self._scheduler_topic = conf.agent.scheduler_topic
        self._client_lock = threading.Lock()
        self._client = None
        self._client_transport = None
        self._client_pid = None

    def start(self, wait: float = START_WAIT) -> None:
        """Listen (fanout) on the agent topic for ``resend_gpu_state``.

        With the message bus unreachable, returns after ``wait`` seconds
        and listens once the bus is back.  Idempotent while running.
        """
        self._start(wait)

    def _get_client(self) -> messaging.RPCClient:
        with self._client_lock:
            if self._client is None or self._client_pid != os.getpid():
                # Its own transport: casting does not depend on the
                # listener (works before start(), and while it connects).
                self._client_transport = bus.get_transport(self._conf)
                self._client = messaging.get_rpc_client(
                    self._client_transport,
                    messaging.Target(topic=self._scheduler_topic,
                                     version=RPC_API_VERSION),
                    retry=bus.CAST_RETRY)
                self._client_pid = os.getpid()
            return self._client

    def take_resend(self) -> bool:
        """True once after a scheduler asked this agent to resend."""
        requested = self._endpoint.resend_requested.is_set()
        self._endpoint.resend_requested.clear()
        return requested

    def cast_state(self, payload: dict) -> bool:
        """Fanout-cast ``update_gpu_state(state=...)`` to schedulers.

        With a publisher, ``payload`` is the host's whole state and the
        messages it makes of it are cast.  Never raises for a broker
        problem: logs and returns False (the next cycle casts again;
        oslo.messaging reconnects).
        """
        try:
            client = self._get_client()
        except Exception as exc:
            LOG.warning('Could not reach the message bus to cast GPU state: '
                        '%s', exc)
            return False
        if self._publisher is None:
            return bus.cast(client, 'update_gpu_state', state=payload)
        for message in self._publisher.messages(payload,
                                                resend=self.take_resend()):
            if not bus.cast(client, 'update_gpu_state', state=message):
                self._publisher.forget()
                return False
        return True

    def stop(self) -> None:
        """Stop the listener and release the transports; idempotent."""
        try:
            self._stop()
        finally:
            with self._client_lock:
                transport = self._client_transport
                self._client = self._client_transport = None
                if transport is not None and self._client_pid == os.getpid():
                    bus.cleanup(transport, self._conf)
