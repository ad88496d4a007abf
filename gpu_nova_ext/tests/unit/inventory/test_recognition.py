# SPDX-License-Identifier: Apache-2.0

"""Which PCI functions are GPUs: accelerators, classless devices, ranges."""
import fixtures
import testtools

from gpu_nova_ext.inventory import libvirt_source as ls
from gpu_nova_ext.tests.unit.inventory import helpers

# An AMD Instinct MI300X as libvirt reports it on a real host: PF and its
# SR-IOV VF both of class 0x120000 (processing accelerator).
MI300X_PF = """<device>
  <name>pci_0000_11_00_0</name>
  <path>/sys/devices/pci0000:00/0000:00:01.1/0000:11:00.0</path>
  <parent>pci_0000_10_00_0</parent>
  <driver><name>amdgpu</name></driver>
  <capability type='pci'>
    <class>0x120000</class>
    <domain>0</domain><bus>17</bus><slot>0</slot><function>0</function>
    <product id='0x74a1'>Aqua Vanjaram [Instinct MI300X]</product>
    <vendor id='0x1002'>Advanced Micro Devices, Inc. [AMD/ATI]</vendor>
    <capability type='virt_functions' maxCount='1'>
      <address domain='0x0000' bus='0x11' slot='0x02' function='0x0'/>
    </capability>
    <iommuGroup number='12'>
      <address domain='0x0000' bus='0x11' slot='0x00' function='0x0'/>
    </iommuGroup>
    <numa node='0'/>
    <pci-express>
      <link validity='cap' port='0' speed='32' width='16'/>
      <link validity='sta' speed='32' width='16'/>
    </pci-express>
  </capability>
</device>"""

MI300X_VF = """<device>
  <name>pci_0000_11_02_0</name>
  <parent>pci_0000_10_00_0</parent>
  <driver><name>vfio-pci</name></driver>
  <capability type='pci'>
    <class>0x120000</class>
    <domain>0</domain><bus>17</bus><slot>2</slot><function>0</function>
    <product id='0x74b5'>Aqua Vanjaram [Instinct MI300X VF]</product>
    <vendor id='0x1002'>Advanced Micro Devices, Inc. [AMD/ATI]</vendor>
    <capability type='phys_function'>
      <address domain='0x0000' bus='0x11' slot='0x00' function='0x0'/>
    </capability>
    <iommuGroup number='13'>
      <address domain='0x0000' bus='0x11' slot='0x02' function='0x0'/>
    </iommuGroup>
    <numa node='0'/>
  </capability>
</device>"""

# Nova's fake-libvirt shape: an NVIDIA device with mdev types, no <class>.
CLASSLESS_NVIDIA = """<device>
  <name>pci_0000_06_00_0</name>
  <path>/sys/devices/pci0000:00/0000:00:06.0</path>
  <parent></parent>
  <driver><name>nvidia</name></driver>
  <capability type="pci">
    <domain>0</domain><bus>10</bus><slot>1</slot><function>5</function>
    <product id="0x0FFE">GRID M60-0B</product>
    <vendor id="0x10DE">Nvidia</vendor>
    <numa node="8"/>
    <capability type='mdev_types'>
      <type id='nvidia-11'>
        <name>GRID M60-0B</name>
        <deviceAPI>vfio-pci</deviceAPI>
        <availableInstances>16</availableInstances>
      </type>
    </capability>
  </capability>
</device>"""


def pci(bus, vendor, product, klass=None, name='x', domain='0',
        function='0'):
    klass = '<class>%s</class>' % klass if klass else ''
    return """<device><name>pci_%s</name><capability type='pci'>%s
      <domain>%s</domain><bus>%s</bus><slot>0</slot>
      <function>%s</function><product id='0x%s'>%s</product>
      <vendor id='0x%s'>v</vendor></capability></device>""" % (
        bus, klass, domain, bus, function, product, name, vendor)


class Collect:
    def __init__(self):
        self.lines = []

    def __call__(self, msg, *args):
        self.lines.append(msg % args)


