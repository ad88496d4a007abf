# SPDX-License-Identifier: Apache-2.0

"""Scenario checks: each mistake stops before any boot, naming the file,
the entry and the fix."""
import copy
import os

import testtools
import yaml

from gpu_nova_ext import exception
from gpu_nova_ext.simulate import host_xml
from gpu_nova_ext.simulate import scenario as scn

XML = """<node>
  <device>
    <name>pci_0000_3b_00_0</name>
    <parent>computer</parent>
    <capability type='pci'>
      <class>0x030200</class>
      <domain>0</domain><bus>59</bus><slot>0</slot><function>0</function>
      <product id='0x20b5'>GA100 [A100 PCIe 80GB]</product>
      <vendor id='0x10de'>NVIDIA Corporation</vendor>
      <capability type='mdev_types'>
        <type id='nvidia-471'><name>A100D-10C</name>
          <deviceAPI>vfio-pci</deviceAPI>
          <availableInstances>8</availableInstances></type>
      </capability>
      <numa node='1'/>
    </capability>
  </device>
</node>
"""

BASE = {
    'hosts': [{
        'name': 'cmp-1',
        'libvirt_xml_inline': XML,
        'nova_gpu_mode': 'vgpu',
        'enabled_mdev_types': ['nvidia-471'],
        'gpus': {'0000:3b:00.0': {'name': 'NVIDIA A100 80GB PCIe',
                                  'memory_mib': 81920,
                                  'metrics': {'utilization_pct': 5}}},
    }],
    'flavors': [{'name': 'vgpu.a100', 'vcpus': 8, 'ram_mb': 32768,
                 'extra_specs': {'resources:VGPU': 1}}],
    'boots': [{'flavor': 'vgpu.a100', 'count': 2},
              {'event': {'host': 'cmp-1', 'gpu': '3b:00.0',
                         'health': 'unhealthy'}}],
}
PATH = '/tmp/scenario-under-test.yaml'


