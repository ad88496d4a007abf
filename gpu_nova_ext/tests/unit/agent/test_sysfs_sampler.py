# SPDX-License-Identifier: Apache-2.0

"""AMD and Intel metrics and health from a fake sysfs tree."""
import errno
import os

from gpu_nova_ext.agent import health
from gpu_nova_ext.agent import sysfs_sampler
from gpu_nova_ext_dev.fakes import sysfs
from gpu_nova_ext.tests.unit.agent import health_base

MI300X = '0000:11:00.0'
MAX1550 = '0000:29:00.0'


class SamplerTestCase(health_base.HealthTestCase):

    def setUp(self):
        super().setUp()
        self.tree = self.useFixture(sysfs.GpuTree())
        self.tree.add_amd_gpu(MI300X)
        self.tree.add_xe_gpu(MAX1550)
        self.tree.add_function('0000:00:14.0', '8086', 'a0ed',
                               klass=0x0c0330, driver='xhci_hcd')
        self.now = 100.0
        self.sampler = sysfs_sampler.SysfsSampler(
            self.tree.root, opener=self.tree.errors.open,
            clock=lambda: self.now)
        self.sampler.open()
        self.judge = health.HealthJudge(self.conf, clock=lambda: self.now)

    def sample(self):
        return {s.pci_address: s for s in self.sampler.sample()}


class TestSysfsSampler(SamplerTestCase):

    def test_amd_metrics_use_the_nvidia_keys(self):
        self.tree.set(MI300X, 'gpu_busy_percent', 37)
        self.tree.set(MI300X, 'hwmon/temp2_input', 71500)
        amd = self.sample()[MI300X]
        self.assertEqual(('amd', 0, 'card0', '0000:11:00.0',
                          '00000000:11:00.0', 'MI300X',
                          '0x5f8a1c0e3a2b4d7e', False),
                         (amd.vendor, amd.index, amd.device,
                          amd.pci_address, amd.bus_id, amd.name, amd.uuid,
                          amd.lost))
        m = amd.metrics
        self.assertEqual(37, m['utilization_pct'])
        self.assertEqual(0, m['memory_utilization_pct'])
        self.assertEqual((300, 196592, 196292),
                         (m['memory_used_mib'], m['memory_total_mib'],
                          m['memory_free_mib']))
        self.assertEqual((40.0, 71.5, 40.0),
                         (m['temperature_c'], m['junction_temperature_c'],
                          m['memory_temperature_c']))
        self.assertEqual((100.0, 105.0), (m['slowdown_temperature_c'],
                                          m['shutdown_temperature_c']))
        self.assertEqual((120.0, 750.0), (m['power_w'], m['power_limit_w']))
        self.assertEqual((2100.0, 1300.0), (m['sm_clock_mhz'],
                                            m['memory_clock_mhz']))
        self.assertEqual((0, 0), (m['ecc_dbe_volatile'],
                                  m['ecc_sbe_volatile']))
        self.assertEqual({}, amd.errors)

    def test_ras_counts_are_summed_over_blocks(self):
        self.tree.ras(MI300X, 'umc', 2, 5)
        self.tree.ras(MI300X, 'gfx', 1, 1)
        m = self.sample()[MI300X].metrics
        self.assertEqual((3, 6), (m['ecc_dbe_volatile'],
                                  m['ecc_sbe_volatile']))

    def test_intel_xe_hwmon_power_from_energy_and_throttle(self):
        first = self.sample()[MAX1550]
        self.assertEqual(('intel', 'MAX_1550', 45.0, 50.0, 600.0, 0),
                         (first.vendor, first.name,
                          first.metrics['temperature_c'],
                          first.metrics['memory_temperature_c'],
                          first.metrics['power_limit_w'],
                          first.metrics['thermal_throttle']))
        self.assertNotIn('power_w', first.metrics)
        self.tree.set(MAX1550, 'hwmon/energy1_input', 2500 * 10 ** 6)
        self.now += 10
        self.assertEqual(250.0, self.sample()[MAX1550].metrics['power_w'])

    def test_no_driver_no_sample(self):
        # the USB controller and the GPUs' absent attributes
        self.assertEqual([MI300X, MAX1550],
                         [d.pci_address for d in self.sampler.devices])

    def test_absent_attribute_is_not_read_again(self):
        os.unlink(self.tree.path(MI300X, 'mem_busy_percent'))
        m = self.sample()[MI300X].metrics
        self.assertNotIn('memory_utilization_pct', m)
        self.tree.set(MI300X, 'mem_busy_percent', 12)
        self.assertNotIn('memory_utilization_pct',
                         self.sample()[MI300X].metrics)

    def test_read_error_is_a_sample_error_then_degrades(self):
        self.tree.errors.fail(self.tree.path(MI300X, 'gpu_busy_percent'),
                              errno.EIO)
        for _ in range(health.NVML_ERROR_SAMPLES + 1):
            amd = self.sample()[MI300X]
            verdict = self.judge.judge(amd)
        self.assertIn('amd_activity', amd.errors)
        self.assertIn('EIO', amd.errors['amd_activity'])
        self.assertFalse(amd.lost)
        self.assertEqual((health.DEGRADED, ['sysfs read errors']),
                         (verdict.state, verdict.reasons))
        # the attribute is read again once the driver answers
        self.tree.errors.fail(self.tree.path(MI300X, 'gpu_busy_percent'),
                              None)
        self.assertIn('utilization_pct', self.sample()[MI300X].metrics)

    def test_enodev_and_unplug_are_lost(self):
        self.tree.errors.fail(self.tree.path(MI300X, 'gpu_busy_percent'),
                              errno.ENODEV)
        amd = self.sample()[MI300X]
        self.assertTrue(amd.lost)
        self.assertEqual(health.UNHEALTHY, self.judge.judge(amd).state)
        self.assertEqual(['GPU lost (gone from sysfs)'],
                         self.judge.judge(amd).reasons)
        self.tree.unplug(MAX1550)
        self.assertTrue(self.sample()[MAX1550].lost)