class TestAcceleratorsAndClassless(testtools.TestCase):

    def build(self, xmls, extra=frozenset()):
        warn, note = Collect(), Collect()
        gpus = ls.build_gpus([ls.parse_nodedev(x) for x in xmls], extra,
                             warn=warn, note=note)
        return gpus, warn.lines, note.lines

    def test_mi300x_pf_and_vf_of_class_1200(self):
        gpus, warnings, notes = self.build([MI300X_VF, MI300X_PF])
        self.assertEqual(['0000:11:00.0'], list(gpus))
        gpu = gpus['0000:11:00.0']
        self.assertEqual(('amd', '74a1', ['0000:11:02.0'], 'amdgpu'),
                         (gpu.vendor, gpu.product_id, gpu.vfs,
                          gpu.kernel_driver))
        self.assertEqual(([], []), (warnings, notes))

    def test_classless_nvidia_with_mdev_types(self):
        gpus, warnings, notes = self.build([CLASSLESS_NVIDIA])
        gpu = gpus['0000:0a:01.5']
        self.assertEqual(['nvidia-11'], [t.id for t in gpu.mdev_types])
        self.assertEqual(([], []), (warnings, notes))

    def test_classless_known_id_is_a_gpu(self):
        gpus, _w, notes = self.build([pci(3, '10de', '2331')])
        self.assertEqual(['0000:03:00.0'], list(gpus))
        self.assertEqual([], notes)

    def test_not_offered_devices_are_said(self):
        gpus, warnings, notes = self.build([
            pci(1, '10de', '22ba', '0x040300', 'GPU audio'),
            pci(2, '10de', '9999', None, 'mystery'),
            pci(3, '8086', '7d1d', '0x120000', 'Meteor Lake NPU'),
            pci(4, '8086', '1572', '0x020000', 'X710'),
            pci(5, '8086', '2021', '0x088000', 'chipset'),
            pci(6, '15b3', '101d', '0x020000', 'CX6'),
            pci(7, '8086', '0bd5', '0x038000', 'Max 1550'),
        ])
        self.assertEqual(['0000:07:00.0'], list(gpus))
        self.assertEqual([], warnings)
        # one line per NVIDIA/AMD function and per Intel accelerator, and
        # one for the Intel functions of other classes; none for Mellanox
        self.assertEqual(4, len(notes), notes)
        self.assertIn('0000:01:00.0 (10de:22ba, GPU audio)', notes[0])
        self.assertIn('PCI class 0x0403', notes[0])
        self.assertIn('0000:02:00.0', notes[1])
        self.assertIn('no PCI class', notes[1])
        self.assertIn('0000:03:00.0', notes[2])
        self.assertIn('processing accelerator', notes[2])
        self.assertIn('2 PCI function(s)', notes[3])
        self.assertIn('0000:04:00.0 (8086:1572, class 0x0200)', notes[3])
        self.assertNotIn('15b3', ''.join(notes))

    def test_intel_accelerator_of_gpu_family(self):
        gpus, _w, notes = self.build([pci(9, '8086', '0bd5', '0x120000')])
        self.assertEqual(['0000:09:00.0'], list(gpus))


class TestImpossibleAddresses(testtools.TestCase):
    """Issue 16.9: values outside PCI ranges skip the device, named."""

    def discover(self, xmls):
        conf = self.useFixture(helpers.AgentConf()).conf

        class Source(ls.LibvirtSource):
            def list_nodedevs(self):
                return xmls

        source = Source(conf)
        return source.discover(), source.warnings

    def test_out_of_range_parts_skip_the_device(self):
        good = pci(59, '10de', '2331', '0x030200')
        cases = {
            'domain 4294967295': pci(59, '10de', '2331', '0x030200',
                                     domain='4294967295'),
            'bus 4294967295': pci(4294967295, '10de', '2331', '0x030200'),
            'function 9': pci(60, '10de', '2331', '0x030200',
                              function='9'),
            'domain -1': pci(61, '10de', '2331', '0x030200', domain='-1'),
        }
        xmls = [('pci_good', good)] + [('pci_bad_%d' % i, x) for i, x in
                                       enumerate(cases.values())]
        gpus, warnings = self.discover(xmls)
        self.assertEqual(['0000:3b:00.0'], list(gpus))
        self.assertEqual(len(cases), len(warnings), warnings)
        for i, (what, warning) in enumerate(zip(cases, warnings)):
            self.assertIn('pci_bad_%d' % i, warning)
            self.assertIn('PCI %s is outside' % what, warning)

    def test_vf_address_out_of_range_skips_the_pf(self):
        xml = MI300X_PF.replace("slot='0x02'", "slot='0x20'")
        gpus, warnings = self.discover([('pci_0000_11_00_0', xml)])
        self.assertEqual({}, gpus)
        self.assertIn('PCI slot 32 is outside 0-31', warnings[0])

    def test_the_range_edges_are_accepted(self):
        self.assertEqual('ffff:ff:1f.7', ls.pci_address(0xffff, 0xff, 0x1f,
                                                        7))


class TestSysfsAccelerators(testtools.TestCase):

    def setUp(self):
        super().setUp()
        from gpu_nova_ext.inventory import sysfs_source
        from gpu_nova_ext_dev.fakes import sysfs
        self.tree = self.useFixture(sysfs.SysfsTree())
        self.fixture = self.useFixture(helpers.AgentConf(
            sysfs_root=self.tree.root, inventory_sources=['sysfs']))
        self.source_cls = sysfs_source.SysfsVfioSource
        self.logs = self.useFixture(fixtures.FakeLogger(level='INFO'))

    def test_mi300x_pf_vf_and_a16_subsystem(self):
        self.tree.add_gpu('0000:11:00.0', '1002', '74a1', klass=0x120000,
                          driver='amdgpu')
        self.tree.add_vf('0000:11:02.0', pf='0000:11:00.0', vendor='1002',
                         device='74b5', driver='vfio-pci', klass=0x120000)
        self.tree.add_gpu('0000:3b:00.0', '10de', '25b6',
                          subsystem=('10de', '14a9'))
        self.tree.add_function('0000:3b:00.1', '10de', '22ba',
                               klass=0x040300)
        source = self.source_cls(self.fixture.conf)
        gpus = source.discover()
        self.assertEqual(['0000:11:00.0', '0000:3b:00.0'], sorted(gpus))
        self.assertEqual(['0000:11:02.0'], gpus['0000:11:00.0'].vfs)
        self.assertEqual(('10de', '14a9'),
                         (gpus['0000:3b:00.0'].subsystem_vendor_id,
                          gpus['0000:3b:00.0'].subsystem_device_id))
        self.assertEqual(1, len(source.notes))
        self.assertIn('0000:3b:00.1', source.notes[0])
        self.assertIn('0000:3b:00.1', self.logs.output)
