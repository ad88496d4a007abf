# SPDX-License-Identifier: Apache-2.0

"""gpu.health.update through oslo.messaging's Notifier (in-memory driver).

The delivery over RabbitMQ is in tests/functional/agent.
"""

from oslo_messaging import conffixture
from oslo_messaging.notify import _impl_test

from gpu_nova_ext.agent import notifications
from gpu_nova_ext.tests import deadline
from gpu_nova_ext.tests.unit.agent import health_base


class TestPayload(health_base.HealthTestCase):

    def test_versioned_payload(self):
        p = notifications.build_payload(
            'cmp-1', '0000:3b:00.0', 'GPU-1', 'NVIDIA L4', 'healthy',
            'degraded', [], ['anomaly: power_w'])
        self.assertEqual('1.0', p['version'])
        self.assertEqual('cmp-1', p['host'])
        self.assertEqual({'pci_address': '0000:3b:00.0', 'uuid': 'GPU-1',
                          'name': 'NVIDIA L4'}, p['gpu'])
        self.assertEqual(('healthy', 'degraded', ['anomaly: power_w']),
                         (p['old_state'], p['new_state'], p['reasons']))


class TestNotifier(health_base.HealthTestCase):

    def setUp(self):
        super().setUp()
        _impl_test.reset()
        self.addCleanup(_impl_test.reset)
        self.useFixture(conffixture.ConfFixture(self.conf,
                                                transport_url='fake:/'))
        self.cfg.config(group='oslo_messaging_notifications',
                        driver=['test'], topics=['gpu_notifications'])
        self.notifier = notifications.HealthNotifier(self.conf, 'cmp-1')
        self.addCleanup(self.notifier.stop)

    def _wait(self, n):
        self.assertTrue(deadline.wait_for(
            lambda: len(_impl_test.NOTIFICATIONS) >= n),
            _impl_test.NOTIFICATIONS)
        return _impl_test.NOTIFICATIONS

    def test_send_priority_and_publisher(self):
        self.notifier.send(notifications.build_payload(
            'cmp-1', '0000:3b:00.0', 'GPU-1', 'x', 'healthy', 'unhealthy',
            [], ['XID 79: GPU has fallen off the bus']))
        ctxt, message, priority, _retry = _impl_test.NOTIFICATIONS[0]
        self.assertEqual('ERROR', priority)
        self.assertEqual('gpu.health.update', message['event_type'])
        self.assertEqual('gpu-nova-agent.cmp-1', message['publisher_id'])
        self.assertEqual('unhealthy', message['payload']['new_state'])

    def test_monitor_notifies_each_change_from_its_worker(self):
        from gpu_nova_ext.agent import monitor
        calls = []
        m = monitor.HealthMonitor(self.conf, lambda: calls.append(1),
                                  notifier=self.notifier)
        self.addCleanup(m.stop)
        m.open()
        self.fake.inject_xid(0, 94)
        m.sample_once(now=0)
        self.fake.inject_xid(1, 79)
        m.sample_once(now=1)
        sent = self._wait(2)
        self.assertEqual(
            [('WARN', '0000:3b:00.0', 'degraded'),
             ('ERROR', '0000:5e:00.0', 'unhealthy')],
            [(p, msg['payload']['gpu']['pci_address'],
              msg['payload']['new_state']) for _c, msg, p, _r in sent])
        self.assertEqual(2, len(calls))
