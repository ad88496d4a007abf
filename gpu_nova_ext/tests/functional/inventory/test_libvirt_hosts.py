# SPDX-License-Identifier: Apache-2.0

"""The shipped host XMLs through libvirt-python and libvirt's test driver.

Each test discovers one host (``test:///<xml>``) with the real stevedore
plugins and asserts the exact inventory: the state payload GPU objects
(``to_dict()``) plus the facts the payload leaves out.
"""
import os

import fixtures
import testtools

from gpu_nova_ext import exception
from gpu_nova_ext.inventory import base
from gpu_nova_ext.inventory import manager
from gpu_nova_ext_dev.fakes import sysfs
from gpu_nova_ext.tests.unit.inventory import helpers

A100_TYPES = (('nvidia-469', 'A100D-4C', 4096, 20),
              ('nvidia-470', 'A100D-8C', 8192, 10),
              ('nvidia-471', 'A100D-10C', 10240, 8),
              ('nvidia-472', 'A100D-16C', 16384, 5),
              ('nvidia-473', 'A100D-20C', 20480, 4),
              ('nvidia-474', 'A100D-40C', 40960, 2),
              ('nvidia-475', 'A100D-80C', 81920, 1))


def gpu_object(**fields):
    """A payload GPU object as libvirt alone knows it."""
    obj = {'pci_address': None, 'vfs': [], 'provider_uuids': [],
           'vendor': 'nvidia', 'model': None, 'memory_mib': None,
           'uuid': None, 'numa_node': None, 'mode': 'passthrough',
           'offered_vgpu_type': None, 'driver_version': None,
           'cuda_cc': None, 'vgpu_types': [],
           'mig': {'capable': None, 'enabled': None},
           'health': {'state': 'healthy', 'reasons': []}, 'metrics': {}}
    obj.update(fields)
    return obj


def vgpu_type(id, name, fb, available, max):
    return {'id': id, 'name': name, 'framebuffer_mib': fb,
            'available': available, 'max': max}


class LibvirtHostTestCase(testtools.TestCase):

    def discover(self, xml, sources=('libvirt',), **agent):
        self.conf_fixture = self.useFixture(helpers.AgentConf(
            libvirt_uri=helpers.host_uri(xml), **agent))
        return manager.discover(self.conf_fixture.conf,
                                sources=list(sources))

    def facts(self, inventory):
        """The non-payload facts of each GPU, by address."""
        return {g.pci_address: (g.vendor_id, g.product_id, g.product_name,
                                g.iommu_group, g.kernel_driver, g.sources)
                for g in inventory.gpus}


class TestA100MdevHost(LibvirtHostTestCase):

    def test_exact_inventory(self):
        inv = self.discover('a100-mdev.xml')
        # GPU 3b runs two A100D-10C vGPUs: 6 more fit; the other types
        # are blocked (a time-sliced GPU runs one type) and their maximum
        # is unknown without NVML.
        used = [vgpu_type(i, n, fb, 6 if i == 'nvidia-471' else 0,
                          8 if i == 'nvidia-471' else None)
                for i, n, fb, _m in A100_TYPES]
        free = [vgpu_type(i, n, fb, m, m) for i, n, fb, m in A100_TYPES]
        self.assertEqual({'host': 'cmp-1', 'gpus': [
            gpu_object(pci_address='0000:3b:00.0', model='A100_80GB_PCIE',
                       numa_node=0, mode='vgpu',
                       offered_vgpu_type='nvidia-471', vgpu_types=used),
            gpu_object(pci_address='0000:86:00.0', model='A100_80GB_PCIE',
                       numa_node=1, mode='vgpu', offered_vgpu_type=None,
                       vgpu_types=free),
        ]}, inv.to_dict())
        self.assertEqual({
            '0000:3b:00.0': ('10de', '20b5', 'GA100 [A100 PCIe 80GB]', 40,
                             None, ['libvirt']),
            '0000:86:00.0': ('10de', '20b5', 'GA100 [A100 PCIe 80GB]', 80,
                             None, ['libvirt'])}, self.facts(inv))
        self.assertEqual(
            [base.Mdev('4b20d080-1b54-4048-85b3-a6a62d165c01', 'nvidia-471',
                       '0000:3b:00.0'),
             base.Mdev('9a7c2b10-6e3f-4f0a-8a43-0c1d5f2e7b11', 'nvidia-471',
                       '0000:3b:00.0')],
            sorted(inv.gpu('0000:3b:00.0').mdevs, key=lambda m: m.uuid))
        self.assertEqual([], inv.gpu('0000:86:00.0').mdevs)
        self.assertEqual([], inv.warnings)

    def test_nova_conf_decides_offered_type(self):
        fixture = self.useFixture(helpers.AgentConf(
            libvirt_uri=helpers.host_uri('a100-mdev.xml')))
        fixture.write_nova_conf(
            '[devices]\nenabled_mdev_types = nvidia-471,nvidia-474\n'
            '[mdev_nvidia-471]\ndevice_addresses = 0000:3b:00.0\n')
        fixture.write_nova_conf(
            '[mdev_nvidia-474]\ndevice_addresses = 0000:86:00.0\n',
            name='50-gpu.conf')
        inv = manager.discover(fixture.conf, sources=['libvirt'])
        self.assertEqual('nvidia-471',
                         inv.gpu('0000:3b:00.0').offered_vgpu_type)
        self.assertEqual('nvidia-474',
                         inv.gpu('0000:86:00.0').offered_vgpu_type)