class TestSysfsHealth(SamplerTestCase):

    def judge_now(self, address=MI300X):
        return self.judge.judge(self.sample()[address], now=self.now)

    def test_uncorrectable_ras_unhealthy_then_recovers(self):
        self.assertEqual(health.HEALTHY, self.judge_now().state)
        self.tree.ras(MI300X, 'umc', 1, 0)
        verdict = self.judge_now()
        self.assertEqual((health.UNHEALTHY, ['uncorrectable RAS errors']),
                         (verdict.state, verdict.reasons))
        self.tree.ras(MI300X, 'umc', 0, 0)   # GPU reset: counts cleared
        self.now += 10
        self.assertEqual(health.UNHEALTHY, self.judge_now().state)
        self.now += 30                        # recovery_period = 30 s
        self.assertEqual(health.HEALTHY, self.judge_now().state)

    def test_thermal_throttling_degrades_with_hysteresis(self):
        self.tree.set(MI300X, 'hwmon/temp1_input', 101000)
        self.assertEqual(health.DEGRADED, self.judge_now().state)
        # under the threshold but inside the hysteresis band: still held
        self.tree.set(MI300X, 'hwmon/temp1_input', 98500)
        self.now += 60
        self.assertEqual(health.DEGRADED, self.judge_now().state)
        self.tree.set(MI300X, 'hwmon/temp1_input', 90000)
        self.now += 1
        self.assertEqual(health.DEGRADED, self.judge_now().state)
        self.now += 30
        self.assertEqual(health.HEALTHY, self.judge_now().state)

    def test_intel_thermal_throttle(self):
        self.tree.set(MAX1550, 'tile0/gt0/freq0/throttle/reason_thermal', 1)
        verdict = self.judge_now(MAX1550)
        self.assertEqual((health.DEGRADED, ['thermal throttling']),
                         (verdict.state, verdict.reasons))
