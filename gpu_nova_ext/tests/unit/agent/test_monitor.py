# SPDX-License-Identifier: Apache-2.0

"""HealthMonitor: the thread, the exporter switch, apply() and callbacks."""
import socket
import urllib.request

from gpu_nova_ext.agent import monitor
from gpu_nova_ext.inventory import base
from gpu_nova_ext_dev.fakes import nvml as fake_nvml
from gpu_nova_ext.tests import deadline
from gpu_nova_ext.tests.unit.agent import health_base


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


class TestMonitorThread(health_base.MonitorTestCase):

    def _wait(self, predicate):
        self.assertTrue(deadline.wait_for(predicate), 'timed out')

    def test_start_samples_serves_and_stops(self):
        port = free_port()
        self.cfg.config(group='agent', prometheus_port=port,
                        metrics_interval=0.1)
        m = monitor.HealthMonitor(self.conf, self._on_change,
                                  notifier=self.notifier)
        self.addCleanup(m.stop)
        m.start()
        self._wait(lambda: m.latest())
        self.fake.inject_xid(1, 79)
        self._wait(lambda: self.changes == 1)
        self.assertEqual('unhealthy', m.latest()['0000:5e:00.0'][1].state)
        url = 'http://127.0.0.1:%d/metrics' % port
        with urllib.request.urlopen(url, timeout=deadline.WAIT_S) as resp:
            self.assertIn(b'DCGM_FI_DEV_GPU_UTIL{', resp.read())
        m.stop()
        self.assertIsNone(m._thread)
        self.assertRaises(OSError, urllib.request.urlopen, url,
                          timeout=deadline.WAIT_S)
        self.assertEqual(1, len(self.notifier.payloads))

    def test_port_zero_disables_exporter(self):
        self.assertIsNone(self.monitor.exporter)
        self.monitor.start()
        self.assertIsNone(self.monitor.exporter)

    def test_bad_port_keeps_sampling(self):
        with socket.socket() as busy:
            busy.bind(('127.0.0.1', 0))
            busy.listen()
            self.cfg.config(group='agent',
                            prometheus_port=busy.getsockname()[1])
            m = monitor.HealthMonitor(self.conf, self._on_change,
                                      notifier=self.notifier)
            self.addCleanup(m.stop)
            m.start()
            self._wait(lambda: m.latest())


class TestMonitorApplyAndCallbacks(health_base.MonitorTestCase):

    def test_apply_by_pci_address_and_uuid(self):
        self.fake.set_metrics(0, gpu_util=33, memory_used_mib=1024,
                              temperature_c=91, power_mw=210000)
        self.monitor.sample_once(now=0)
        inv = base.HostInventory('cmp-1', gpus=[
            base.Gpu(pci_address='0000:3B:00.0'),
            base.Gpu(pci_address='0000:99:00.0',
                     uuid=self.fake.devices[1].uuid),
            base.Gpu(pci_address='0000:01:00.0')])
        self.monitor.apply(inv)
        a100, t4, other = inv.gpus
        self.assertEqual(33, a100.metrics['utilization_pct'])
        self.assertEqual(1024, a100.metrics['memory_used_mib'])
        self.assertEqual(91, a100.metrics['temperature_c'])
        self.assertEqual(89, a100.metrics['slowdown_temperature_c'])
        self.assertEqual(210.0, a100.metrics['power_w'])
        self.assertEqual(300.0, a100.metrics['power_limit_w'])
        self.assertEqual(89, a100.slowdown_temperature_c)
        self.assertEqual('degraded', a100.health.state)
        self.assertEqual(
            ['temperature at or above slowdown threshold (89 C)'],
            a100.health.reasons)
        self.assertEqual('healthy', t4.health.state)
        self.assertIn('retired_pages_pending', t4.metrics)
        self.assertEqual({}, other.metrics)
        state = inv.to_dict()['gpus'][0]
        self.assertEqual('degraded', state['health']['state'])

    def test_apply_pins_gpus_nvml_does_not_see(self):
        self.cfg.config(group='health', pinned_unhealthy=['0000:01:00.0'])
        self.monitor = self.make_monitor()
        self.monitor.sample_once(now=0)
        inv = base.HostInventory('cmp-1', gpus=[
            base.Gpu(pci_address='0000:01:00.0')])
        self.monitor.apply(inv)
        self.assertEqual('unhealthy', inv.gpus[0].health.state)

    def test_on_change_once_per_sample(self):
        self.fake.inject_xid(0, 79)
        self.fake.inject_xid(1, 79)
        self.monitor.sample_once(now=0)
        self.assertEqual(1, self.changes)
        self.assertEqual(2, len(self.notifier.payloads))
        self.monitor.sample_once(now=1)
        self.assertEqual(1, self.changes)

    def test_on_change_failure_does_not_stop_sampling(self):
        def boom():
            raise RuntimeError('broker down')
        m = monitor.HealthMonitor(self.conf, boom, notifier=self.notifier)
        self.addCleanup(m.stop)
        m.open()
        self.fake.inject_xid(0, 79)
        self.assertEqual('unhealthy', m.sample_once(now=0)[0].state)
        self.assertEqual(2, len(m.sample_once(now=1)))


class TestMonitorWithoutNvml(health_base.HealthTestCase):

    def test_library_missing(self):
        self.useFixture(fake_nvml.FakeNvml([], library=False))
        m = monitor.HealthMonitor(self.conf, lambda: None,
                                  notifier=health_base.RecordingNotifier())
        self.addCleanup(m.stop)
        self.assertFalse(m.open())
        self.assertEqual([], m.sample_once(now=0))
        inv = base.HostInventory('cmp-1', gpus=[
            base.Gpu(pci_address='0000:3b:00.0')])
        m.apply(inv)
        self.assertEqual('healthy', inv.gpus[0].health.state)
        self.assertEqual({}, inv.gpus[0].metrics)
