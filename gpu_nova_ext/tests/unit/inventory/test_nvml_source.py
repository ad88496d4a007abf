# SPDX-License-Identifier: Apache-2.0

"""The nvml source against the real pynvml over the fake NVML library."""
import ctypes

import pynvml
import testtools

from gpu_nova_ext.inventory import base
from gpu_nova_ext.inventory import manager
from gpu_nova_ext.inventory import nvml_source
from gpu_nova_ext_dev.fakes import nvml as fake_nvml
from gpu_nova_ext.tests.unit.inventory import helpers

HOST = ('A100_80GB_PCIE', 'H100_SXM5_80GB', 'L4', 'T4')


class NvmlTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(helpers.AgentConf()).conf

    def discover(self):
        source = nvml_source.NvmlSource(self.conf)
        return source.discover(), source.warnings


class TestNvmlFacts(NvmlTestCase):

    def test_four_profiles(self):
        fake = self.useFixture(fake_nvml.FakeNvml(HOST))
        gpus, warnings = self.discover()
        self.assertEqual([], warnings)
        self.assertEqual(['0000:3b:00.0', '0000:5e:00.0', '0000:86:00.0',
                          '0000:af:00.0'], sorted(gpus))
        a100, h100, l4, t4 = (gpus[d.pci_address] for d in fake.devices)
        self.assertEqual(
            ('NVIDIA A100 80GB PCIe', 'A100_80GB_PCIE', 81920, '8.0',
             True, False, False, 89, 92, 300.0),
            (a100.product_name, a100.model, a100.memory_mib, a100.cuda_cc,
             a100.mig_capable, a100.mig_enabled, a100.mig_pending,
             a100.slowdown_temperature_c, a100.shutdown_temperature_c,
             a100.power_limit_w))
        self.assertEqual(fake.devices[0].uuid, a100.uuid)
        self.assertEqual(fake.devices[0].serial, a100.serial)
        self.assertEqual(('H100_80GB_HBM3', 81559, '9.0', 700.0),
                         (h100.model, h100.memory_mib, h100.cuda_cc,
                          h100.power_limit_w))
        # MIG is NotSupported on L4 and T4: not capable, not an error
        self.assertEqual(('L4', '8.9', False, False),
                         (l4.model, l4.cuda_cc, l4.mig_capable,
                          l4.mig_enabled))
        self.assertEqual(('TESLA_T4', '7.5', 15360, 93, 70.0),
                         (t4.model, t4.cuda_cc, t4.memory_mib,
                          t4.slowdown_temperature_c, t4.power_limit_w))
        for gpu in gpus.values():
            self.assertEqual(('nvidia', '10de', '550.54.15', '12.4',
                              ['nvml']),
                             (gpu.vendor, gpu.vendor_id, gpu.driver_version,
                              gpu.cuda_driver_version, gpu.sources))
        self.assertEqual(('20b5', '2330', '27b8', '1eb8'),
                         (a100.product_id, h100.product_id, l4.product_id,
                          t4.product_id))
        self.assertEqual(
            [base.MdevType(id='nvidia-469', name='A100D-4C', available=20,
                           max=20, framebuffer_mib=4096),
             base.MdevType(id='nvidia-471', name='A100D-10C', available=8,
                           max=8, framebuffer_mib=10240)],
            [a100.vgpu_types[0], a100.vgpu_types[2]])
        self.assertEqual(7, len(a100.vgpu_types))
        self.assertEqual(['T4-1Q', 'T4-2Q', 'T4-4Q', 'T4-8Q', 'T4-16Q'],
                         [t.name for t in t4.vgpu_types])
        self.assertEqual(0, fake.init_count)  # shut down after discovery

    def test_mig_enabled(self):
        self.useFixture(fake_nvml.FakeNvml([fake_nvml.DeviceSpec(
            'A100_80GB_PCIE', mig_enabled=True)]))
        gpus, _warnings = self.discover()
        gpu = gpus['0000:3b:00.0']
        self.assertEqual((True, True, True),
                         (gpu.mig_capable, gpu.mig_enabled, gpu.mig_pending))


