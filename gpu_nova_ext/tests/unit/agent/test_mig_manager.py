# SPDX-License-Identifier: Apache-2.0

"""MIG layouts planned and applied over the fake NVML."""
from oslo_config import cfg
from oslo_config import fixture as cfg_fixture
from oslotest import base
import pynvml

from gpu_nova_ext.agent import attribution
from gpu_nova_ext.agent import mig_manager
from gpu_nova_ext import conf as gconf
from gpu_nova_ext import exception
from gpu_nova_ext.inventory import base as inv
from gpu_nova_ext.tests import privsep_fixtures
from gpu_nova_ext_dev.fakes import nvml as fake_nvml

BOARDS = ['A100_80GB_PCIE', 'A30', 'H100_SXM5_80GB', 'H200', 'B200',
          'A100_SXM4_40GB']
MODELS = ['A100_80GB_PCIE', 'A30', 'H100_80GB_HBM3', 'H200', 'B200',
          'A100_SXM4_40GB']
LAYOUTS = ['A100_80GB_PCIE:3g.40gb=1,2g.20gb=1,1g.10gb=2',
           'A30:2g.12gb=1,1g.6gb=2',
           'H100_80GB_HBM3:1g.10gb=7',
           'H200:4g.71gb=1,3g.71gb=1',
           'B200:1g.45gb=2,2g.45gb=2',
           'A100_SXM4_40GB:7g.40gb=1']


