# SPDX-License-Identifier: Apache-2.0

"""The remediation daemon beside another consumer of the topic, on RabbitMQ.

Ceilometer listens on ``notifications`` too.  Two listeners that share a
queue each get part of the stream; the daemon's own pool gives it a queue
of its own, so both hear every ``gpu.health.update``.
"""
import queue

import oslo_messaging
import testtools

from gpu_nova_ext.agent import notifications
from gpu_nova_ext.operator import remediate_daemon
from gpu_nova_ext.tests import deadline
from gpu_nova_ext.tests.functional.state import support

MESSAGES = 6


class _Other:
    """Another consumer of the topic, in no pool (as Ceilometer's is)."""

    def __init__(self):
        self.heard: queue.Queue = queue.Queue()

    def _record(self, ctxt, publisher_id, event_type, payload, metadata):
        self.heard.put(payload['gpu']['pci_address'])

    info = warn = error = _record


def _payload(index: int) -> dict:
    return notifications.build_payload(
        'cmp-1', '0000:%02x:00.0' % index, 'GPU-%d' % index, 'NVIDIA A100',
        'healthy', 'unhealthy', [], ['XID 79: GPU has fallen off the bus'])


class TestPooledListener(testtools.TestCase):

    def setUp(self):
        super().setUp()
        support.require_broker(self)
        names = support.topics()
        self.topic = names['state_topic'] + '_notifications'
        self.conf = support.make_conf(exchange=names['exchange'])
        self.conf.set_override('driver', ['messagingv2'],
                               group='oslo_messaging_notifications')
        self.conf.set_override('topics', [self.topic],
                               group='oslo_messaging_notifications')
        self.conf.set_override('listen_topic', self.topic,
                               group='remediation')

    def _other_listener(self) -> _Other:
        other = _Other()
        transport = oslo_messaging.get_notification_transport(self.conf)
        self.addCleanup(transport.cleanup)
        listener = oslo_messaging.get_notification_listener(
            transport, [oslo_messaging.Target(topic=self.topic)], [other],
            executor='threading')
        listener.start()
        self.addCleanup(listener.wait)
        self.addCleanup(listener.stop)
        return other

    def _drain(self, q: queue.Queue, count: int) -> list:
        return [q.get(timeout=deadline.WAIT_S) for _ in range(count)]

    def test_both_hear_every_notification(self):
        other = self._other_listener()
        daemon = remediate_daemon.RemediationDaemon(self.conf,
                                                    remediator=None)
        daemon.start_listener()
        self.addCleanup(daemon.stop)
        notifier = notifications.HealthNotifier(self.conf, 'cmp-1')
        self.addCleanup(notifier.stop)
        for index in range(MESSAGES):
            notifier.send(_payload(0x3b + index))
        expected = ['0000:%02x:00.0' % (0x3b + i) for i in range(MESSAGES)]
        heard = [t.gpu for t in self._drain(daemon.triggers, MESSAGES)]
        self.assertEqual(sorted(expected), sorted(heard))
        self.assertEqual(sorted(expected),
                         sorted(self._drain(other.heard, MESSAGES)))
