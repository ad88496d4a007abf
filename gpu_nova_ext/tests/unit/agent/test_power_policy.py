# SPDX-License-Identifier: Apache-2.0

"""The power policy over the fake NVML and the fake amdgpu sysfs."""
import os

from oslotest import base as test_base
from prometheus_client import parser
import pynvml

from gpu_nova_ext.agent import exporter
from gpu_nova_ext.agent import power_policy
from gpu_nova_ext import exception
from gpu_nova_ext.inventory import base
from gpu_nova_ext.state import schema
from gpu_nova_ext.tests.unit.agent import health_base
from gpu_nova_ext.tests import privsep_fixtures
from gpu_nova_ext_dev.fakes import sysfs

AMD = '0000:c1:00.0'


class TestParse(test_base.BaseTestCase):

    def test_profiles(self):
        profiles = power_policy.parse_profiles(
            ['A100_80GB_PCIE:balanced', 'T4:60W', '*:80%'])
        a100 = profiles['A100_80GB_PCIE']
        self.assertEqual(255.0, a100.limit_w(300, 150, 300))
        self.assertEqual(150.0, power_policy.parse_profile(
            'efficiency').limit_w(200, 150, 300))     # kept in range
        self.assertEqual(300.0, power_policy.parse_profile(
            'max-performance').limit_w(250, 150, 300))
        self.assertEqual(60.0, profiles['T4'].limit_w(70, 60, 70))
        self.assertIsNone(profiles['T4'].limit_w(70, 65, 70))
        self.assertEqual('80%', profiles['*'].name)

    def test_out_of_range_refused(self):
        for value, words in (('T4:5%', 'must be 10 to 100'),
                             ('T4:120%', 'must be 10 to 100'),
                             ('T4:25000W', 'must be 10 to 2000'),
                             ('T4:turbo', 'expected one of'),
                             ('balanced', 'expected MODEL:PROFILE')):
            exc = self.assertRaises(exception.InvalidOption,
                                    power_policy.parse_profiles, [value])
            self.assertIn(words, exc.format_message())
            self.assertIn('[power] profiles', exc.format_message())

    def test_names_the_state_accepts(self):
        import re
        for name in ('balanced', '250W', '80%', '72.5W'):
            self.assertTrue(re.match(schema.POWER_PROFILE_PATTERN, name))