class MigManagerTest(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(cfg_fixture.Config(cfg.ConfigOpts()))
        gconf.register_agent_opts(self.conf.conf)
        self.conf.config(nova_config_file='', nova_config_dir='',
                         group='agent')
        self.conf.config(layouts=LAYOUTS, group='mig')
        self.fake = self.useFixture(fake_nvml.FakeNvml(BOARDS))
        # the changes run in this process, on the fake NVML
        self.useFixture(privsep_fixtures.PrivsepFixture())
        pynvml.nvmlInit()
        self.addCleanup(pynvml.nvmlShutdown)
        self.inventory = inv.HostInventory(host='cn1', gpus=[
            inv.Gpu(pci_address=d.pci_address, vendor='nvidia', model=m,
                    mode='vgpu', provider_uuids=['rp-%d' % i])
            for i, (d, m) in enumerate(zip(self.fake.devices, MODELS))])
        self.usages = {'rp-%d' % i: {'VGPU': 0} for i in range(6)}
        self.holders = attribution.Holders()
        self.manager = mig_manager.MigManager(self.conf.conf)

    def converge(self):
        return self.manager.converge(self.inventory, pynvml, self.usages,
                                     self.holders)

    def test_every_model_laid_out_then_in_line(self):
        self.assertTrue(self.converge())
        self.assertEqual([('1g.10gb', 2), ('1g.10gb', 3), ('2g.20gb', 0),
                          ('3g.40gb', 4)], self.fake.gpu_instances(0))
        self.assertEqual(7, len(self.fake.gpu_instances(2)))
        self.assertEqual([('3g.71gb', 4), ('4g.71gb', 0)],
                         self.fake.gpu_instances(3))
        self.assertEqual([('7g.40gb', 0)], self.fake.gpu_instances(5))
        for outcome in self.manager.last:
            self.assertEqual([], outcome.result.failed)
            self.assertIn('enabled MIG mode', outcome.result.done)
        self.assertFalse(self.converge())
        self.assertTrue(all(o.plan.in_line for o in self.manager.last))

    def test_gpu_with_allocations_untouched(self):
        self.usages['rp-0'] = {'VGPU': 1}
        self.converge()
        self.assertEqual([0, 0], pynvml.nvmlDeviceGetMigMode(
            self.fake.devices[0].handle))
        plan = self.manager.last[0].plan
        self.assertIn('holds allocations in Placement (provider rp-0: '
                      'VGPU=1)', plan.blocked[0])
        self.assertIsNone(self.manager.last[0].result)
        self.assertEqual(3, len(self.fake.gpu_instances(1)))

    def test_gpu_held_by_a_server_untouched(self):
        self.holders.by_pci[self.fake.devices[1].pci_address] = 'vm-1'
        self.converge()
        self.assertEqual([], self.fake.gpu_instances(1))
        self.assertIn('server vm-1 holds', self.manager.last[1].plan
                      .blocked[0])

    def test_unknown_placement_blocks_everything(self):
        self.manager.converge(self.inventory, pynvml, None, self.holders)
        self.assertTrue(all(o.result is None for o in self.manager.last))
        self.assertEqual([], self.fake.gpu_instances(0))

    def test_reset_required_is_pending(self):
        self.fake.block_mig_activation(
            0, pynvml.NVML_ERROR_RESET_REQUIRED)
        self.converge()
        result = self.manager.last[0].result
        self.assertIn('pending until a GPU reset (GPU reset required)',
                      result.pending[0])
        self.converge()
        self.assertIn('needs a reset', self.manager.last[0].plan.pending[0])
        self.fake.reset_gpu(0)
        self.converge()
        self.assertEqual(4, len(self.fake.gpu_instances(0)))

    def test_instance_in_use_fails_and_keeps_the_rest(self):
        self.converge()
        self.conf.config(layouts=['A100_80GB_PCIE:7g.80gb=1'], group='mig')
        manager = mig_manager.MigManager(self.conf.conf)
        gi_id = next(iter(self.fake.devices[0].gpu_instances))
        self.fake.use_gpu_instance(0, gi_id)
        manager.converge(self.inventory, pynvml, self.usages, self.holders)
        result = manager.last[0].result
        self.assertIn('in use', result.failed[0])
        self.assertEqual(4, len(self.fake.gpu_instances(0)) +
                         len(result.done))

    def test_apply_off_changes_nothing(self):
        self.conf.config(apply=False, group='mig')
        manager = mig_manager.MigManager(self.conf.conf)
        self.assertFalse(manager.converge(self.inventory, pynvml,
                                          self.usages, self.holders))
        self.assertEqual([], self.fake.gpu_instances(0))
        self.assertEqual('enable MIG mode',
                         manager.last[0].plan.describe_steps()[0])

    def test_bad_layout_refused_at_start(self):
        self.conf.config(layouts=['A30:7g.24gb=1'], group='mig')
        self.assertRaises(exception.InvalidOption, mig_manager.MigManager,
                          self.conf.conf)

    def test_gpu_nvml_cannot_read_is_not_touched(self):
        self.fake.set_error(1, 'nvmlDeviceGetMigMode',
                            pynvml.NVML_ERROR_UNKNOWN)
        self.converge()
        plan = self.manager.last[1].plan
        self.assertIn('NVML cannot read it', plan.blocked[0])
        self.assertIsNone(self.manager.last[1].result)
        self.assertEqual([], self.fake.gpu_instances(1))
        # the others are laid out
        self.assertEqual(4, len(self.fake.gpu_instances(0)))

    def test_states_the_exporter_reports(self):
        from gpu_nova_ext.agent import exporter
        self.usages['rp-0'] = {'VGPU': 1}
        self.fake.block_mig_activation(1, pynvml.NVML_ERROR_IN_USE)
        self.converge()
        states = {o.plan.pci_address: o.status for o in self.manager.last}
        self.assertEqual('blocked', states['0000:3b:00.0'])
        self.assertEqual('pending', states['0000:5e:00.0'])
        self.assertEqual('changed', states['0000:86:00.0'])
        self.assertEqual(exporter.MIG_STATES, mig_manager.STATES)
        self.converge()
        states = {o.plan.pci_address: o.status for o in self.manager.last}
        self.assertEqual('in_line', states['0000:86:00.0'])
        self.assertEqual('pending', states['0000:5e:00.0'])