class TestSriovVgpuHost(LibvirtHostTestCase):

    def test_exact_inventory(self):
        inv = self.discover('a10-sriov-vgpu.xml')
        vfs = ['0000:41:00.4', '0000:41:00.5', '0000:41:00.6',
               '0000:41:00.7']
        types = [vgpu_type('nvidia-593', 'A10-4Q', 4096, 0, None),
                 vgpu_type('nvidia-594', 'A10-6Q', 6144, 0, None),
                 vgpu_type('nvidia-595', 'A10-8Q', 8192, 2, 3),
                 vgpu_type('nvidia-596', 'A10-12Q', 12288, 0, None),
                 vgpu_type('nvidia-597', 'A10-24Q', 24576, 0, None)]
        self.assertEqual({'host': 'cmp-1', 'gpus': [
            gpu_object(pci_address='0000:41:00.0', vfs=vfs, model='A10',
                       numa_node=1, mode='vgpu',
                       offered_vgpu_type='nvidia-595', vgpu_types=types),
        ]}, inv.to_dict())
        gpu = inv.gpu('0000:41:00.0')
        self.assertEqual(
            [base.Mdev('c0ffee00-0595-4a10-9f00-000000000001', 'nvidia-595',
                       '0000:41:00.4')], gpu.mdevs)
        # the mdev types stay per parent VF, for the nova.conf generator
        self.assertEqual(20, len(gpu.mdev_types))
        self.assertEqual(set(vfs), {t.parent for t in gpu.mdev_types})
        self.assertEqual({'0000:41:00.0': ('10de', '2236', 'GA102GL [A10]',
                                           60, None, ['libvirt'])},
                         self.facts(inv))

    def test_nova_conf_maps_vf_addresses_to_the_gpu(self):
        fixture = self.useFixture(helpers.AgentConf(
            libvirt_uri=helpers.host_uri('a10-sriov-vgpu.xml')))
        fixture.write_nova_conf(
            '[devices]\nenabled_mdev_types = nvidia-593, nvidia-595\n'
            '[mdev_nvidia-595]\ndevice_addresses = 0000:41:00.5\n'
            '[mdev_nvidia-593]\ndevice_addresses = 0000:3b:00.4\n')
        inv = manager.discover(fixture.conf, sources=['libvirt'])
        self.assertEqual('nvidia-595',
                         inv.gpu('0000:41:00.0').offered_vgpu_type)


class TestH100PassthroughHost(LibvirtHostTestCase):

    def test_exact_inventory(self):
        inv = self.discover('h100-passthrough.xml')
        self.assertEqual({'host': 'cmp-1', 'gpus': [
            gpu_object(pci_address='0000:4b:00.0', model='H100_80GB_HBM3',
                       numa_node=0),
            gpu_object(pci_address='0000:ca:00.0', model='H100_80GB_HBM3',
                       numa_node=1),
        ]}, inv.to_dict())
        # libvirt's test driver drops <driver>: the bound driver is None
        # from libvirt alone (see the sysfs test below).
        self.assertEqual({
            '0000:4b:00.0': ('10de', '2330', 'GH100 [H100 SXM5 80GB]', 30,
                             None, ['libvirt']),
            '0000:ca:00.0': ('10de', '2330', 'GH100 [H100 SXM5 80GB]', 90,
                             None, ['libvirt'])}, self.facts(inv))
        self.assertEqual([], inv.warnings)

    def test_bound_driver_from_sysfs(self):
        tree = self.useFixture(sysfs.SysfsTree())
        tree.add_gpu('0000:4b:00.0', device='2330', driver='vfio-pci',
                     numa_node=0)
        tree.add_gpu('0000:ca:00.0', device='2330', driver='vfio-pci',
                     numa_node=1)
        inv = self.discover('h100-passthrough.xml',
                            sources=('libvirt', 'sysfs'),
                            sysfs_root=tree.root)
        self.assertEqual(['passthrough', 'passthrough'],
                         [g.mode for g in inv.gpus])
        self.assertEqual(
            {'0000:4b:00.0': ('10de', '2330', 'GH100 [H100 SXM5 80GB]', 30,
                              'vfio-pci', ['libvirt', 'sysfs']),
             '0000:ca:00.0': ('10de', '2330', 'GH100 [H100 SXM5 80GB]', 90,
                              'vfio-pci', ['libvirt', 'sysfs'])},
            self.facts(inv))


