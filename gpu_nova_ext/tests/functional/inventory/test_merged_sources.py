# SPDX-License-Identifier: Apache-2.0

"""libvirt's test driver merged with NVML (fake library) or simulated
facts, and the ``discover`` command."""
import contextlib
import io
import json
import os

import testtools

from gpu_nova_ext.cmd import cli
from gpu_nova_ext.inventory import manager
from gpu_nova_ext_dev.fakes import nvml as fake_nvml
from gpu_nova_ext.tests.unit.inventory import helpers


class TestLibvirtWithNvml(testtools.TestCase):

    def test_a100_host(self):
        fake = self.useFixture(fake_nvml.FakeNvml([
            fake_nvml.DeviceSpec('A100_80GB_PCIE',
                                 pci_address='0000:3b:00.0'),
            fake_nvml.DeviceSpec('A100_80GB_PCIE',
                                 pci_address='0000:86:00.0')]))
        conf = self.useFixture(helpers.AgentConf(
            libvirt_uri=helpers.host_uri('a100-mdev.xml'))).conf
        inv = manager.discover(conf, sources=['libvirt', 'nvml'])
        self.assertEqual([], inv.warnings)
        state = inv.to_dict()['gpus'][0]
        self.assertEqual({
            'pci_address': '0000:3b:00.0', 'vfs': [], 'provider_uuids': [],
            'vendor': 'nvidia', 'model': 'A100_80GB_PCIE',
            'memory_mib': 81920, 'uuid': fake.devices[0].uuid,
            'numa_node': 0, 'mode': 'vgpu',
            'offered_vgpu_type': 'nvidia-471',
            'driver_version': '550.54.15', 'cuda_cc': '8.0',
            # NVML gives every type's maximum; libvirt what is left
            'vgpu_types': [
                {'id': 'nvidia-469', 'name': 'A100D-4C',
                 'framebuffer_mib': 4096, 'available': 0, 'max': 20},
                {'id': 'nvidia-470', 'name': 'A100D-8C',
                 'framebuffer_mib': 8192, 'available': 0, 'max': 10},
                {'id': 'nvidia-471', 'name': 'A100D-10C',
                 'framebuffer_mib': 10240, 'available': 6, 'max': 8},
                {'id': 'nvidia-472', 'name': 'A100D-16C',
                 'framebuffer_mib': 16384, 'available': 0, 'max': 5},
                {'id': 'nvidia-473', 'name': 'A100D-20C',
                 'framebuffer_mib': 20480, 'available': 0, 'max': 4},
                {'id': 'nvidia-474', 'name': 'A100D-40C',
                 'framebuffer_mib': 40960, 'available': 0, 'max': 2},
                {'id': 'nvidia-475', 'name': 'A100D-80C',
                 'framebuffer_mib': 81920, 'available': 0, 'max': 1}],
            'mig': {'capable': True, 'enabled': False},
            'health': {'state': 'healthy', 'reasons': []},
            'metrics': {'slowdown_temperature_c': 89,
                        'power_limit_w': 300.0}}, state)
        self.assertEqual(['libvirt', 'nvml'], inv.gpus[0].sources)

    def test_mixed_host_nvml_for_nvidia_only(self):
        self.useFixture(fake_nvml.FakeNvml([
            fake_nvml.DeviceSpec('T4', pci_address='0000:3b:00.0'),
            fake_nvml.DeviceSpec('L4', pci_address='0000:5e:00.0')]))
        conf = self.useFixture(helpers.AgentConf(
            libvirt_uri=helpers.host_uri('mixed-t4-l4-mi210.xml'))).conf
        inv = manager.discover(conf, sources=['libvirt', 'nvml'])
        self.assertEqual(
            [('0000:3b:00.0', 'TESLA_T4', 15360, 'vgpu', '7.5'),
             ('0000:5e:00.0', 'L4', 23034, 'passthrough', '8.9'),
             ('0000:c1:00.0', 'MI210', None, 'passthrough', None)],
            [(g.pci_address, g.model, g.memory_mib, g.mode, g.cuda_cc)
             for g in inv.gpus])
        # the L4 is passed through: NVML's vGPU types are not offered
        self.assertEqual([], inv.gpus[1].to_state()['vgpu_types'])


