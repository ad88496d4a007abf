# SPDX-License-Identifier: Apache-2.0

"""The fake NVML library, exercised through the real pynvml wrappers."""
import threading

from oslotest import base
import pynvml

from gpu_nova_ext_dev.fakes import nvml as fake_nvml


class TestFakeNvmlDiscovery(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.fake = self.useFixture(fake_nvml.FakeNvml(
            ['A100_80GB_PCIE', 'H100_SXM5_80GB', 'L4', 'T4']))
        pynvml.nvmlInit()
        self.addCleanup(pynvml.nvmlShutdown)

    def test_system(self):
        self.assertEqual('550.54.15', pynvml.nvmlSystemGetDriverVersion())
        self.assertEqual(12040, pynvml.nvmlSystemGetCudaDriverVersion())
        self.assertEqual(12040, pynvml.nvmlSystemGetCudaDriverVersion_v2())
        self.assertEqual(4, pynvml.nvmlDeviceGetCount())

    def test_a100_facts(self):
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        self.assertEqual('NVIDIA A100 80GB PCIe', pynvml.nvmlDeviceGetName(h))
        self.assertTrue(pynvml.nvmlDeviceGetUUID(h).startswith('GPU-'))
        self.assertEqual(13, len(pynvml.nvmlDeviceGetSerial(h)))
        pci = pynvml.nvmlDeviceGetPciInfo(h)
        self.assertEqual('00000000:3B:00.0', pci.busId)
        self.assertEqual(0x20B510DE, pci.pciDeviceId)
        self.assertEqual(0x3B, pci.bus)
        mem = pynvml.nvmlDeviceGetMemoryInfo(h)
        self.assertEqual(81920 * 1024 * 1024, mem.total)
        self.assertEqual((8, 0), pynvml.nvmlDeviceGetCudaComputeCapability(h))
        self.assertEqual([0, 0], pynvml.nvmlDeviceGetMigMode(h))
        self.assertEqual(89, pynvml.nvmlDeviceGetTemperatureThreshold(
            h, pynvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN))
        self.assertEqual(92, pynvml.nvmlDeviceGetTemperatureThreshold(
            h, pynvml.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN))
        self.assertEqual(300000, pynvml.nvmlDeviceGetPowerManagementLimit(h))
        self.assertEqual(300000, pynvml.nvmlDeviceGetEnforcedPowerLimit(h))
        self.assertEqual(
            [150000, 300000],
            pynvml.nvmlDeviceGetPowerManagementLimitConstraints(h))

    def test_vgpu_types(self):
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        types = {pynvml.nvmlVgpuTypeGetName(t): t
                 for t in pynvml.nvmlDeviceGetSupportedVgpus(h)}
        t = types['A100D-10C']
        self.assertEqual(471, t)
        self.assertEqual(10240 * 1024 * 1024,
                         pynvml.nvmlVgpuTypeGetFramebufferSize(t))
        self.assertEqual(8, pynvml.nvmlVgpuTypeGetMaxInstances(h, t))
        self.assertEqual('Compute', pynvml.nvmlVgpuTypeGetClass(t))

    def test_handle_by_pci_bus_id_any_spelling(self):
        for spelling in ('00000000:5E:00.0', '0000:5e:00.0', '5e:00.0'):
            h = pynvml.nvmlDeviceGetHandleByPciBusId(spelling)
            self.assertEqual(1, pynvml.nvmlDeviceGetIndex(h))
        self.assertRaises(pynvml.NVMLError_NotFound,
                          pynvml.nvmlDeviceGetHandleByPciBusId,
                          '0000:01:00.0')
        h = pynvml.nvmlDeviceGetHandleByUUID(self.fake.devices[2].uuid)
        self.assertEqual('NVIDIA L4', pynvml.nvmlDeviceGetName(h))

    def test_profiles_without_mig(self):
        for index, cc in ((2, (8, 9)), (3, (7, 5))):
            h = pynvml.nvmlDeviceGetHandleByIndex(index)
            self.assertEqual(cc, pynvml.nvmlDeviceGetCudaComputeCapability(h))
            self.assertRaises(pynvml.NVMLError_NotSupported,
                              pynvml.nvmlDeviceGetMigMode, h)
        h = pynvml.nvmlDeviceGetHandleByIndex(2)
        self.assertEqual(
            23034 * 1024 * 1024, pynvml.nvmlDeviceGetMemoryInfo(h).total)

    def test_h100(self):
        h = pynvml.nvmlDeviceGetHandleByIndex(1)
        self.assertEqual('NVIDIA H100 80GB HBM3', pynvml.nvmlDeviceGetName(h))
        self.assertEqual(0x233010DE,
                         pynvml.nvmlDeviceGetPciInfo(h).pciDeviceId)
        self.assertEqual((9, 0), pynvml.nvmlDeviceGetCudaComputeCapability(h))

    def test_after_shutdown_uninitialized(self):
        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        self.assertEqual(4, pynvml.nvmlDeviceGetCount())
        pynvml.nvmlShutdown()
        self.assertRaises(pynvml.NVMLError_Uninitialized,
                          pynvml.nvmlDeviceGetCount)
        pynvml.nvmlInit()


class TestFakeNvmlMetricsAndErrors(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.fake = self.useFixture(fake_nvml.FakeNvml(['A100_80GB_PCIE',
                                                        'T4']))
        pynvml.nvmlInit()
        self.addCleanup(pynvml.nvmlShutdown)
        self.h = pynvml.nvmlDeviceGetHandleByIndex(0)

    def test_set_metrics(self):
        self.fake.set_metrics('0000:3b:00.0', gpu_util=77, temperature_c=70,
                              power_mw=250000, memory_used_mib=2048)
        self.assertEqual(77, pynvml.nvmlDeviceGetUtilizationRates(self.h).gpu)
        self.assertEqual(70, pynvml.nvmlDeviceGetTemperature(
            self.h, pynvml.NVML_TEMPERATURE_GPU))
        self.assertEqual(250000, pynvml.nvmlDeviceGetPowerUsage(self.h))
        mem = pynvml.nvmlDeviceGetMemoryInfo(self.h, pynvml.nvmlMemory_v2)
        self.assertEqual(2048 * 1024 * 1024, mem.used)
        self.assertEqual(613 * 1024 * 1024, mem.reserved)
        self.assertRaises(KeyError, self.fake.set_metrics, 0, bogus=1)

    def test_field_values_and_not_supported(self):
        self.fake.set_metrics(0, remap_failure=1, ecc_dbe_volatile=3)
        values = pynvml.nvmlDeviceGetFieldValues(self.h, [
            pynvml.NVML_FI_DEV_REMAPPED_FAILURE,
            pynvml.NVML_FI_DEV_ECC_DBE_VOL_TOTAL,
            pynvml.NVML_FI_DEV_RETIRED_PENDING])
        self.assertEqual(pynvml.NVML_SUCCESS, values[0].nvmlReturn)
        self.assertEqual(1, values[0].value.uiVal)
        self.assertEqual(3, values[1].value.ullVal)
        # Ampere replaced page retirement by row remapping.
        self.assertEqual(pynvml.NVML_ERROR_NOT_SUPPORTED,
                         values[2].nvmlReturn)
        self.assertRaises(pynvml.NVMLError_NotSupported,
                          pynvml.nvmlDeviceGetFanSpeed, self.h)
        t4 = pynvml.nvmlDeviceGetHandleByIndex(1)
        self.assertRaises(pynvml.NVMLError_NotSupported,
                          pynvml.nvmlDeviceGetRemappedRows, t4)
        self.fake.set_metrics(1, retired_dbe_pages=2)
        self.assertEqual(2, len(pynvml.nvmlDeviceGetRetiredPages_v2(
            t4, pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)))

    def test_configured_error_and_counting(self):
        self.fake.set_error(0, 'nvmlDeviceGetPowerUsage',
                            pynvml.NVML_ERROR_NO_PERMISSION)
        self.assertRaises(pynvml.NVMLError_NoPermission,
                          pynvml.nvmlDeviceGetPowerUsage, self.h)
        self.assertEqual(1, self.fake.calls['nvmlDeviceGetPowerUsage'])
        self.fake.set_error(0, 'nvmlDeviceGetPowerUsage', None)
        self.assertEqual(50000, pynvml.nvmlDeviceGetPowerUsage(self.h))

    def test_gpu_lost(self):
        self.fake.lose(0)
        self.assertRaises(pynvml.NVMLError_GpuIsLost,
                          pynvml.nvmlDeviceGetUtilizationRates, self.h)
        self.assertRaises(pynvml.NVMLError_GpuIsLost,
                          pynvml.nvmlDeviceGetName, self.h)
        self.fake.lose(0, False)
        self.assertEqual(0, pynvml.nvmlDeviceGetUtilizationRates(self.h).gpu)

    def test_xid_event_delivery(self):
        es = pynvml.nvmlEventSetCreate()
        self.addCleanup(pynvml.nvmlEventSetFree, es)
        pynvml.nvmlDeviceRegisterEvents(
            self.h, pynvml.nvmlEventTypeXidCriticalError, es)
        self.assertRaises(pynvml.NVMLError_Timeout,
                          pynvml.nvmlEventSetWait_v2, es, 1)
        timer = threading.Timer(0.01, self.fake.inject_xid, (0, 79))
        timer.start()
        data = pynvml.nvmlEventSetWait_v2(es, 5000)
        timer.join()
        self.assertEqual(pynvml.nvmlEventTypeXidCriticalError,
                         data.eventType)
        self.assertEqual(79, data.eventData)
        self.assertEqual(self.fake.devices[0].uuid,
                         pynvml.nvmlDeviceGetUUID(data.device))
        # not registered on the T4: nothing delivered
        self.assertEqual(0, self.fake.inject_xid(1, 48))

    def test_vgpu_instances(self):
        self.fake.set_active_vgpus(0, [(471, 35), (471, 60)])
        instances = pynvml.nvmlDeviceGetActiveVgpus(self.h)
        self.assertEqual(2, len(instances))
        self.assertEqual(471, pynvml.nvmlVgpuInstanceGetType(instances[0]))
        samples = pynvml.nvmlDeviceGetVgpuUtilization(self.h, 0)
        self.assertEqual([35, 60], [s.smUtil.uiVal for s in samples])


class TestFakeNvmlHostStates(base.BaseTestCase):

    def test_library_missing(self):
        self.useFixture(fake_nvml.FakeNvml([], library=False))
        self.assertRaises(pynvml.NVMLError_LibraryNotFound, pynvml.nvmlInit)

    def test_driver_not_loaded(self):
        self.useFixture(fake_nvml.FakeNvml(
            ['L4'], init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED))
        self.assertRaises(pynvml.NVMLError_DriverNotLoaded, pynvml.nvmlInit)

    def test_restores_pynvml(self):
        before = pynvml.nvmlLib
        fixture = fake_nvml.FakeNvml(['T4'])
        fixture.setUp()
        self.assertIsNotNone(pynvml.nvmlLib)
        fixture.cleanUp()
        self.assertIs(before, pynvml.nvmlLib)
