# SPDX-License-Identifier: Apache-2.0

"""``gpu.health.update`` notifications over oslo.messaging.

One notification per GPU health change, publisher ``gpu-nova-agent.<host>``,
driver and topics from ``[oslo_messaging_notifications]`` (no driver: no
notification, as in every OpenStack service).  Priority follows the new
state: ``info`` for healthy, ``warn`` for degraded, ``error`` for unhealthy.
Sending happens on a worker thread with a bounded queue, so an unreachable
broker never stalls sampling; a notification that cannot be queued is
dropped with a log line.

Payload (``version`` 1.0)::

    {"version": "1.0", "host": "cmp-1",
     "gpu": {"pci_address": "0000:3b:00.0", "uuid": "GPU-...",
             "name": "NVIDIA A100 80GB PCIe"},
     "old_state": "healthy", "new_state": "unhealthy",
     "old_reasons": [], "reasons": ["XID 79: GPU has fallen off the bus"],
     "timestamp": "2026-11-29T16:00:00.000000+00:00"}
"""
import datetime
import queue
import threading

from oslo_log import log as logging

from gpu_nova_ext import messaging as bus

LOG = logging.getLogger(__name__)

EVENT_TYPE = 'gpu.health.update'
PAYLOAD_VERSION = '1.0'
_PRIORITY = {'healthy': 'info', 'degraded': 'warn', 'unhealthy': 'error'}
_STOP = object()


def build_payload(host: str, pci_address: str, uuid: str | None,
                  name: str | None, old_state: str, new_state: str,
                  old_reasons: list[str], reasons: list[str]) -> dict:
    """The versioned ``gpu.health.update`` payload."""
    return {
        'version': PAYLOAD_VERSION,
        'host': host,
        'gpu': {'pci_address': pci_address, 'uuid': uuid, 'name': name},
        'old_state': old_state,
        'new_state': new_state,
        'old_reasons': list(old_reasons),
        'reasons': list(reasons),
        'timestamp': datetime.datetime.now(
            datetime.timezone.utc).isoformat(),
    }


class HealthNotifier:
    """Emits ``gpu.health.update``; build it with the agent's ConfigOpts."""

    def __init__(self, conf, host: str, max_queue: int = 1000):
        self.conf = conf
        self.host = host
        self.publisher_id = 'gpu-nova-agent.%s' % host
        self._queue: queue.Queue = queue.Queue(maxsize=max_queue)
        self._notifier = None
        self._thread = None
        self._lock = threading.Lock()

    def _get_notifier(self):
        if self._notifier is None:
            import oslo_messaging
            transport = oslo_messaging.get_notification_transport(self.conf)
            self._notifier = oslo_messaging.Notifier(
                transport, publisher_id=self.publisher_id,
                driver=None, topics=None)
        return self._notifier

    def start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name='gpu-health-notifier',
                    daemon=True)
                self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the worker, then close the notification transport."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            try:
                self._queue.put_nowait(_STOP)
            except queue.Full:
                pass
            thread.join(timeout)
        with self._lock:
            notifier, self._notifier = self._notifier, None
        if notifier is not None:
            # its pooled connection stays open (a heartbeat thread, and a
            # reconnect logged at a broker restart) until it is closed
            bus.cleanup(notifier.transport, self.conf,
                        self.conf.oslo_messaging_notifications.transport_url)

    def notify(self, payload: dict) -> None:
        """Queue one notification (starts the worker on first use)."""
        self.start()
        try:
            self._queue.put_nowait(payload)
        except queue.Full:
            LOG.warning('Dropping %(event)s for GPU %(gpu)s: the '
                        'notification queue is full (broker unreachable?)',
                        {'event': EVENT_TYPE,
                         'gpu': payload['gpu']['pci_address']})

    def send(self, payload: dict) -> None:
        """Send one notification now, on the caller's thread."""
        notifier = self._get_notifier()
        method = getattr(notifier, _PRIORITY.get(payload['new_state'],
                                                 'info'))
        method({}, EVENT_TYPE, payload)

    def _run(self) -> None:
        while True:
            payload = self._queue.get()
            if payload is _STOP:
                return
            try:
                self.send(payload)
            except Exception as exc:
                LOG.warning('Could not send %(event)s for GPU %(gpu)s: '
                            '%(error)s', {'event': EVENT_TYPE,
                                          'gpu': payload['gpu']['pci_address'],
                                          'error': exc})