class TestApply(health_base.HealthTestCase):

    def setUp(self):
        super().setUp()
        self.tree = self.useFixture(sysfs.GpuTree())
        self.tree.add_amd_gpu(AMD)
        # the limits are set in this process, on the fakes
        self.useFixture(privsep_fixtures.PrivsepFixture())
        self.cfg.config(group='agent', sysfs_root=self.tree.root)
        self.cfg.config(group='power', profiles=[
            'A100_80GB_PCIE:efficiency', 'T4:max-performance',
            'MI300X:500W'])
        self.inventory = base.HostInventory(host='cmp-1', gpus=[
            base.Gpu(pci_address=d.pci_address, vendor='nvidia',
                     model=d.profile.key) for d in self.fake.devices] + [
            base.Gpu(pci_address=AMD, vendor='amd', model='MI300X')])
        pynvml.nvmlInit()
        self.addCleanup(pynvml.nvmlShutdown)
        self.policy = power_policy.PowerPolicy(self.conf)

    def cap(self):
        with open(self.tree.path(AMD, 'hwmon/power1_cap')) as f:
            return int(f.read())

    def test_applied_reported_and_reapplied_after_reload(self):
        applied = self.policy.apply(pynvml, self.inventory)
        a100 = self.fake.devices[0].handle
        self.assertEqual(210000,
                         pynvml.nvmlDeviceGetPowerManagementLimit(a100))
        self.assertEqual(500 * 10 ** 6, self.cap())
        self.assertTrue(applied['0000:3b:00.0'].changed)
        self.assertFalse(applied['0000:5e:00.0'].changed)  # T4 at max
        self.assertEqual('efficiency', self.inventory.gpus[0].power_profile)
        self.assertEqual('efficiency',
                         self.inventory.gpus[0].to_state()['power_profile'])
        self.assertEqual('500W', self.inventory.gpus[2].power_profile)
        # nothing differs: nothing set
        calls = self.fake.calls['nvmlDeviceSetPowerManagementLimit']
        self.policy.apply(pynvml, self.inventory)
        self.assertEqual(
            calls, self.fake.calls['nvmlDeviceSetPowerManagementLimit'])
        # a driver reload puts the default back; the next cycle undoes it
        self.fake.restart_driver()
        self.assertEqual(300000,
                         pynvml.nvmlDeviceGetPowerManagementLimit(a100))
        self.assertTrue(self.policy.apply(
            pynvml, self.inventory)['0000:3b:00.0'].changed)
        self.assertEqual(210000,
                         pynvml.nvmlDeviceGetPowerManagementLimit(a100))

    def test_explicit_limit_outside_the_board_refused_at_start(self):
        self.cfg.config(group='power', profiles=['A100_80GB_PCIE:100W'])
        policy = power_policy.PowerPolicy(self.conf)
        exc = self.assertRaises(exception.InvalidOption, policy.check,
                                pynvml, self.inventory)
        self.assertIn('allows 150 to 300 W', exc.format_message())

    def test_nvml_refusal_said_and_profile_not_claimed(self):
        self.fake.set_error(0, 'nvmlDeviceSetPowerManagementLimit',
                            pynvml.NVML_ERROR_NO_PERMISSION)
        applied = self.policy.apply(pynvml, self.inventory)
        self.assertIn('NVML error %d' % pynvml.NVML_ERROR_NO_PERMISSION,
                      applied['0000:3b:00.0'].error)
        self.assertIsNone(self.inventory.gpus[0].power_profile)
        self.assertNotIn('power_profile', self.inventory.gpus[0].to_state())

    def test_exporter_series(self):
        applied = self.policy.apply(pynvml, self.inventory)
        from gpu_nova_ext.agent import monitor
        m = monitor.HealthMonitor(self.conf, lambda: None,
                                  clock=lambda: 0.0,
                                  notifier=health_base.RecordingNotifier())
        self.assertTrue(m.open())
        self.addCleanup(m.stop)
        m.exporter = exporter.Exporter('cmp-1', '127.0.0.1', 0)
        m.exporter.set_power(applied)
        m.exporter.set_mig({'0000:3b:00.0': 'pending'})
        self.fake.set_metrics(0, energy_mj=5000000)
        m.sample_once(now=0)
        fams = {f.name: f for f in parser.text_string_to_metric_families(
            m.exporter.render())}
        profile = {s.labels['pci_bus_id']: s.labels['profile']
                   for s in fams['gpu_nova_ext_power_profile'].samples}
        self.assertEqual('efficiency', profile['00000000:3B:00.0'])
        target = {s.labels['pci_bus_id']: s.value for s in
                  fams['gpu_nova_ext_power_limit_target_watts'].samples}
        self.assertEqual(210.0, target['00000000:3B:00.0'])
        energy = {s.labels['pci_bus_id']: s.value for s in
                  fams['gpu_nova_ext_energy_joules'].samples}
        self.assertGreaterEqual(energy['00000000:3B:00.0'], 5000.0)
        mig = {(s.labels['pci_bus_id'], s.labels['state']): s.value for s in
               fams['gpu_nova_ext_mig_layout_state'].samples}
        self.assertEqual(1.0, mig[('00000000:3B:00.0', 'pending')])
        self.assertEqual(0.0, mig[('00000000:3B:00.0', 'in_line')])
        self.assertNotIn(('00000000:5E:00.0', 'pending'), mig)
        self.assertTrue(os.path.isdir(self.tree.root))
