# SPDX-License-Identifier: Apache-2.0

"""The fake NVML's MIG, through the real pynvml wrappers."""
import ctypes

from oslotest import base
import pynvml

from gpu_nova_ext_dev.fakes import nvml as fake_nvml
from gpu_nova_ext.inventory import mig_profiles

#: NVIDIA's MIG user guide ("Supported MIG Profiles"): per board, the
#: profile names and the number of instances of each; written out here
#: from the guide, apart from the module's table, so that a typo in one
#: shows
GUIDE = {
    'A100_SXM4_40GB': {'1g.5gb': 7, '1g.5gb+me': 1, '1g.10gb': 4,
                       '2g.10gb': 3, '3g.20gb': 2, '4g.20gb': 1,
                       '7g.40gb': 1},
    'A100_80GB_PCIE': {'1g.10gb': 7, '1g.10gb+me': 1, '1g.20gb': 4,
                       '2g.20gb': 3, '3g.40gb': 2, '4g.40gb': 1,
                       '7g.80gb': 1},
    'A30': {'1g.6gb': 4, '1g.6gb+me': 1, '2g.12gb': 2, '2g.12gb+me': 1,
            '4g.24gb': 1},
    'H100_SXM5_80GB': {'1g.10gb': 7, '1g.10gb+me': 1, '1g.20gb': 4,
                       '2g.20gb': 3, '3g.40gb': 2, '4g.40gb': 1,
                       '7g.80gb': 1},
    'H200': {'1g.18gb': 7, '1g.18gb+me': 1, '1g.35gb': 4, '2g.35gb': 3,
             '3g.71gb': 2, '4g.71gb': 1, '7g.141gb': 1},
    'B200': {'1g.23gb': 7, '1g.23gb+me': 1, '1g.45gb': 4, '2g.45gb': 3,
             '3g.90gb': 2, '4g.90gb': 1, '7g.180gb': 1},
}


#: ``nvidia-smi mig -lgip`` / ``-lgipp`` as the real driver prints them,
#: per board: name -> (profile ID, GiB column, placements).  Sources (in
#: mig_profiles' docstring): A100 40GB, the guide's "Getting Started"
#: examples; A30, A100 80GB and H100 80GB, captures from real boards.
#: The A100 80GB capture has no 1g.20gb and no placements, and no
#: readable source gives H200 or B200 IDs, sizes or placements, so those
#: are left out (device-check on real hardware confirms them).
_ONES = [(s, 1) for s in range(7)]
_TWOS = [(0, 2), (2, 2), (4, 2)]
LGIP = {
    'A100_SXM4_40GB': {
        '1g.5gb': (19, '4.75', _ONES),
        '1g.5gb+me': (20, '4.75', _ONES),
        '1g.10gb': (15, '9.62', _TWOS + [(6, 2)]),
        '2g.10gb': (14, '9.62', _TWOS),
        '3g.20gb': (9, '19.50', [(0, 4), (4, 4)]),
        '4g.20gb': (5, '19.50', [(0, 4)]),
        '7g.40gb': (0, '39.25', [(0, 8)]),
    },
    'A100_80GB_PCIE': {
        '1g.10gb': (19, '9.50', None),
        '1g.10gb+me': (20, '9.50', None),
        '2g.20gb': (14, '19.50', None),
        '3g.40gb': (9, '39.50', None),
        '4g.40gb': (5, '39.50', None),
        '7g.80gb': (0, '79.25', None),
    },
    'A30': {
        '1g.6gb': (14, '5.81', [(0, 1), (1, 1), (2, 1), (3, 1)]),
        '1g.6gb+me': (21, '5.81', [(0, 1), (1, 1), (2, 1), (3, 1)]),
        '2g.12gb': (5, '11.69', [(0, 2), (2, 2)]),
        '2g.12gb+me': (6, '11.69', [(0, 2), (2, 2)]),
        '4g.24gb': (0, '23.44', [(0, 4)]),
    },
    'H100_SXM5_80GB': {
        '1g.10gb': (19, '9.75', _ONES),
        '1g.10gb+me': (20, '9.75', _ONES),
        '1g.20gb': (15, '19.62', _TWOS + [(6, 2)]),
        '2g.20gb': (14, '19.62', _TWOS),
        '3g.40gb': (9, '39.50', [(0, 4), (4, 4)]),
        '4g.40gb': (5, '39.50', [(0, 4)]),
        '7g.80gb': (0, '79.25', [(0, 8)]),
    },
}

