# SPDX-License-Identifier: Apache-2.0

"""The fake NVML's NVLink and topology calls, through the real pynvml."""
import os

import pynvml
import testtools

from gpu_nova_ext_dev.fakes import nvml as fake_nvml
from gpu_nova_ext_dev.fakes import sysfs
from gpu_nova_ext_dev.fakes import topology as fake_topology


class TestNvLinkCalls(testtools.TestCase):

    def setUp(self):
        super().setUp()
        layout = fake_topology.LAYOUTS['HGX_H100_8GPU']
        self.fake = self.useFixture(fake_nvml.FakeNvml(
            layout.device_specs() + ['L40S']))
        pynvml.nvmlInit()
        self.addCleanup(pynvml.nvmlShutdown)
        self.h = [d.handle for d in self.fake.devices]

    def test_links_go_to_the_nvswitches(self):
        h = self.h[0]
        self.assertEqual(pynvml.NVML_FEATURE_ENABLED,
                         pynvml.nvmlDeviceGetNvLinkState(h, 17))
        info = pynvml.nvmlDeviceGetNvLinkRemotePciInfo(h, 0)
        self.assertEqual('00000000:05:00.0', info.busId)
        self.assertEqual(pynvml.NVML_NVLINK_DEVICE_TYPE_SWITCH,
                         pynvml.nvmlDeviceGetNvLinkRemoteDeviceType(h, 17))
        # an H100 has 18 links: the 19th is an invalid argument
        self.assertRaises(pynvml.NVMLError_InvalidArgument,
                          pynvml.nvmlDeviceGetNvLinkState, h, 18)

    def test_l40s_has_no_nvlink(self):
        self.assertRaises(pynvml.NVMLError_NotSupported,
                          pynvml.nvmlDeviceGetNvLinkState, self.h[8], 0)

    def test_common_ancestor(self):
        levels = [pynvml.nvmlDeviceGetTopologyCommonAncestor(self.h[0], h)
                  for h in self.h[:8]]
        self.assertEqual(
            [pynvml.NVML_TOPOLOGY_INTERNAL, pynvml.NVML_TOPOLOGY_SINGLE] +
            [pynvml.NVML_TOPOLOGY_NODE] * 2 +
            [pynvml.NVML_TOPOLOGY_SYSTEM] * 4, levels)

    def test_fabric_info_is_not_in_this_library(self):
        info = pynvml.c_nvmlGpuFabricInfo_t()
        self.assertRaises(pynvml.NVMLError_FunctionNotFound,
                          pynvml.nvmlDeviceGetGpuFabricInfo, self.h[0], info)

    def test_more_links_than_the_board_has_is_refused(self):
        spec = fake_nvml.DeviceSpec('A100_80GB_PCIE',
                                    nvlinks=('0000:5e:00.0',) * 13)
        self.assertRaises(ValueError, fake_nvml.FakeDevice, 0, spec)


class TestLayouts(testtools.TestCase):

    def test_pairs_are_symmetric_and_fit_the_board(self):
        for layout in fake_topology.LAYOUTS.values():
            gpus = {g.address: g for g in layout.gpus}
            for g in layout.gpus:
                for peer in set(g.nvlinks) & set(gpus):
                    self.assertEqual(g.nvlinks.count(peer),
                                     gpus[peer].nvlinks.count(g.address),
                                     layout.key)

    def test_sysfs_tree_has_every_function_below_its_parent(self):
        for layout in fake_topology.LAYOUTS.values():
            tree = self.useFixture(sysfs.SysfsTree())
            layout.build_sysfs(tree)
            for node in layout.pci_nodes():
                real = os.path.realpath(os.path.join(
                    tree.root, 'bus', 'pci', 'devices', node.address))
                parent = os.path.basename(os.path.dirname(real))
                self.assertEqual(node.parent or node.host_bridge, parent)
