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

"""The state channel's oslo.messaging plumbing (design doc: State protocol).

Transports, server names and casts that never block the caller, shared by
the scheduler's and the agent's side (``gpu_nova_ext.state.rpc``).
"""
import importlib
import os
import socket
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


def driver(conf: cfg.ConfigOpts) -> str | None:
    try:
        return messaging.TransportURL.parse(conf).transport
    except Exception:
        return None


def cleanup(transport: messaging.Transport, conf: cfg.ConfigOpts) -> None:
    """Close ``transport``'s connections.

    Not ``fake://``'s: its in-memory queues are the process's, all emptied.
    """
    if driver(conf) != 'fake':
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