#: The guide's "Fraction of SMs" and "Fraction of Memory" columns for
#: the boards only the guide covers: name -> (compute slices of 7,
#: memory slices of 8)
FRACTIONS = {
    'H200': {'1g.18gb': (1, 1), '1g.18gb+me': (1, 1), '1g.35gb': (1, 2),
             '2g.35gb': (2, 2), '3g.71gb': (3, 4), '4g.71gb': (4, 4),
             '7g.141gb': (7, 8)},
    'B200': {'1g.23gb': (1, 1), '1g.23gb+me': (1, 1), '1g.45gb': (1, 2),
             '2g.45gb': (2, 2), '3g.90gb': (3, 4), '4g.90gb': (4, 4),
             '7g.180gb': (7, 8)},
}


def _placements(handle, profile_id):
    count = ctypes.c_uint(0)
    pynvml.nvmlDeviceGetGpuInstancePossiblePlacements(
        handle, profile_id, None, ctypes.byref(count))
    array = (pynvml.c_nvmlGpuInstancePlacement_t * count.value)()
    pynvml.nvmlDeviceGetGpuInstancePossiblePlacements(
        handle, profile_id, array, ctypes.byref(count))
    return [(p.start, p.size) for p in array]


def _profiles(handle):
    """What an administrator's tool reads: name -> info, by index."""
    found = {}
    for index in range(pynvml.NVML_GPU_INSTANCE_PROFILE_COUNT):
        try:
            info = pynvml.nvmlDeviceGetGpuInstanceProfileInfo(handle, index)
        except pynvml.NVMLError_NotSupported:
            continue
        name = info.name
        if isinstance(name, bytes):
            name = name.decode()
        found[name[len('MIG '):]] = info
    return found


