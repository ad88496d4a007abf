# SPDX-License-Identifier: Apache-2.0

"""The agent's side of the GPU state channel (design doc: State protocol).

:class:`AgentStateClient` casts a host's state to the schedulers as
protocol 1.1 messages (made by :class:`gpu_nova_ext.agent.payload.
Publisher`) and answers their ``resend_gpu_state``.  The RPC API and the
scheduler's side are :mod:`gpu_nova_ext.state.rpc`.
"""
from collections.abc import Callable
import os
import threading
from typing import Any

from oslo_config import cfg
from oslo_log import log as logging
import oslo_messaging as messaging

from gpu_nova_ext.agent import payload as agent_payload
from gpu_nova_ext.conf import agent as agent_conf
from gpu_nova_ext import messaging as bus
from gpu_nova_ext.state import rpc

LOG = logging.getLogger(__name__)


class AgentStateEndpoint:
    """Agent-side RPC endpoint: a starting scheduler wants our state."""

    target = messaging.Target(version=rpc.RPC_API_VERSION)

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


class AgentStateClient(bus.RpcServer):
    """The agent's side: casts state, answers resend requests.

    :param conf: the agent's ConfigOpts (``[agent]`` options,
        ``gpu_nova_ext.conf.register_agent_opts``) with ``transport_url``.
    :param on_resend: called (in an RPC worker thread) when a scheduler
        asks for state; it should only wake the agent loop, which then
        calls :meth:`cast_state`.
    :param publisher: turns a host's whole state into the protocol 1.1
        messages; default: a new :class:`~gpu_nova_ext.agent.payload.
        Publisher` (one per agent process: it numbers the messages).
    """

    def __init__(self, conf: cfg.ConfigOpts,
                 on_resend: Callable[[], None],
                 publisher: agent_payload.Publisher | None = None) -> None:
        self._publisher = publisher or agent_payload.Publisher()
        # [agent] only: registering the same options again is a no-op.
        agent_conf.register_opts(conf)
        self._endpoint = AgentStateEndpoint(on_resend,
                                            bus.host_name(conf))
        super().__init__(conf, conf.agent.agent_topic, self._endpoint,
                         'GPU agent resend listener', rpc.RPC_API_VERSION)
        self._scheduler_topic = conf.agent.scheduler_topic
        self._client_lock = threading.Lock()
        self._client = None
        self._client_transport = None
        self._client_pid = None

    def start(self, wait: float = bus.START_WAIT) -> None:
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
                                     version=rpc.RPC_API_VERSION),
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

        ``payload`` is the host's whole state
        (:func:`gpu_nova_ext.agent.payload.build_payload`); the publisher's
        messages of it are cast.  Never raises for a broker problem: logs
        and returns False (the next cycle casts again; oslo.messaging
        reconnects).
        """
        try:
            client = self._get_client()
        except Exception as exc:
            LOG.warning('Could not reach the message bus to cast GPU state: '
                        '%s', exc)
            return False
        for message in self._publisher.messages(payload,
                                                resend=self.take_resend()):
            if not bus.cast(client, 'update_gpu_state', state=message):
                self._publisher.forget()
                return False
        return True

    def stop(self) -> None:
        """Stop the listener and release the transports; idempotent."""
        try:
            super().stop()
        finally:
            with self._client_lock:
                transport = self._client_transport
                self._client = self._client_transport = None
                if transport is not None and self._client_pid == os.getpid():
                    bus.cleanup(transport, self._conf)
