# SPDX-License-Identifier: Apache-2.0

"""The oslo.messaging plumbing of the GPU state channel.

Design doc: State protocol.  Transports, server names, casts that never
block the caller, and :class:`RpcServer`, a threading-executor RPC server
with its own transport: the schedulers' state server
(:mod:`gpu_nova_ext.state.rpc`) and the agent's state client
(:mod:`gpu_nova_ext.agent.state_client`) are both one.

Both servers use oslo.messaging's ``threading`` executor (native threads,
no eventlet), so they work in Nova 2025.2+ services, which run threaded,
and in the agent.  Each server owns its own transport, created from the
``conf`` it is given (Nova's ``transport_url`` inside nova-scheduler), and
created in the process that starts it: nova-scheduler forks its workers
before the first filter runs, so each worker gets its own connection.
"""
from collections.abc import Callable
import importlib
import os
import socket
import threading
import uuid

from oslo_config import cfg
from oslo_log import log as logging
import oslo_messaging as messaging

LOG = logging.getLogger(__name__)

# A cast with the broker down must not block the agent loop (oslo.messaging
# retries for ever by default): one attempt plus one reconnect, then the
# caller logs and moves on; the next cycle tries again.
CAST_RETRY = 1

# Option groups oslo.messaging registers on the global cfg.CONF only, yet
# reads from transport.conf on every cast and every received message.  A
# private ConfigOpts (the agent's, the tests') needs them too.
_GLOBAL_ONLY_OPTS = (
    ('oslo_messaging._tracing.client', 'oslo_messaging_tracing',
     'oslo_messaging_tracing'),
    ('oslo_messaging._metrics.client', 'oslo_messaging_metrics',
     'oslo_messaging_metrics'),
)


def register_messaging_opts(conf: cfg.ConfigOpts) -> None:
    """Register on ``conf`` what oslo.messaging reads from it at run time.

    See :data:`_GLOBAL_ONLY_OPTS`; registering the same option objects
    again is a no-op, so this is safe on Nova's CONF.
    """
    for module_name, attr, group in _GLOBAL_ONLY_OPTS:
        try:
            opts = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError):
            # Another oslo.messaging release: it does not read them then.
            continue
        conf.register_opts(opts, group=group)


def get_transport(conf: cfg.ConfigOpts) -> messaging.Transport:
    """An RPC transport from ``conf`` (its own connections)."""
    register_messaging_opts(conf)
    return messaging.get_rpc_transport(conf)


def driver(conf: cfg.ConfigOpts, url: str | None = None) -> str | None:
    """The driver of ``url``, by default of ``conf``'s ``transport_url``."""
    try:
        return messaging.TransportURL.parse(conf, url).transport
    except Exception:
        return None


def cleanup(transport: messaging.Transport, conf: cfg.ConfigOpts,
            url: str | None = None) -> None:
    """Close the connections of ``transport`` (made from ``url``).

    Not ``fake://``'s: its in-memory queues are the process's, all emptied.
    """
    if driver(conf, url) != 'fake':
        transport.cleanup()


def host_name(conf: cfg.ConfigOpts) -> str:
    try:
        host = conf.host
    except cfg.NoSuchOptError:
        host = None
    return host or socket.gethostname()


def server_name(conf: cfg.ConfigOpts) -> str:
    """The RPC server name: this host's name.

    Stable: oslo.messaging declares a ``<topic>.<server>`` queue it never
    deletes (we only fanout-cast, each listener has its own fanout
    queue).  Unique per listener on ``fake://``, which delivers a fanout
    once per server name.
    """
    host = host_name(conf)
    if driver(conf) == 'fake':
        return '%s.%d.%s' % (host, os.getpid(), uuid.uuid4().hex[:8])
    return host


def cast(client: messaging.RPCClient, method: str,
         version: str | None = None, **kwargs) -> bool:
    """Cast, logging (never raising) when the broker cannot take it."""
    try:
        # Fanout per cast, as Nova does (prepare(fanout=True)): a client
        # whose Target is fanout cannot be turned into a call, which
        # Nova's functional harness does to every cast.
        options = {'version': version} if version else {}
        client.prepare(fanout=True, **options).cast({}, method, **kwargs)
    except Exception as exc:
        # MessageDeliveryFailure, ClientSendError, kombu/socket errors:
        # oslo.messaging reconnects on the next attempt.
        LOG.warning('Could not cast %(method)s on topic %(topic)s: '
                    '%(error)s. The message bus is unreachable; the next '
                    'cycle retries.',
                    {'method': method, 'topic': client.target.topic,
                     'error': exc})
        return False
    return True


# Seconds start() waits for the broker before returning and letting the
# listener come up in the background (a connection takes milliseconds).
START_WAIT = 5.0


class RpcServer:
    """One threading-executor RPC server with its own transport.

    :param version: the RPC API version its endpoint serves.

    Starting connects to the broker and declares the queues in a helper
    thread; :meth:`_start` waits up to ``wait`` seconds for that.  With the
    broker down (oslo.messaging then retries for ever) the caller goes on
    and the server starts listening when the broker is back.
    """

    def __init__(self, conf: cfg.ConfigOpts, topic: str, endpoint: object,
                 what: str, version: str) -> None:
        self._conf = conf
        self._topic = topic
        self._version = version
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
            transport = get_transport(self._conf)
            self.server_name = server_name(self._conf)
            target = messaging.Target(topic=self._topic,
                                      server=self.server_name,
                                      version=self._version)
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
            cleanup(transport, self._conf)
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
            cleanup(transport, self._conf)

    def stop(self) -> None:
        """Stop listening and wait for in-flight messages; idempotent."""
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