class TestNvmlErrors(NvmlTestCase):

    def test_not_supported_and_no_permission_are_silent(self):
        fake = self.useFixture(fake_nvml.FakeNvml(['L4']))
        fake.set_error(0, 'nvmlDeviceGetSerial',
                       pynvml.NVML_ERROR_NO_PERMISSION)
        fake.set_error(0, 'nvmlDeviceGetTemperatureThreshold',
                       pynvml.NVML_ERROR_NOT_SUPPORTED)
        fake.set_error(0, 'nvmlDeviceGetSupportedVgpus',
                       pynvml.NVML_ERROR_NOT_SUPPORTED)
        gpus, warnings = self.discover()
        gpu = gpus['0000:3b:00.0']
        self.assertEqual([], warnings)
        self.assertIsNone(gpu.serial)
        self.assertIsNone(gpu.slowdown_temperature_c)
        self.assertEqual([], gpu.vgpu_types)
        self.assertEqual('L4', gpu.model)
        self.assertEqual(1, fake.calls['nvmlDeviceGetMigMode'])

    def test_other_error_degrades_one_field_with_one_warning(self):
        fake = self.useFixture(fake_nvml.FakeNvml(['T4', 'L4']))
        fake.set_error(1, 'nvmlDeviceGetUUID', pynvml.NVML_ERROR_UNKNOWN)
        gpus, warnings = self.discover()
        self.assertIsNone(gpus['0000:5e:00.0'].uuid)
        self.assertEqual('L4', gpus['0000:5e:00.0'].model)
        self.assertEqual(fake.devices[0].uuid, gpus['0000:3b:00.0'].uuid)
        self.assertEqual(1, len(warnings))
        self.assertIn('UUID of GPU 0000:5e:00.0', warnings[0])

    def test_gpu_lost(self):
        fake = self.useFixture(fake_nvml.FakeNvml(HOST))
        fake.lose(1)
        gpus, warnings = self.discover()
        # a lost GPU's handle still answers nothing: its PCI address is
        # unknown, it is skipped; the rest is discovered
        self.assertEqual(['0000:3b:00.0', '0000:86:00.0', '0000:af:00.0'],
                         sorted(gpus))
        self.assertEqual(1, len(warnings))
        self.assertIn('index 1', warnings[0])

    def test_gpu_lost_after_pci_info(self):
        fake = self.useFixture(fake_nvml.FakeNvml(HOST))
        fake.set_error(2, 'nvmlDeviceGetName',
                       pynvml.NVML_ERROR_GPU_IS_LOST)
        gpus, warnings = self.discover()
        l4 = gpus['0000:86:00.0']
        self.assertEqual(base.Health('unhealthy',
                                     [nvml_source.REASON_GPU_LOST]),
                         l4.health)
        self.assertEqual('healthy', gpus['0000:3b:00.0'].health.state)
        self.assertEqual(1, len(warnings))
        self.assertIn('0000:86:00.0', warnings[0])

    def test_library_not_found(self):
        self.useFixture(fake_nvml.FakeNvml([], library=False))
        gpus, warnings = self.discover()
        self.assertEqual({}, gpus)
        self.assertEqual(1, len(warnings))
        self.assertIn('NVML Shared Library Not Found', warnings[0])

    def test_driver_not_loaded(self):
        self.useFixture(fake_nvml.FakeNvml(
            HOST, init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED))
        gpus, warnings = self.discover()
        self.assertEqual({}, gpus)
        self.assertEqual(1, len(warnings))
        self.assertIn('Driver Not Loaded', warnings[0])

    def test_name_in_odd_encoding(self):
        fake = self.useFixture(fake_nvml.FakeNvml(HOST))
        real = fake.lib.nvmlDeviceGetName
        odd = fake.devices[1]

        def get_name(handle, buf, size):
            if fake.device_by_handle(handle) is odd:
                data = b'NVIDIA H100 \xff\xfe80GB\0'
                ctypes.memmove(buf, data, len(data))
                return pynvml.NVML_SUCCESS
            return real(handle, buf, size)

        fake.lib.nvmlDeviceGetName = get_name
        gpus, warnings = self.discover()
        h100 = gpus['0000:5e:00.0']
        self.assertIsNone(h100.model)
        self.assertIsNone(h100.product_name)
        self.assertEqual(fake.devices[1].uuid, h100.uuid)
        self.assertEqual(1, len(warnings))
        self.assertIn('name of GPU 0000:5e:00.0', warnings[0])
        self.assertIn('UTF-8', warnings[0])
        # merged, the model comes from the PCI ID table
        inv = manager.discover(self.conf, sources=['nvml'])
        self.assertEqual('H100_80GB_HBM3', inv.gpu('0000:5e:00.0').model)
        self.assertEqual(1, len(inv.warnings))


