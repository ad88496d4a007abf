# SPDX-License-Identifier: Apache-2.0

"""gpu.health.update delivered over RabbitMQ (127.0.0.1:5672, guest).

A real oslo.messaging notification listener on a unique topic receives what
a HealthMonitor (fake NVML under the real pynvml) sends when a GPU fails
and recovers.
"""
import queue
import socket
import uuid

from oslo_config import fixture as config_fixture
import oslo_messaging
from oslo_messaging import conffixture
from oslotest import base

from gpu_nova_ext.agent import monitor
from gpu_nova_ext_dev.fakes import nvml as fake_nvml
from gpu_nova_ext.tests import deadline
from gpu_nova_ext.tests.functional.state import support
from gpu_nova_ext.tests.unit.agent import health_base

RABBIT = ('127.0.0.1', 5672)
TRANSPORT_URL = 'rabbit://guest:guest@127.0.0.1:5672/'


class _Endpoint:
    def __init__(self, received):
        self.received = received

    def _record(self, priority, ctxt, publisher_id, event_type, payload,
                metadata):
        self.received.put((priority, publisher_id, event_type, payload))

    def info(self, *args):
        self._record('info', *args)

    def warn(self, *args):
        self._record('warn', *args)

    def error(self, *args):
        self._record('error', *args)


class TestHealthNotificationOverRabbit(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        try:
            socket.create_connection(RABBIT, timeout=5).close()
        except OSError as exc:
            self.fail('RabbitMQ is not reachable at %s:%d (%s): run '
                      'tools/ensure-rabbitmq' % (RABBIT + (exc,)))
        self.conf = health_base.make_conf()
        self.useFixture(conffixture.ConfFixture(
            self.conf, transport_url=TRANSPORT_URL))
        cfg = self.useFixture(config_fixture.Config(self.conf))
        self.topic = 'gpu_health_test_%s' % uuid.uuid4().hex[:8]
        cfg.config(host='cmp-func')
        cfg.config(group='agent', prometheus_port=0,
                   libvirt_uri='test:///default',
                   sysfs_root='/nonexistent-sysfs')
        cfg.config(group='health', recovery_period=10.0)
        cfg.config(group='oslo_messaging_notifications',
                   driver=['messagingv2'], topics=[self.topic])
        self.fake = self.useFixture(fake_nvml.FakeNvml(['H100_SXM5_80GB']))
        self.received = queue.Queue()
        transport = oslo_messaging.get_notification_transport(self.conf)
        self.addCleanup(transport.cleanup)
        listener = oslo_messaging.get_notification_listener(
            transport, [oslo_messaging.Target(topic=self.topic)],
            [_Endpoint(self.received)], executor='threading')
        listener.start()
        self.addCleanup(listener.wait)
        self.addCleanup(listener.stop)

    def _next(self):
        try:
            return self.received.get(timeout=deadline.WAIT_S)
        except queue.Empty:
            self.fail('no gpu.health.update arrived over RabbitMQ on topic '
                      '%s within %ss' % (self.topic, deadline.WAIT_S))

    def test_failure_and_recovery_are_notified(self):
        changes = []
        held = support.broker_connections(TRANSPORT_URL)
        m = monitor.HealthMonitor(self.conf, lambda: changes.append(1))
        self.addCleanup(m.stop)
        self.assertTrue(m.open())
        m.sample_once(now=0)
        self.fake.inject_xid(0, 79)
        m.sample_once(now=1)
        priority, publisher, event_type, payload = self._next()
        self.assertEqual('error', priority)
        self.assertEqual('gpu-nova-agent.cmp-func', publisher)
        self.assertEqual('gpu.health.update', event_type)
        self.assertEqual('1.0', payload['version'])
        self.assertEqual('cmp-func', payload['host'])
        self.assertEqual('0000:3b:00.0', payload['gpu']['pci_address'])
        self.assertEqual(self.fake.devices[0].uuid, payload['gpu']['uuid'])
        self.assertEqual(('healthy', 'unhealthy'),
                         (payload['old_state'], payload['new_state']))
        self.assertEqual(['XID 79: GPU has fallen off the bus'],
                         payload['reasons'])
        # XID quiet period (900 s default) + recovery period (10 s)
        m.sample_once(now=905)
        self.assertTrue(self.received.empty())
        m.sample_once(now=912)
        priority, _p, _e, payload = self._next()
        self.assertEqual('info', priority)
        self.assertEqual(('unhealthy', 'healthy', []),
                         (payload['old_state'], payload['new_state'],
                          payload['reasons']))
        self.assertEqual(2, len(changes))
        # stopped, the agent closes its connection to the broker: left
        # open, it logs into whatever runs next when the broker goes
        self.assertTrue(support.broker_connections(TRANSPORT_URL) - held)
        m.stop()
        self.assertEqual(set(), support.broker_connections(TRANSPORT_URL)
                         - held)


class TestBrokerUnreachable(base.BaseTestCase):
    """Sampling and health go on while the broker is down."""

    def test_sampling_continues(self):
        with socket.socket() as s:
            s.bind(('127.0.0.1', 0))
            dead_port = s.getsockname()[1]
        conf = health_base.make_conf()
        self.useFixture(conffixture.ConfFixture(
            conf, transport_url='rabbit://guest:guest@127.0.0.1:%d/' %
            dead_port))
        cfg = self.useFixture(config_fixture.Config(conf))
        cfg.config(group='agent', prometheus_port=0,
                   libvirt_uri='test:///default',
                   sysfs_root='/nonexistent-sysfs')
        cfg.config(group='oslo_messaging_notifications',
                   driver=['messagingv2'], retry=0)
        fake = self.useFixture(fake_nvml.FakeNvml(['L4', 'L4']))
        m = monitor.HealthMonitor(conf, lambda: None, host='cmp-dead')
        self.addCleanup(m.stop)
        self.assertTrue(m.open())
        fake.inject_xid(1, 48)
        for i in range(20):
            verdicts = m.sample_once(now=i)
            self.assertEqual(['healthy', 'unhealthy'],
                             [v.state for v in verdicts])