class TestMixedHost(LibvirtHostTestCase):

    def test_exact_inventory(self):
        inv = self.discover('mixed-t4-l4-mi210.xml')
        t4 = [vgpu_type('nvidia-222', 'T4-1Q', 1024, 16, 16),
              vgpu_type('nvidia-223', 'T4-2Q', 2048, 8, 8),
              vgpu_type('nvidia-224', 'T4-4Q', 4096, 4, 4),
              vgpu_type('nvidia-225', 'T4-8Q', 8192, 2, 2),
              vgpu_type('nvidia-226', 'T4-16Q', 16384, 1, 1)]
        self.assertEqual({'host': 'cmp-1', 'gpus': [
            gpu_object(pci_address='0000:3b:00.0', model='TESLA_T4',
                       numa_node=0, mode='vgpu', vgpu_types=t4),
            gpu_object(pci_address='0000:5e:00.0', model='L4',
                       numa_node=0),
            gpu_object(pci_address='0000:c1:00.0', vendor='amd',
                       model='MI210', numa_node=1),
        ]}, inv.to_dict())
        # the X710 NIC, the PCIe switch port and the ASPEED BMC VGA are
        # not GPUs, and ignoring them is not worth a warning
        self.assertEqual([], inv.warnings)
        self.assertEqual({
            '0000:3b:00.0': ('10de', '1eb8', 'TU104GL [Tesla T4]', 40, None,
                             ['libvirt']),
            '0000:5e:00.0': ('10de', '27b8', 'AD104GL [L4]', 50, None,
                             ['libvirt']),
            '0000:c1:00.0': ('1002', '740f',
                             'Aldebaran/MI200 [Instinct MI210]', 70, None,
                             ['libvirt'])}, self.facts(inv))

    def test_bmc_vga_configured_in(self):
        inv = self.discover('mixed-t4-l4-mi210.xml',
                            extra_gpu_pci_ids=['1a03:2000'])
        bmc = inv.gpu('0000:03:00.0')
        self.assertIsNotNone(bmc)
        self.assertIsNone(bmc.vendor)
        self.assertEqual('ASPEED_GRAPHICS_FAMILY', bmc.model)
        self.assertEqual(1, len(inv.warnings))
        self.assertIn('0000:03:00.0', inv.warnings[0])


class TestIntelHost(LibvirtHostTestCase):

    def test_exact_inventory(self):
        inv = self.discover('intel-flex-max.xml')
        self.assertEqual({'host': 'cmp-1', 'gpus': [
            gpu_object(pci_address='0000:4d:00.0', vendor='intel',
                       model='FLEX_170', numa_node=0,
                       vfs=['0000:4d:00.1', '0000:4d:00.2', '0000:4d:00.3',
                            '0000:4d:00.4']),
            gpu_object(pci_address='0000:9a:00.0', vendor='intel',
                       model='MAX_1550', numa_node=1),
        ]}, inv.to_dict())
        self.assertEqual({
            '0000:4d:00.0': ('8086', '56c0', 'Data Center GPU Flex 170', 33,
                             None, ['libvirt']),
            '0000:9a:00.0': ('8086', '0bd5', 'Ponte Vecchio XT (2 Tile) '
                             '[Data Center GPU Max 1550]', 75, None,
                             ['libvirt'])}, self.facts(inv))


