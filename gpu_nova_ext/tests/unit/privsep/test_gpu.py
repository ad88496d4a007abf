# SPDX-License-Identifier: Apache-2.0

"""The privileged GPU setters, in process and through a privsep daemon."""
import os

from oslo_config import cfg
from oslo_config import fixture as cfg_fixture
from oslotest import base
import pynvml

from gpu_nova_ext.agent import attribution
from gpu_nova_ext.agent import mig_manager
from gpu_nova_ext.agent import power_policy
from gpu_nova_ext import conf as gconf
from gpu_nova_ext.inventory import base as inv
from gpu_nova_ext.inventory import mig_profiles
from gpu_nova_ext import privsep
from gpu_nova_ext.privsep import gpu
from gpu_nova_ext.tests import privsep_fixtures as fixtures
from gpu_nova_ext_dev.fakes import nvml as fake_nvml
from gpu_nova_ext_dev.fakes import sysfs

A100, L4 = '0000:3b:00.0', '0000:5e:00.0'
AMD = '0000:c1:00.0'
SETTERS = ('nvmlDeviceSetMigMode', 'nvmlDeviceCreateGpuInstanceWithPlacement',
           'nvmlGpuInstanceDestroy', 'nvmlDeviceSetPowerManagementLimit')


class GpuTestCase(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.fake = self.useFixture(fake_nvml.FakeNvml(['A100_80GB_PCIE',
                                                        'L4']))
        pynvml.nvmlInit()
        self.addCleanup(pynvml.nvmlShutdown)
        self.tree = self.useFixture(sysfs.GpuTree())
        self.tree.add_amd_gpu(AMD)

    def cap(self):
        with open(self.tree.path(AMD, 'hwmon/power1_cap')) as f:
            return int(f.read())

    def limit(self, index):
        return pynvml.nvmlDeviceGetPowerManagementLimit(
            self.fake.devices[index].handle)


class TestInProcess(GpuTestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.PrivsepFixture())

    def test_mig_mode_and_a_gpu_instance(self):
        self.assertEqual(pynvml.NVML_SUCCESS, gpu.set_mig_mode(A100, True))
        self.assertEqual(1, self.fake.devices[0].mig_current)
        profile = mig_profiles.board_for_model('A100_80GB_PCIE').profile(
            '3g.40gb')
        driver_id = pynvml.nvmlDeviceGetGpuInstanceProfileInfo(
            self.fake.devices[0].handle, profile.nvml_index).id
        gi_id = gpu.create_gpu_instance(A100, driver_id, 4,
                                        profile.memory_slices)
        self.assertEqual([('3g.40gb', 4)], self.fake.gpu_instances(0))
        gpu.destroy_gpu_instance(A100, gi_id)
        self.assertEqual([], self.fake.gpu_instances(0))

    def test_nvml_error_comes_back_as_its_code(self):
        exc = self.assertRaises(gpu.NvmlCallFailed, gpu.set_mig_mode, L4,
                                True)
        self.assertEqual(pynvml.NVML_ERROR_NOT_SUPPORTED, exc.value)
        # the agent gets pynvml's typed error back from the code
        self.assertIsInstance(pynvml.NVMLError(exc.value),
                              pynvml.NVMLError_NotSupported)
        exc = self.assertRaises(gpu.NvmlCallFailed, gpu.destroy_gpu_instance,
                                A100, 1)        # MIG off: no instance
        self.assertEqual(pynvml.NVML_ERROR_NOT_SUPPORTED, exc.value)

    def test_power_limit(self):
        gpu.set_power_limit(A100, 200000)
        self.assertEqual(200000, self.limit(0))

    def test_arguments_refused(self):
        for call in ((gpu.set_power_limit, A100, -1),
                     (gpu.set_power_limit, A100, True),
                     (gpu.set_power_limit, A100, 2.5e5),
                     (gpu.set_mig_mode, '/etc/passwd', True),
                     (gpu.set_hwmon_power_cap, self.tree.root, AMD, '1')):
            self.assertRaises(ValueError, *call)
        self.assertEqual(0, sum(self.fake.calls[n] for n in SETTERS))

    def test_hwmon_power_cap(self):
        gpu.set_hwmon_power_cap(self.tree.root, AMD, 300 * 10 ** 6)
        self.assertEqual(300 * 10 ** 6, self.cap())

    def test_hwmon_write_confined_to_the_gpus_attribute(self):
        outside = self.useFixture(sysfs.GpuTree()).root
        victim = os.path.join(outside, 'victim')
        with open(victim, 'w') as f:
            f.write('keep\n')
        path = self.tree.path(AMD, 'hwmon/power1_cap')
        os.unlink(path)
        os.symlink(victim, path)
        exc = self.assertRaises(gpu.RefusedWrite, gpu.set_hwmon_power_cap,
                                self.tree.root, AMD, 1)
        self.assertIn('resolves outside', str(exc))
        with open(victim) as f:
            self.assertEqual('keep\n', f.read())
        self.assertRaises(gpu.RefusedWrite, gpu.set_hwmon_power_cap,
                          self.tree.root, '0000:c2:00.0', 1)
        self.assertRaises(gpu.RefusedWrite, gpu.hwmon_attribute,
                          self.tree.root, AMD, 'power1_cap_max')


class TestThroughTheDaemon(GpuTestCase):
    """A forked privsep daemon: what the agent process does not do.

    The daemon changes its own copy of the fake NVML: the test's copy
    counts no setter call, so each change below was made by the daemon.
    """

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.ForkedPrivsepFixture())
        self.conf = self.useFixture(cfg_fixture.Config(cfg.ConfigOpts()))
        gconf.register_agent_opts(self.conf.conf)
        self.conf.config(nova_config_file='', nova_config_dir='',
                         sysfs_root=self.tree.root, group='agent')

    def assertNoSetterCalledHere(self):
        self.assertEqual({}, {n: self.fake.calls[n] for n in SETTERS
                              if self.fake.calls[n]})

    def test_mig_layout_applied_by_the_daemon(self):
        self.conf.config(layouts=['A100_80GB_PCIE:3g.40gb=2'], group='mig')
        manager = mig_manager.MigManager(self.conf.conf)
        inventory = inv.HostInventory(host='cn1', gpus=[inv.Gpu(
            pci_address=A100, vendor='nvidia', model='A100_80GB_PCIE',
            mode='vgpu', provider_uuids=['rp-0'])])
        self.assertTrue(manager.converge(inventory, pynvml, {'rp-0': {}},
                                         attribution.Holders()))
        result = manager.last[0].result
        self.assertEqual([], result.failed)
        self.assertEqual(['enabled MIG mode', 'created 3g.40gb at slice 0',
                          'created 3g.40gb at slice 4'], result.done)
        self.assertNoSetterCalledHere()
        self.assertEqual(0, self.fake.devices[0].mig_current)

    def test_nvml_error_crosses_as_its_code(self):
        exc = self.assertRaises(gpu.NvmlCallFailed, gpu.set_mig_mode, L4,
                                True)
        self.assertEqual(pynvml.NVML_ERROR_NOT_SUPPORTED, exc.value)
        self.assertRaises(ValueError, gpu.set_power_limit, A100, -1)
        self.assertRaises(gpu.RefusedWrite, gpu.set_hwmon_power_cap,
                          self.tree.root, '0000:c2:00.0', 1)

    def test_power_profiles_applied_by_the_daemon(self):
        self.conf.config(profiles=['A100_80GB_PCIE:efficiency',
                                   'MI300X:500W'], group='power')
        policy = power_policy.PowerPolicy(self.conf.conf)
        inventory = inv.HostInventory(host='cn1', gpus=[
            inv.Gpu(pci_address=A100, vendor='nvidia',
                    model='A100_80GB_PCIE'),
            inv.Gpu(pci_address=AMD, vendor='amd', model='MI300X')])
        applied = policy.apply(pynvml, inventory)
        self.assertEqual((True, None), (applied[A100].changed,
                                        applied[A100].error))
        self.assertEqual((True, None), (applied[AMD].changed,
                                        applied[AMD].error))
        self.assertEqual(500 * 10 ** 6, self.cap())    # the same files
        self.assertNoSetterCalledHere()
        self.assertEqual(300000, self.limit(0))        # the default here


