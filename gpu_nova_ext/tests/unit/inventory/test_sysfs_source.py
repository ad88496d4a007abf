# SPDX-License-Identifier: Apache-2.0

"""The sysfs source over a tree the test builds."""
import os

import testtools

from gpu_nova_ext.inventory import sysfs_source
from gpu_nova_ext_dev.fakes import sysfs
from gpu_nova_ext.tests.unit.inventory import helpers

PF = '0000:3d:00.0'


class TestSysfsSource(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.tree = self.useFixture(sysfs.SysfsTree())
        self.conf = self.useFixture(helpers.AgentConf(
            sysfs_root=self.tree.root)).conf

    def discover(self):
        source = sysfs_source.SysfsVfioSource(self.conf)
        return source.discover(), source.warnings

    def test_vendor_vfio_vfs(self):
        self.tree.add_gpu(PF, device='26b9', driver='nvidia', numa_node=1)
        types = [(1045, 'NVIDIA L40S-1B'), (1050, 'NVIDIA L40S-8Q')]
        self.tree.add_vf('0000:3d:00.4', pf=PF, creatable=types, current=0)
        self.tree.add_vf('0000:3d:00.5', pf=PF, creatable=[], current=1045)
        # a NIC and the BMC VGA are not GPUs
        self.tree.add_function('0000:18:00.0', '15b3', '101d',
                               klass=0x020000, driver='mlx5_core')
        self.tree.add_function('0000:03:00.0', '1a03', '2000',
                               klass=0x030000, driver='ast')
        gpus, warnings = self.discover()
        self.assertEqual([PF], list(gpus))
        gpu = gpus[PF]
        self.assertEqual(('nvidia', '26b9', 1, 'nvidia',
                          ['0000:3d:00.4', '0000:3d:00.5']),
                         (gpu.vendor, gpu.product_id, gpu.numa_node,
                          gpu.kernel_driver, gpu.vfs))
        self.assertEqual([('nvidia-1045', 'L40S-1B', '0000:3d:00.4'),
                          ('nvidia-1050', 'L40S-8Q', '0000:3d:00.4')],
                         [(t.id, t.name, t.parent)
                          for t in gpu.vfio_vgpu_types])
        self.assertEqual({'0000:3d:00.5': 'nvidia-1045'},
                         gpu.vfio_current_types)
        self.assertEqual([], warnings)

    def test_mdev_based_vfs_are_left_to_libvirt(self):
        self.tree.add_gpu(PF, device='20b5', driver='nvidia')
        self.tree.add_vf('0000:3d:00.4', pf=PF, device='20b5',
                         creatable=[(471, 'A100D-10C')], mdev_types=True)
        gpus, _ = self.discover()
        self.assertEqual([], gpus[PF].vfio_vgpu_types)
        self.assertEqual(['0000:3d:00.4'], gpus[PF].vfs)

    def test_bad_current_type_warns(self):
        self.tree.add_gpu(PF)
        self.tree.add_vf('0000:3d:00.4', pf=PF, creatable=[], current=0)
        with open(self.tree.root + '/bus/pci/devices/0000:3d:00.4/nvidia/'
                  'current_vgpu_type', 'w') as f:
            f.write('garbage\n')
        gpus, warnings = self.discover()
        self.assertEqual({}, gpus[PF].vfio_current_types)
        self.assertEqual(1, len(warnings))
        self.assertIn('0000:3d:00.4', warnings[0])

    def test_missing_tree(self):
        conf = self.useFixture(helpers.AgentConf(
            sysfs_root='/nonexistent')).conf
        self.assertEqual({}, sysfs_source.SysfsVfioSource(conf).discover())

    def test_parse_creatable_types(self):
        self.assertEqual(
            [(557, 'NVIDIA L4-1B'), (558, 'NVIDIA L4-2Q')],
            sysfs_source.parse_creatable_types(
                'ID    : vGPU Name\n557   : NVIDIA L4-1B\n'
                '558 : NVIDIA L4-2Q\n\n'))


class TestPciSwitch(testtools.TestCase):
    """``pci_switch`` from the device's place in the sysfs PCI tree."""

    def setUp(self):
        super().setUp()
        self.tree = self.useFixture(sysfs.SysfsTree())
        self.conf = self.useFixture(helpers.AgentConf(
            sysfs_root=self.tree.root)).conf

    def discover(self):
        return sysfs_source.SysfsVfioSource(self.conf).discover()

    def test_switch_root_port_and_root_bus(self):
        tree = self.tree
        tree.add_bridge('0000:17:01.0', host_bridge='pci0000:17')
        tree.add_bridge('0000:18:00.0', parent='0000:17:01.0')
        tree.add_bridge('0000:19:08.0', parent='0000:18:00.0')
        tree.add_gpu('0000:1b:00.0', parent='0000:19:08.0', numa_node=0)
        tree.add_bridge('0000:3c:01.0', host_bridge='pci0000:3c')
        tree.add_gpu('0000:3d:00.0', parent='0000:3c:01.0', numa_node=0)
        tree.add_gpu('0000:00:05.0')          # on the root bus itself
        gpus = self.discover()
        self.assertEqual(
            {'0000:1b:00.0': '0000:18:00.0', '0000:3d:00.0': None,
             '0000:00:05.0': None},
            {a: g.pci_switch for a, g in gpus.items()})
        self.assertEqual(
            os.path.join(tree.root, 'devices', 'pci0000:17', '0000:17:01.0',
                         '0000:18:00.0', '0000:19:08.0', '0000:1b:00.0'),
            os.path.realpath(os.path.join(tree.root, 'bus', 'pci',
                                          'devices', '0000:1b:00.0')))

    def test_a_parent_that_is_no_bridge_is_no_switch(self):
        # a function below another function (a multi-function quirk)
        self.tree.add_bridge('0000:17:01.0', host_bridge='pci0000:17')
        self.tree.add_function('0000:18:00.0', '1000', '0097',
                               klass=0x010700, parent='0000:17:01.0')
        self.tree.add_gpu('0000:18:00.1', parent='0000:18:00.0')
        self.assertIsNone(self.discover()['0000:18:00.1'].pci_switch)


class TestXgmiHive(testtools.TestCase):
    """An MI300X platform: 8 GPUs of one xGMI hive, as amdgpu lays it."""

    def test_one_hive_one_domain(self):
        from gpu_nova_ext.inventory import manager
        from gpu_nova_ext.inventory import topology
        tree = self.useFixture(sysfs.GpuTree())
        hive = 0x9a3c5e7f12345678
        addresses = ['0000:%02x:00.0' % b for b in
                     (0x05, 0x25, 0x45, 0x65, 0x85, 0xa5, 0xc5, 0xe5)]
        for i, address in enumerate(addresses):
            tree.add_amd_gpu(address, numa_node=i // 4, xgmi_hive=hive)
        tree.add_amd_gpu('0000:f5:00.0', numa_node=1)   # no hive
        conf = self.useFixture(helpers.AgentConf(sysfs_root=tree.root)).conf
        inv = manager.discover(conf, sources=['sysfs'])
        self.assertEqual(['%x' % hive] * 8 + [None],
                         [g.xgmi_hive for g in inv.gpus])
        self.assertEqual([addresses[0]] * 8 + [None],
                         [g.link_domain for g in inv.gpus])
        rows = topology.matrix(inv.gpus)
        self.assertEqual(['X'] + ['XGMI'] * 7 + ['SYS'], rows[0])
        # the first device holds the hive directory, the others link to it
        first = os.path.join(tree.path(addresses[0], 'xgmi_hive_info'))
        self.assertFalse(os.path.islink(first))
        self.assertTrue(os.path.islink(
            tree.path(addresses[1], 'xgmi_hive_info')))
        self.assertEqual(8, len([n for n in os.listdir(first)
                                 if n.startswith('node')]))