class TestVendorVfioHost(LibvirtHostTestCase):
    """L40S with NVIDIA vendor-specific VFIO vGPU: libvirt + sysfs."""

    def build_tree(self):
        tree = self.useFixture(sysfs.SysfsTree())
        tree.add_gpu('0000:3d:00.0', device='26b9', driver='nvidia',
                     numa_node=0)
        types = [(1045, 'NVIDIA L40S-1B'), (1050, 'NVIDIA L40S-8Q'),
                 (1053, 'NVIDIA L40S-48Q')]
        # VF .4 runs an L40S-8Q; the GPU now only creates L40S-8Q, on
        # .5 and .6; .7 is full.
        tree.add_vf('0000:3d:00.4', pf='0000:3d:00.0', creatable=[],
                    current=1050)
        tree.add_vf('0000:3d:00.5', pf='0000:3d:00.0',
                    creatable=[types[1]], current=0)
        tree.add_vf('0000:3d:00.6', pf='0000:3d:00.0',
                    creatable=[types[1]], current=0)
        tree.add_vf('0000:3d:00.7', pf='0000:3d:00.0', creatable=[],
                    current=0)
        return tree

    def test_exact_inventory(self):
        tree = self.build_tree()
        inv = self.discover('l40s-vfio-vgpu.xml',
                            sources=('libvirt', 'sysfs'),
                            sysfs_root=tree.root)
        self.assertEqual({'host': 'cmp-1', 'gpus': [
            gpu_object(pci_address='0000:3d:00.0', model='L40S',
                       numa_node=0, mode='vgpu-vfio',
                       offered_vgpu_type='nvidia-1050',
                       vfs=['0000:3d:00.4', '0000:3d:00.5', '0000:3d:00.6',
                            '0000:3d:00.7'],
                       vgpu_types=[vgpu_type('nvidia-1050', 'L40S-8Q', 8192,
                                             2, 3)]),
        ]}, inv.to_dict())
        gpu = inv.gpu('0000:3d:00.0')
        self.assertEqual('nvidia', gpu.kernel_driver)
        self.assertEqual({'0000:3d:00.4': 'nvidia-1050'},
                         gpu.vfio_current_types)
        self.assertEqual([], inv.warnings)

    def test_without_sysfs_it_is_passthrough(self):
        inv = self.discover('l40s-vfio-vgpu.xml')
        self.assertEqual('passthrough', inv.gpus[0].mode)


class TestAcceleratorAndClasslessHost(LibvirtHostTestCase):
    """MI300X PF+VF of class 0x120000 and a classless NVIDIA mdev parent."""

    def test_exact_inventory(self):
        inv = self.discover('mi300x-classless.xml')
        self.assertEqual({'host': 'cmp-1', 'gpus': [
            gpu_object(pci_address='0000:0a:01.5', vendor='nvidia',
                       model='GRID_M60_0B', numa_node=8, mode='vgpu',
                       vgpu_types=[vgpu_type('nvidia-11', 'M60-0B', 512,
                                             16, 16)]),
            gpu_object(pci_address='0000:11:00.0', vendor='amd',
                       model='MI300X', numa_node=0, mode='passthrough',
                       vfs=['0000:11:02.0']),
        ]}, inv.to_dict())
        self.assertEqual(([], []), (inv.warnings, inv.notes))


class TestSampleHostAndErrors(testtools.TestCase):

    def test_sample_host_without_gpu(self):
        fixture = self.useFixture(helpers.AgentConf(
            libvirt_uri='test://' + helpers.SAMPLE_HOST))
        inv = manager.discover(fixture.conf, sources=['libvirt'])
        self.assertEqual(['0000:3b:00.0', '0000:5e:00.0', '0000:86:00.0',
                          '0000:af:00.0'], [g.pci_address for g in inv.gpus])
        self.assertEqual({'vgpu'}, {g.mode for g in inv.gpus})
        self.assertEqual('nvidia-471', inv.gpus[0].offered_vgpu_type)

    def test_unreachable_libvirt_names_uri(self):
        fixture = self.useFixture(helpers.AgentConf(
            libvirt_uri='test:///nonexistent/host.xml'))
        exc = self.assertRaises(exception.LibvirtUnavailable,
                                manager.discover, fixture.conf,
                                sources=['libvirt'])
        self.assertIn('test:///nonexistent/host.xml', str(exc))

    def _discover_uri(self, uri):
        fixture = self.useFixture(helpers.AgentConf(libvirt_uri=uri))
        return self.assertRaises(exception.LibvirtHostFileError,
                                 manager.discover, fixture.conf,
                                 sources=['libvirt'])

    def test_unreadable_host_file_is_not_called_a_daemon_problem(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        cases = {'missing.xml': (None, 'no such file'),
                 'dir.xml': ('dir', 'not a regular file'),
                 'broken.xml': (b'<node><device', 'not well-formed XML'),
                 'latin1.xml': (b'<node name="\xe9"/>', 'not UTF-8')}
        for name, (content, reason) in cases.items():
            path = os.path.join(tmp, name)
            if content == 'dir':
                os.mkdir(path)
            elif content is not None:
                with open(path, 'wb') as f:
                    f.write(content)
            exc = self._discover_uri('test://' + path)
            self.assertIn(path, str(exc))
            self.assertIn(reason, str(exc))
            self.assertNotIn('libvirtd', str(exc))
            self.assertIsInstance(exc, exception.LibvirtUnavailable)

    def test_unknown_source_lists_installed(self):
        fixture = self.useFixture(helpers.AgentConf())
        exc = self.assertRaises(exception.PluginLoadError, manager.discover,
                                fixture.conf, sources=['libvirt', 'dcgm'])
        self.assertIn("'dcgm'", str(exc))
        for name in ('libvirt', 'nvml', 'simulated', 'sysfs'):
            self.assertIn(name, str(exc))
