# SPDX-License-Identifier: Apache-2.0

"""Health judge paths through the fake NVML, the sampler and the monitor."""
import pynvml

from gpu_nova_ext.tests.unit.agent import health_base


class TestHealthCauses(health_base.MonitorTestCase):

    def test_healthy_at_start(self):
        self.assertEqual(('healthy', []), self.state(0))
        self.assertEqual(0, self.changes)
        self.assertEqual([], self.notifier.payloads)

    def test_fatal_xid(self):
        self.state(0)
        self.fake.inject_xid(0, 79)
        state, reasons = self.state(1)
        self.assertEqual('unhealthy', state)
        self.assertEqual(['XID 79: GPU has fallen off the bus'], reasons)
        self.assertEqual(1, self.changes)
        payload = self.notifier.payloads[0]
        self.assertEqual(('healthy', 'unhealthy'),
                         (payload['old_state'], payload['new_state']))

    def test_every_default_fatal_xid(self):
        for xid in (48, 79, 95, 119, 120):
            self.fake.inject_xid(1, xid)
        state, reasons = self.state(0, gpu=1)
        self.assertEqual('unhealthy', state)
        self.assertEqual(5, len(reasons))

    def test_degrading_xid(self):
        for xid in (63, 64, 74, 92, 94):
            self.fake.inject_xid(0, xid)
        state, reasons = self.state(0)
        self.assertEqual('degraded', state)
        self.assertIn('XID 94: contained ECC error', reasons)

    def test_application_xid_ignored(self):
        for xid in (13, 31, 43, 45):
            self.fake.inject_xid(0, xid)
        self.assertEqual(('healthy', []), self.state(0))

    def test_configured_xid_lists(self):
        self.cfg.config(group='health', fatal_xids=['13'],
                        degrading_xids=[])
        self.monitor = self.make_monitor()
        self.fake.inject_xid(0, 13)
        self.fake.inject_xid(0, 94)
        state, reasons = self.state(0)
        self.assertEqual('unhealthy', state)
        self.assertEqual(1, len(reasons))

    def test_uncorrectable_ecc(self):
        self.fake.set_metrics(0, ecc_dbe_volatile=1)
        self.assertEqual(('unhealthy', ['uncorrectable ECC errors']),
                         self.state(0))

    def test_remap_failure_and_pending(self):
        self.fake.set_metrics(0, remap_pending=1)
        self.assertEqual('degraded', self.state(0)[0])
        self.fake.set_metrics(0, remap_failure=1)
        state, reasons = self.state(1)
        self.assertEqual('unhealthy', state)
        self.assertEqual('row remapping failure', reasons[0])

    def test_pending_page_retirement_on_t4(self):
        self.fake.set_metrics(1, retired_pending=1)
        self.assertEqual('degraded', self.state(0, gpu=1)[0])

    def test_thermal(self):
        self.fake.set_metrics(0, temperature_c=89)
        self.assertEqual(
            ('degraded',
             ['temperature at or above slowdown threshold (89 C)']),
            self.state(0))
        self.fake.set_metrics(0, temperature_c=92)
        self.assertEqual('unhealthy', self.state(1)[0])

    def test_gpu_lost(self):
        self.state(0)
        self.fake.lose(0)
        state, reasons = self.state(1)
        self.assertEqual('unhealthy', state)
        self.assertIn('GPU lost', reasons[0])
        self.assertEqual('healthy', self.state(1, gpu=1)[0])

    def test_nvml_errors_degrade(self):
        self.fake.set_error(0, 'nvmlDeviceGetUtilizationRates',
                            pynvml.NVML_ERROR_UNKNOWN)
        self.assertEqual(('healthy', []), self.state(0))
        self.assertEqual(('healthy', []), self.state(1))
        self.assertEqual(('degraded', ['NVML errors']), self.state(2))
        self.fake.set_error(0, 'nvmlDeviceGetUtilizationRates', None)
        self.assertEqual('degraded', self.state(3)[0])
        self.assertEqual(('healthy', []), self.state(32.1))

    def test_one_transient_nvml_error_is_ignored(self):
        self.fake.set_error(0, 'nvmlDeviceGetTemperatureV',
                            pynvml.NVML_ERROR_TIMEOUT)
        self.assertEqual('healthy', self.state(0)[0])
        self.fake.set_error(0, 'nvmlDeviceGetTemperatureV', None)
        self.assertEqual('healthy', self.state(1)[0])
        self.assertEqual(0, self.changes)