class TestDaemonUnavailable(GpuTestCase):
    """The helper command fails (no sudoers entry): said, nothing changed."""

    def setUp(self):
        super().setUp()
        self.useFixture(cfg_fixture.Config(cfg.CONF))
        self.addCleanup(privsep.sys_admin_pctxt.stop)
        cfg.CONF.set_override('helper_command', 'false', group=privsep.GROUP)
        self.conf = self.useFixture(cfg_fixture.Config(cfg.ConfigOpts()))
        gconf.register_agent_opts(self.conf.conf)
        self.conf.config(nova_config_file='', nova_config_dir='',
                         sysfs_root=self.tree.root, group='agent')

    def test_mig_and_power_say_the_daemon_did_not_run(self):
        self.conf.config(layouts=['A100_80GB_PCIE:3g.40gb=2'], group='mig')
        self.conf.config(profiles=['A100_80GB_PCIE:efficiency',
                                   'MI300X:500W'], group='power')
        inventory = inv.HostInventory(host='cn1', gpus=[
            inv.Gpu(pci_address=A100, vendor='nvidia',
                    model='A100_80GB_PCIE', mode='vgpu',
                    provider_uuids=['rp-0']),
            inv.Gpu(pci_address=AMD, vendor='amd', model='MI300X')])
        manager = mig_manager.MigManager(self.conf.conf)
        self.assertFalse(manager.converge(inventory, pynvml, {'rp-0': {}},
                                          attribution.Holders()))
        failed = manager.last[0].result.failed
        self.assertEqual(1, len(failed))
        self.assertIn('enable MIG mode: the privileged daemon did not run '
                      'it (privsep helper command exited non-zero (1))',
                      failed[0])
        self.assertIn('/etc/sudoers.d/gpu-nova-agent', failed[0])
        applied = power_policy.PowerPolicy(self.conf.conf).apply(pynvml,
                                                                 inventory)
        for address in (A100, AMD):
            self.assertIn('the privileged daemon did not run it',
                          applied[address].error)
        self.assertEqual(0, self.fake.devices[0].mig_current)
        self.assertEqual(750 * 10 ** 6, self.cap())