class TestLibvirtWithSimulated(testtools.TestCase):

    def test_simulator_sources(self):
        fixture = self.useFixture(helpers.AgentConf(
            libvirt_uri=helpers.host_uri('a100-mdev.xml')))
        path = os.path.join(fixture.tmp, 'gpus.yaml')
        with open(path, 'w') as f:
            f.write('"0000:3b:00.0": {name: "NVIDIA A100 80GB PCIe", '
                    'memory_mib: 81920, driver_version: "550.54.15", '
                    'cuda_cc: "8.0", health: degraded, '
                    'metrics: {utilization_pct: 10, temperature_c: 40}}\n'
                    '"0000:99:00.0": {name: "NVIDIA L4"}\n')
        fixture.set_override(fixture.conf, 'simulated_gpus_file', path)
        inv = manager.discover(fixture.conf,
                               sources=['libvirt', 'simulated'])
        a, b = inv.gpus
        self.assertEqual(('A100_80GB_PCIE', 81920, '550.54.15', 'degraded',
                          {'utilization_pct': 10, 'temperature_c': 40}),
                         (a.model, a.memory_mib, a.driver_version,
                          a.health.state, a.metrics))
        self.assertEqual((None, 'healthy'), (b.memory_mib, b.health.state))
        self.assertEqual(1, len(inv.warnings))
        self.assertIn('0000:99:00.0', inv.warnings[0])


class TestDiscoverCommand(testtools.TestCase):

    def run_cli(self, *argv):
        out, err = io.StringIO(), io.StringIO()
        fixture = self.useFixture(helpers.AgentConf())
        conf_file = os.path.join(fixture.tmp, 'agent.conf')
        with open(conf_file, 'w') as f:
            f.write('[DEFAULT]\nhost = cmp-9\n[agent]\n'
                    'inventory_sources = libvirt,nvml,sysfs\n'
                    'nova_config_file = %s\nsysfs_root = %s\n'
                    % (os.path.join(fixture.tmp, 'none.conf'),
                       os.path.join(fixture.tmp, 'sys')))
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = cli.main(['--config-file', conf_file, 'discover']
                          + list(argv))
        return rc, out.getvalue(), err.getvalue()

    def test_sample_host_json(self):
        self.useFixture(fake_nvml.FakeNvml([], library=False))
        rc, out, err = self.run_cli(
            '--libvirt-uri', 'test://' + os.path.abspath(helpers.SAMPLE_HOST),
            '--format', 'json')
        self.assertEqual(0, rc, err)
        data = json.loads(out)
        self.assertEqual('cmp-9', data['host'])
        self.assertEqual(4, len(data['gpus']))
        self.assertEqual('nvidia-471', data['gpus'][0]['offered_vgpu_type'])

    def test_sample_host_table_without_nvml(self):
        rc, out, err = self.run_cli(
            '--libvirt-uri', 'test://' + os.path.abspath(helpers.SAMPLE_HOST),
            '--nvml', 'none')
        self.assertEqual(0, rc, err)
        lines = out.splitlines()
        self.assertEqual('Host cmp-9: 4 GPU(s)', lines[0])
        self.assertTrue(lines[1].startswith('PCI ADDRESS'))
        self.assertIn('0000:3b:00.0  nvidia  A100_80GB_PCIE', out)
        self.assertIn('available 7 of 8  (offered)', out)
        self.assertNotIn('warning', out)

    def test_unreachable_libvirt_exits_2_naming_uri(self):
        rc, out, err = self.run_cli('--libvirt-uri',
                                    'test:///nonexistent/host.xml')
        self.assertEqual(2, rc)
        self.assertIn('test:///nonexistent/host.xml', err)
        self.assertEqual(1, len(err.strip().splitlines()), err)

    def test_functions_not_offered_are_said_in_both_formats(self):
        uri = helpers.host_uri('h100-passthrough.xml')
        rc, out, err = self.run_cli('--libvirt-uri', uri, '--nvml', 'none')
        self.assertEqual(0, rc, err)
        notes = [line for line in out.splitlines()
                 if line.startswith('note: ')]
        self.assertEqual(1, len(notes), out)
        self.assertIn('0000:05:00.0', notes[0])
        self.assertIn('extra_gpu_pci_ids', notes[0])
        rc, out, err = self.run_cli('--libvirt-uri', uri, '--nvml', 'none',
                                    '--format', 'json')
        self.assertEqual(0, rc, err)
        data = json.loads(out)
        self.assertEqual([], data['warnings'])
        self.assertEqual(1, len(data['notes']))
        self.assertIn('0000:05:00.0', data['notes'][0])