class TestProfileTables(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.fake = self.useFixture(fake_nvml.FakeNvml(list(GUIDE)))
        pynvml.nvmlInit()
        self.addCleanup(pynvml.nvmlShutdown)

    def test_profiles_as_the_guide_lists_them(self):
        for i, key in enumerate(GUIDE):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            found = _profiles(h)
            self.assertEqual(
                GUIDE[key], {n: info.instanceCount
                             for n, info in found.items()}, key)

    def test_profile_index_constants_are_nvml_s(self):
        self.assertEqual(pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE,
                         mig_profiles.P1)
        self.assertEqual(pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1,
                         mig_profiles.P1_ME)
        self.assertEqual(pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2,
                         mig_profiles.P1_2X)
        self.assertEqual(pynvml.NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1,
                         mig_profiles.P2_ME)
        self.assertEqual(pynvml.NVML_GPU_INSTANCE_PROFILE_7_SLICE,
                         mig_profiles.P7)

    def test_ids_sizes_and_placements_as_the_driver_reports(self):
        keys = list(GUIDE)
        for key, rows in LGIP.items():
            h = pynvml.nvmlDeviceGetHandleByIndex(keys.index(key))
            found = _profiles(h)
            for name, (pid, gib, placements) in rows.items():
                info = found[name]
                self.assertEqual(pid, info.id, (key, name))
                self.assertEqual(gib, '%.2f' % (info.memorySizeMB / 1024),
                                 (key, name))
                if placements is not None:
                    self.assertEqual(placements, _placements(h, pid),
                                     (key, name))

    def test_slices_as_the_guide_lists_them(self):
        keys = list(GUIDE)
        for key, rows in FRACTIONS.items():
            h = pynvml.nvmlDeviceGetHandleByIndex(keys.index(key))
            found = _profiles(h)
            for name, (compute, memory) in rows.items():
                info = found[name]
                self.assertEqual(compute, info.sliceCount, (key, name))
                self.assertEqual(
                    {memory}, {size for _start, size
                               in _placements(h, info.id)}, (key, name))

    def test_a30_has_four_slices(self):
        h = pynvml.nvmlDeviceGetHandleByIndex(2)
        self.assertEqual([(0, 1), (1, 1), (2, 1), (3, 1)],
                         _placements(h, 14))
        self.assertRaises(
            pynvml.NVMLError_NotSupported,
            pynvml.nvmlDeviceGetGpuInstanceProfileInfo, h,
            pynvml.NVML_GPU_INSTANCE_PROFILE_7_SLICE)

    def test_v1_info_and_bad_index(self):
        h = pynvml.nvmlDeviceGetHandleByIndex(4)
        info = pynvml.nvmlDeviceGetGpuInstanceProfileInfo(
            h, pynvml.NVML_GPU_INSTANCE_PROFILE_7_SLICE, version=1)
        self.assertEqual(7, info.sliceCount)
        self.assertRaises(
            pynvml.NVMLError_InvalidArgument,
            pynvml.nvmlDeviceGetGpuInstanceProfileInfo, h,
            pynvml.NVML_GPU_INSTANCE_PROFILE_COUNT)


class TestMigLifecycle(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.fake = self.useFixture(fake_nvml.FakeNvml(
            ['A100_80GB_PCIE', 'L4']))
        pynvml.nvmlInit()
        self.addCleanup(pynvml.nvmlShutdown)
        self.h = pynvml.nvmlDeviceGetHandleByIndex(0)

    def test_not_mig_capable(self):
        l4 = pynvml.nvmlDeviceGetHandleByIndex(1)
        self.assertRaises(pynvml.NVMLError_NotSupported,
                          pynvml.nvmlDeviceSetMigMode, l4, 1)
        self.assertRaises(pynvml.NVMLError_NotSupported,
                          pynvml.nvmlDeviceGetGpuInstanceProfileInfo, l4, 0)

    def test_instances_need_mig_mode(self):
        self.assertRaises(pynvml.NVMLError_NotSupported,
                          pynvml.nvmlDeviceCreateGpuInstance, self.h, 19)
        self.assertEqual(pynvml.NVML_SUCCESS,
                         pynvml.nvmlDeviceSetMigMode(self.h, 1))
        self.assertEqual([1, 1], pynvml.nvmlDeviceGetMigMode(self.h))
        gi = pynvml.nvmlDeviceCreateGpuInstance(self.h, 19)
        info = pynvml.nvmlGpuInstanceGetInfo(gi)
        self.assertEqual((19, 0, 1), (info.profileId, info.placement.start,
                                      info.placement.size))

    def test_pending_until_reset(self):
        self.fake.block_mig_activation(0, pynvml.NVML_ERROR_RESET_REQUIRED)
        self.assertEqual(pynvml.NVML_ERROR_RESET_REQUIRED,
                         pynvml.nvmlDeviceSetMigMode(self.h, 1))
        self.assertEqual([0, 1], pynvml.nvmlDeviceGetMigMode(self.h))
        self.assertRaises(pynvml.NVMLError_NotSupported,
                          pynvml.nvmlDeviceCreateGpuInstance, self.h, 19)
        self.fake.reset_gpu(0)
        self.assertEqual([1, 1], pynvml.nvmlDeviceGetMigMode(self.h))

    def test_vgpus_running_refuse_mode_change(self):
        self.fake.set_active_vgpus(0, [(471, 10)])
        self.assertRaises(pynvml.NVMLError_InUse,
                          pynvml.nvmlDeviceSetMigMode, self.h, 1)
        self.assertEqual([0, 0], pynvml.nvmlDeviceGetMigMode(self.h))

    def test_overlap_and_counts(self):
        pynvml.nvmlDeviceSetMigMode(self.h, 1)
        place = pynvml.c_nvmlGpuInstancePlacement_t(4, 4)
        pynvml.nvmlDeviceCreateGpuInstanceWithPlacement(self.h, 9, place)
        # the 4g profile's only placement (0-3) is free, but 3g + 4g
        # needs 7 compute slices: that fits; a 7g does not
        pynvml.nvmlDeviceCreateGpuInstance(self.h, 5)
        self.assertRaises(pynvml.NVMLError_InsufficientResources,
                          pynvml.nvmlDeviceCreateGpuInstance, self.h, 0)
        self.assertRaises(pynvml.NVMLError_InsufficientResources,
                          pynvml.nvmlDeviceCreateGpuInstance, self.h, 19)
        self.assertEqual(
            0, pynvml.nvmlDeviceGetGpuInstanceRemainingCapacity(self.h, 19))
        self.assertEqual([('3g.40gb', 4), ('4g.40gb', 0)],
                         self.fake.gpu_instances(0))

    def test_placement_not_of_the_profile(self):
        pynvml.nvmlDeviceSetMigMode(self.h, 1)
        place = pynvml.c_nvmlGpuInstancePlacement_t(2, 4)
        self.assertRaises(
            pynvml.NVMLError_InvalidArgument,
            pynvml.nvmlDeviceCreateGpuInstanceWithPlacement,
            self.h, 9, place)

    def test_one_media_extension_instance(self):
        pynvml.nvmlDeviceSetMigMode(self.h, 1)
        pynvml.nvmlDeviceCreateGpuInstance(self.h, 20)
        self.assertRaises(pynvml.NVMLError_InsufficientResources,
                          pynvml.nvmlDeviceCreateGpuInstance, self.h, 20)
        self.assertEqual(
            6, pynvml.nvmlDeviceGetGpuInstanceRemainingCapacity(self.h, 19))

    def test_destroy_in_use_and_list(self):
        pynvml.nvmlDeviceSetMigMode(self.h, 1)
        first = pynvml.nvmlDeviceCreateGpuInstance(self.h, 14)
        pynvml.nvmlDeviceCreateGpuInstance(self.h, 14)
        count = ctypes.c_uint(3)
        array = (pynvml.c_nvmlGpuInstance_t * 3)()
        pynvml.nvmlDeviceGetGpuInstances(self.h, 14, array,
                                         ctypes.byref(count))
        self.assertEqual(2, count.value)
        gi_id = pynvml.nvmlGpuInstanceGetInfo(first).id
        self.fake.use_gpu_instance(0, gi_id)
        self.assertRaises(pynvml.NVMLError_InUse,
                          pynvml.nvmlGpuInstanceDestroy, first)
        self.assertRaises(pynvml.NVMLError_InUse,
                          pynvml.nvmlDeviceSetMigMode, self.h, 0)
        self.fake.use_gpu_instance(0, gi_id, False)
        pynvml.nvmlGpuInstanceDestroy(first)
        self.assertRaises(pynvml.NVMLError_NotFound,
                          pynvml.nvmlDeviceGetGpuInstanceById, self.h,
                          gi_id)

    def test_driver_restart_forgets_instances_and_limits(self):
        pynvml.nvmlDeviceSetMigMode(self.h, 1)
        pynvml.nvmlDeviceCreateGpuInstance(self.h, 0)
        pynvml.nvmlDeviceSetPowerManagementLimit(self.h, 200000)
        self.fake.restart_driver()
        self.assertEqual([], self.fake.gpu_instances(0))
        self.assertEqual([1, 1], pynvml.nvmlDeviceGetMigMode(self.h))
        self.assertEqual(300000,
                         pynvml.nvmlDeviceGetPowerManagementLimit(self.h))

    def test_power_limit_bounds(self):
        self.assertRaises(pynvml.NVMLError_InvalidArgument,
                          pynvml.nvmlDeviceSetPowerManagementLimit,
                          self.h, 100000)
        pynvml.nvmlDeviceSetPowerManagementLimit(self.h, 150000)
        self.assertEqual(150000,
                         pynvml.nvmlDeviceGetEnforcedPowerLimit(self.h))