class TestScenarioLoad(testtools.TestCase):

    def _data(self):
        return copy.deepcopy(BASE)

    def assertError(self, data, entry, *words):
        exc = self.assertRaises(exception.ScenarioError, scn.from_dict,
                                data, PATH)
        message = str(exc)
        self.assertIn(PATH, message)
        self.assertIn(entry, message)
        for word in words:
            self.assertIn(word, message)
        return message

    def test_valid(self):
        s = scn.from_dict(self._data(), PATH)
        host = s.host('cmp-1')
        self.assertEqual(['0000:3b:00.0'], list(host.gpus))
        self.assertEqual(1, host.pci_functions[0].numa_node)
        self.assertEqual('10de', host.pci_functions[0].vendor_id)
        self.assertEqual(['nvidia-471'], host.pci_functions[0].mdev_types)
        self.assertEqual({'resources:VGPU': '1'},
                         s.flavors['vgpu.a100'].extra_specs)
        boot, event = s.steps
        self.assertEqual(2, boot.count)
        self.assertEqual('0000:3b:00.0', event.gpu)
        self.assertEqual('unhealthy', event.health)
        self.assertEqual(1, event.index)

    def test_shipped_scenarios_load(self):
        for name in ('default.yaml', 'example.yaml', 'remediation.yaml'):
            s = scn.load(os.path.join(scn.SCENARIO_DIR, name))
            self.assertTrue(s.hosts)
        self.assertEqual(scn.DEFAULT_SCENARIO, scn.load(None).path)

    def test_unknown_top_key(self):
        data = self._data()
        data['flavours'] = []
        self.assertError(data, 'top level', "'flavours'", 'Allowed keys')

    def test_unknown_host_key(self):
        data = self._data()
        data['hosts'][0]['cpus'] = 8
        self.assertError(data, 'hosts[0]:', "unknown key 'cpus'",
                         'Allowed keys', 'vcpus')

    def test_unknown_gpu_fact(self):
        data = self._data()
        data['hosts'][0]['gpus']['0000:3b:00.0']['temp'] = 40
        self.assertError(data, 'gpus[0000:3b:00.0]', "'temp'")

    def test_bad_gpu_fact_value(self):
        data = self._data()
        data['hosts'][0]['gpus']['0000:3b:00.0']['health'] = 'sickly'
        self.assertError(data, 'gpus[0000:3b:00.0]', 'sickly')

    def test_gpu_not_in_xml(self):
        data = self._data()
        data['hosts'][0]['gpus']['0000:99:00.0'] = {}
        self.assertError(data, 'gpus[0000:99:00.0]', 'no PCI device',
                         '0000:3b:00.0')

    def test_bad_pci_address(self):
        data = self._data()
        data['hosts'][0]['gpus']['gpu0'] = {}
        self.assertError(data, 'hosts[0].gpus.gpu0:', 'not a PCI address',
                         '0000:3b:00.0')

    def test_bad_xml(self):
        data = self._data()
        data['hosts'][0]['libvirt_xml_inline'] = XML.replace('</node>', '')
        self.assertError(data, 'hosts[0].libvirt_xml:',
                         'bad host XML', 'line')

    def test_xml_not_a_node(self):
        data = self._data()
        data['hosts'][0]['libvirt_xml_inline'] = '<domain/>'
        self.assertError(data, 'libvirt_xml', '<domain>', '<node>')

    def test_missing_xml_file_named(self):
        data = self._data()
        del data['hosts'][0]['libvirt_xml_inline']
        data['hosts'][0]['libvirt_xml'] = 'hosts/nope.xml'
        self.assertError(data, 'libvirt_xml', '/tmp/hosts/nope.xml',
                         'relative to the scenario')

    def test_both_xml_forms(self):
        data = self._data()
        data['hosts'][0]['libvirt_xml'] = 'x.xml'
        self.assertError(data, 'hosts[0]:', 'exactly one', 'libvirt_xml',
                         'libvirt_xml_inline')

    def test_vgpu_mode_needs_types(self):
        data = self._data()
        del data['hosts'][0]['enabled_mdev_types']
        self.assertError(data, 'enabled_mdev_types', 'enabled_mdev_types')

    def test_enabled_type_not_offered(self):
        data = self._data()
        data['hosts'][0]['enabled_mdev_types'] = ['nvidia-999']
        self.assertError(data, 'enabled_mdev_types', 'nvidia-999',
                         'nvidia-471')

    def test_bad_mode(self):
        data = self._data()
        data['hosts'][0]['nova_gpu_mode'] = 'sriov'
        self.assertError(data, 'nova_gpu_mode', "'sriov'", 'vgpu, pci, none')

    def test_duplicate_host(self):
        data = self._data()
        data['hosts'].append(copy.deepcopy(data['hosts'][0]))
        self.assertError(data, 'hosts[1]', 'unique')

    def test_unknown_flavor(self):
        data = self._data()
        data['boots'].append({'flavor': 'vgpu.h100'})
        self.assertError(data, 'boots[2].flavor', "'vgpu.h100'",
                         'vgpu.a100')

    def test_flavor_needs_vcpus(self):
        data = self._data()
        del data['flavors'][0]['vcpus']
        self.assertError(data, 'flavors[0]:', "missing required key "
                         "'vcpus'")

    def test_bad_count(self):
        data = self._data()
        data['boots'][0]['count'] = 0
        self.assertError(data, 'boots[0].count', 'at least 1')

    def test_bad_extra_spec_value_type(self):
        data = self._data()
        data['flavors'][0]['extra_specs']['gpu:model'] = ['A100']
        self.assertError(data, 'extra_specs[gpu:model]', 'strings')

    def test_event_unknown_host(self):
        data = self._data()
        data['boots'][1]['event']['host'] = 'cmp-9'
        self.assertError(data, 'boots[1].event.host', "'cmp-9'", 'cmp-1')

    def test_event_unknown_gpu(self):
        data = self._data()
        data['boots'][1]['event']['gpu'] = '0000:3c:00.0'
        self.assertError(data, 'boots[1].event.gpu', '0000:3c:00.0',
                         '0000:3b:00.0')

    def test_event_changes_something(self):
        data = self._data()
        del data['boots'][1]['event']['health']
        self.assertError(data, 'boots[1].event', 'health')

    def test_event_with_boot_keys(self):
        data = self._data()
        data['boots'][1]['flavor'] = 'vgpu.a100'
        self.assertError(data, 'boots[1]', 'with "event:" holds nothing else')

    def test_yaml_syntax_error_has_position(self):
        path = self.useFixture(_TempFile('hosts: [\n')).path
        exc = self.assertRaises(exception.ScenarioError, scn.load, path)
        self.assertIn(path, str(exc))
        self.assertIn('line', str(exc))

    def test_missing_file(self):
        exc = self.assertRaises(exception.ScenarioError, scn.load,
                                '/nonexistent/scenario.yaml')
        self.assertIn('/nonexistent/scenario.yaml', str(exc))

    def test_relative_xml_from_file(self):
        fixture = self.useFixture(_TempFile(yaml.safe_dump(self._data())))
        with open(os.path.join(fixture.dir, 'h.xml'), 'w') as f:
            f.write(XML)
        data = self._data()
        del data['hosts'][0]['libvirt_xml_inline']
        data['hosts'][0]['libvirt_xml'] = 'h.xml'
        with open(fixture.path, 'w') as f:
            yaml.safe_dump(data, f)
        s = scn.load(fixture.path)
        self.assertEqual(os.path.join(fixture.dir, 'h.xml'),
                         s.hosts[0].xml_source)


class _TempFile:
    """A scenario file in a temporary directory (fixtures-style)."""

    def __init__(self, text):
        self.text = text

    def setUp(self):
        import tempfile
        self.dir = tempfile.mkdtemp()
        self.path = os.path.join(self.dir, 'scenario.yaml')
        with open(self.path, 'w') as f:
            f.write(self.text)

    def cleanUp(self):
        import shutil
        shutil.rmtree(self.dir, ignore_errors=True)

    def getDetails(self):
        return {}


class TestHostXmlGpus(testtools.TestCase):
    """The simulator tells GPUs in a host XML by the agent's own rule."""

    def _func(self, vendor, product, pci_class, mdev_types=()):
        return host_xml.PciFunction(
            address='0000:3b:00.0', vendor_id=vendor, product_id=product,
            pci_class=pci_class, mdev_types=list(mdev_types))

    def test_accelerator_class_amd_is_a_gpu(self):
        # MI300X PFs and VFs report processing accelerator, 0x120000
        self.assertTrue(self._func('1002', '74a1', '0x120000').is_gpu)

    def test_classless_nvidia_with_mdev_types_is_a_gpu(self):
        self.assertTrue(
            self._func('10de', 'ffff', '', ['nvidia-471']).is_gpu)

    def test_network_function_of_a_gpu_vendor_is_not(self):
        self.assertFalse(self._func('8086', '1572', '0x020000').is_gpu)

    def test_malformed_class_is_judged_as_no_class(self):
        self.assertFalse(self._func('10de', 'ffff', 'display').is_gpu)
