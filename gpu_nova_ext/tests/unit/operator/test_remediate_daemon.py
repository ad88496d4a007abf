# SPDX-License-Identifier: Apache-2.0

"""The daemon's inputs: gpu.health.update payloads and audit reports."""
import queue

from oslo_config import cfg
import oslo_messaging
import testtools

from gpu_nova_ext.agent import notifications
from gpu_nova_ext import conf as gconf
from gpu_nova_ext.operator import audit
from gpu_nova_ext.operator import remediate_daemon
from gpu_nova_ext.tests import deadline


def payload(old, new, reasons=('XID 79: GPU has fallen off the bus',)):
    return notifications.build_payload(
        'cmp-1', '0000:3b:00.0', 'GPU-1', 'NVIDIA A100', old, new, [],
        list(reasons))


class TestTriggers(testtools.TestCase):

    def test_only_a_turn_to_unhealthy_triggers(self):
        trigger = remediate_daemon.trigger_from_health(
            payload('healthy', 'unhealthy'))
        self.assertEqual(('cmp-1', '0000:3b:00.0', 'notification'),
                         (trigger.host, trigger.gpu, trigger.source))
        self.assertEqual('XID 79: GPU has fallen off the bus',
                         trigger.reason)
        self.assertEqual('unhealthy', remediate_daemon.trigger_from_health(
            payload('degraded', 'unhealthy', ())).reason)
        for old, new in (('healthy', 'degraded'), ('unhealthy', 'healthy'),
                         ('unhealthy', 'unhealthy')):
            self.assertIsNone(remediate_daemon.trigger_from_health(
                payload(old, new)))

    def test_sweep_triggers_from_audit(self):
        sick = audit.GpuView(host='cmp-2', address='0000:5e:00.0',
                             model='L4', mode='vgpu', health='unhealthy',
                             reasons=['XID 48'])
        report = audit.AuditReport(
            gpus=[sick], groups=[], driver_branches={},
            reference_branch=None, driver_outliers=[], unhealthy=[sick],
            reserved=[], hosts_with_state=['cmp-2'])
        [trigger] = remediate_daemon.triggers_from_audit(report)
        self.assertEqual(('cmp-2', '0000:5e:00.0', 'XID 48', 'sweep'), (
            trigger.host, trigger.gpu, trigger.reason, trigger.source))


class TestListener(testtools.TestCase):
    """The listener hears the agent's HealthNotifier.

    One process, so oslo.messaging's fake driver.
    """

    def test_health_notification_queues_a_trigger(self):
        conf = cfg.ConfigOpts()
        gconf.register_opts(conf)
        conf([], project='gpu-nova-ext', default_config_files=[])
        oslo_messaging.get_notification_transport(conf)
        conf.set_override('transport_url', 'fake:/')
        conf.set_override('driver', ['messagingv2'],
                          group='oslo_messaging_notifications')
        conf.set_override('listen_topic', 'gpu_remediation_unit',
                          group='remediation')
        conf.set_override('topics', ['gpu_remediation_unit'],
                          group='oslo_messaging_notifications')
        daemon = remediate_daemon.RemediationDaemon(conf, remediator=None)
        daemon.start_listener()
        self.addCleanup(daemon.stop)
        notifier = notifications.HealthNotifier(conf, 'cmp-1')
        self.addCleanup(notifier.stop)
        notifier.send(payload('healthy', 'degraded'))
        notifier.send(payload('healthy', 'unhealthy'))
        trigger = daemon.triggers.get(timeout=deadline.WAIT_S)
        self.assertEqual(('cmp-1', '0000:3b:00.0'),
                         (trigger.host, trigger.gpu))
        self.assertRaises(queue.Empty, daemon.triggers.get, timeout=0.2)