class TestHysteresisAndRecovery(health_base.MonitorTestCase):

    def test_no_flapping_under_noisy_temperature(self):
        states = []
        for i in range(300):
            # noise around the 89 C slowdown threshold
            self.fake.set_metrics(0, temperature_c=(88, 90, 87, 89)[i % 4])
            states.append(self.state(i * 0.1)[0])
        self.assertEqual('degraded', states[-1])
        self.assertEqual(1, self.changes)
        self.assertEqual(1, len(self.notifier.payloads))

    def test_recovery_after_recovery_period(self):
        self.fake.set_metrics(0, temperature_c=90)
        self.assertEqual('degraded', self.state(0)[0])
        self.fake.set_metrics(0, temperature_c=60)
        self.assertEqual('degraded', self.state(10)[0])
        self.assertEqual('degraded', self.state(29.9)[0])
        self.assertEqual(('healthy', []), self.state(30.1))
        self.assertEqual(2, self.changes)
        self.assertEqual(['degraded', 'healthy'],
                         [p['new_state'] for p in self.notifier.payloads])

    def test_thermal_hysteresis_margin(self):
        self.fake.set_metrics(0, temperature_c=90)
        self.state(0)
        # just under the threshold is not "gone": the clock does not start
        self.fake.set_metrics(0, temperature_c=88)
        self.state(10)
        self.assertEqual('degraded', self.state(35)[0])
        self.fake.set_metrics(0, temperature_c=80)
        self.state(36)
        self.assertEqual('degraded', self.state(64.9)[0])
        self.assertEqual('healthy', self.state(65.1)[0])

    def test_xid_quiet_period(self):
        self.fake.inject_xid(0, 48)
        self.assertEqual('unhealthy', self.state(0)[0])
        # quiet period 60 s + recovery period 30 s
        self.assertEqual('unhealthy', self.state(89)[0])
        self.fake.inject_xid(0, 48)
        self.assertEqual('unhealthy', self.state(89.5)[0])
        self.assertEqual('unhealthy', self.state(179)[0])
        self.assertEqual('healthy', self.state(179.6)[0])

    def test_unhealthy_to_degraded_to_healthy(self):
        self.fake.set_metrics(0, temperature_c=93)
        self.assertEqual('unhealthy', self.state(0)[0])
        self.fake.set_metrics(0, temperature_c=89)
        self.assertEqual('unhealthy', self.state(10)[0])
        self.assertEqual('degraded', self.state(31)[0])
        self.fake.set_metrics(0, temperature_c=40)
        self.state(32)
        self.assertEqual('healthy', self.state(62.5)[0])


class TestPins(health_base.MonitorTestCase):

    def test_pinned_unhealthy_by_pci_address(self):
        self.cfg.config(group='health', pinned_unhealthy=['0000:3B:00.0'])
        self.monitor = self.make_monitor()
        self.assertEqual(('unhealthy', ['pinned unhealthy by operator']),
                         self.state(0))
        self.assertEqual('healthy', self.state(0, gpu=1)[0])

    def test_pinned_healthy_by_uuid(self):
        self.cfg.config(group='health',
                        pinned_healthy=[self.fake.devices[0].uuid])
        self.monitor = self.make_monitor()
        self.fake.inject_xid(0, 79)
        self.fake.set_metrics(0, temperature_c=99)
        self.assertEqual(('healthy', []), self.state(0))
