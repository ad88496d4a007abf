# SPDX-License-Identifier: Apache-2.0

"""The NVML sampler against the fake NVML library (real pynvml)."""
import pynvml

from gpu_nova_ext.agent import sampler
from gpu_nova_ext_dev.fakes import nvml as fake_nvml
from gpu_nova_ext.tests.unit.agent import health_base


class TestSampler(health_base.HealthTestCase):

    def setUp(self):
        super().setUp()
        self.sampler = sampler.NvmlSampler()
        self.sampler.open()
        self.addCleanup(self.sampler.close)

    def test_reads_at_least_30_fields(self):
        self.fake.set_metrics(0, gpu_util=42, memory_used_mib=2048,
                              temperature_c=51, power_mw=123456,
                              ecc_sbe_volatile=7, remapped_cor=2)
        self.fake.set_active_vgpus(0, [(471, 25), (471, 35)])
        a100, t4 = self.sampler.sample()
        m = a100.metrics
        self.assertEqual('0000:3b:00.0', a100.pci_address)
        self.assertEqual('00000000:3B:00.0', a100.bus_id)
        self.assertEqual(self.fake.devices[0].uuid, a100.uuid)
        self.assertEqual(42, m['utilization_pct'])
        self.assertEqual(2048, m['memory_used_mib'])
        self.assertEqual(613, m['memory_reserved_mib'])
        self.assertEqual(51, m['temperature_c'])
        self.assertEqual(89, m['slowdown_temperature_c'])
        self.assertEqual(92, m['shutdown_temperature_c'])
        self.assertAlmostEqual(123.456, m['power_w'])
        self.assertEqual(300.0, m['power_limit_w'])
        self.assertEqual(7, m['ecc_sbe_volatile'])
        self.assertEqual(2, m['remapped_rows_correctable'])
        self.assertEqual(2, m['vgpu_instances'])
        self.assertEqual(30.0, m['vgpu_sm_util_pct_mean'])
        self.assertEqual(['A100D-10C', 'A100D-10C'],
                         [v['type'] for v in a100.vgpus])
        self.assertGreaterEqual(len(m), 30)
        # the T4 has page retirement and a GDDR6 memory without sensor
        self.assertIn('retired_pages_dbe', t4.metrics)
        self.assertNotIn('memory_temperature_c', t4.metrics)
        self.assertNotIn('remap_failure', t4.metrics)
        self.assertEqual({}, a100.errors)

    def test_not_supported_is_remembered(self):
        for _ in range(3):
            samples = self.sampler.sample()
        # passive boards: fan NotSupported, asked once per GPU only
        self.assertEqual(2, self.fake.calls['nvmlDeviceGetFanSpeed'])
        self.assertEqual(6, self.fake.calls['nvmlDeviceGetUtilizationRates'])
        self.assertNotIn('fan_speed_pct', samples[0].metrics)
        unsupported = self.sampler.unsupported()
        self.assertIn('fan_speed', unsupported['0000:3b:00.0'])
        self.assertIn('retired_pages_pending', unsupported['0000:3b:00.0'])
        self.assertIn('memory_temperature_c', unsupported['0000:5e:00.0'])
        t4_fields = [f[1] for f in self.sampler.devices[1].fields]
        self.assertNotIn('memory_temperature_c', t4_fields)
        self.assertIn('retired_pages_pending', t4_fields)

    def test_no_permission_is_remembered(self):
        self.fake.set_error(0, 'nvmlDeviceGetPowerUsage',
                            pynvml.NVML_ERROR_NO_PERMISSION)
        self.sampler.sample()
        self.sampler.sample()
        self.assertEqual(3, self.fake.calls['nvmlDeviceGetPowerUsage'])
        self.assertIn('power', self.sampler.unsupported()['0000:3b:00.0'])

    def test_transient_error_is_retried(self):
        self.fake.set_error(0, 'nvmlDeviceGetUtilizationRates',
                            pynvml.NVML_ERROR_UNKNOWN)
        first = self.sampler.sample()[0]
        self.assertIn('utilization', first.errors)
        self.assertNotIn('utilization_pct', first.metrics)
        self.fake.set_error(0, 'nvmlDeviceGetUtilizationRates', None)
        self.fake.set_metrics(0, gpu_util=9)
        self.assertEqual(9, self.sampler.sample()[0].metrics[
            'utilization_pct'])

    def test_older_call_when_versioned_one_is_missing(self):
        self.fake.set_error(0, 'nvmlDeviceGetMemoryInfo_v2',
                            pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        self.fake.set_metrics(0, memory_used_mib=100)
        m = self.sampler.sample()[0].metrics
        # v1 counts the driver's reserved memory as used
        self.assertEqual(713, m['memory_used_mib'])
        self.assertNotIn('memory_reserved_mib', m)

    def test_gpu_lost_others_continue(self):
        self.fake.lose(0)
        self.fake.set_metrics(1, gpu_util=5)
        a100, t4 = self.sampler.sample()
        self.assertTrue(a100.lost)
        self.assertFalse(t4.lost)
        self.assertEqual(5, t4.metrics['utilization_pct'])

    def test_xid_events(self):
        self.fake.inject_xid(1, 13)
        self.fake.inject_xid(1, 79)
        a100, t4 = self.sampler.sample()
        self.assertEqual([], a100.xids)
        self.assertEqual([13, 79], t4.xids)
        self.assertEqual(79, t4.metrics['xid_last'])
        self.assertEqual(2, t4.metrics['xid_count'])
        self.assertEqual([], self.sampler.sample()[1].xids)


class TestSamplerHostStates(health_base.HealthTestCase):

    def test_library_missing(self):
        self.useFixture(fake_nvml.FakeNvml([], library=False))
        s = sampler.NvmlSampler()
        self.assertRaises(pynvml.NVMLError_LibraryNotFound, s.open)
        self.assertEqual([], s.sample())

    def test_driver_not_loaded(self):
        self.useFixture(fake_nvml.FakeNvml(
            ['L4'], init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED))
        self.assertRaises(pynvml.NVMLError_DriverNotLoaded,
                          sampler.NvmlSampler().open)