class TestNvLinks(NvmlTestCase):
    """NVLink peers through the real pynvml over the fake library."""

    def test_bridged_pair(self):
        self.useFixture(fake_nvml.FakeNvml([
            fake_nvml.DeviceSpec('A100_80GB_PCIE', pci_address='0000:3b:00.0',
                                 nvlinks=('0000:5e:00.0',) * 12),
            fake_nvml.DeviceSpec('A100_80GB_PCIE', pci_address='0000:5e:00.0',
                                 nvlinks=('0000:3b:00.0',) * 12)]))
        gpus, warnings = self.discover()
        self.assertEqual([], warnings)
        self.assertEqual({'0000:5e:00.0': 12},
                         gpus['0000:3b:00.0'].nvlink_peers)

    def test_no_nvlink_board_is_quiet_and_asked_once(self):
        fake = self.useFixture(fake_nvml.FakeNvml(['L4', 'A100_80GB_PCIE']))
        gpus, warnings = self.discover()
        self.assertEqual([], warnings)
        self.assertEqual([{}, {}], [g.nvlink_peers for g in gpus.values()])
        # L4: NotSupported on link 0; A100: 12 inactive links, then
        # InvalidArgument on link 12
        self.assertEqual(1 + 13, fake.calls['nvmlDeviceGetNvLinkState'])
        self.assertEqual(0, fake.calls['nvmlDeviceGetNvLinkRemotePciInfo_v2'])

    def test_other_error_warns_and_reports_no_links(self):
        fake = self.useFixture(fake_nvml.FakeNvml([
            fake_nvml.DeviceSpec('H100_SXM5_80GB',
                                 nvlinks=('0000:05:00.0',) * 18)]))
        fake.set_error(0, 'nvmlDeviceGetNvLinkRemotePciInfo_v2',
                       pynvml.NVML_ERROR_UNKNOWN)
        gpus, warnings = self.discover()
        self.assertEqual({}, gpus['0000:3b:00.0'].nvlink_peers)
        self.assertEqual(1, len(warnings), warnings)
        self.assertIn('NVLink 0 of GPU 0000:3b:00.0', warnings[0])
        # the other facts are still there
        self.assertEqual('H100_80GB_HBM3', gpus['0000:3b:00.0'].model)

    def test_lost_gpu_while_reading_links(self):
        fake = self.useFixture(fake_nvml.FakeNvml([
            fake_nvml.DeviceSpec('H100_SXM5_80GB',
                                 nvlinks=('0000:05:00.0',) * 18)]))
        fake.set_error(0, 'nvmlDeviceGetNvLinkState',
                       pynvml.NVML_ERROR_GPU_IS_LOST)
        gpus, _warnings = self.discover()
        self.assertEqual('unhealthy', gpus['0000:3b:00.0'].health.state)
