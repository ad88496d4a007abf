# SPDX-License-Identifier: Apache-2.0

"""MIG layouts against a real Placement, libvirt's test driver, fake NVML.

The agent lays out the GPU nobody uses and leaves the one holding an
allocation alone; ``gpu-nova-ext mig plan`` says both.
"""
import contextlib
import io
import json

import fixtures
import pynvml

from gpu_nova_ext.agent import service
from gpu_nova_ext.cmd import cli
from gpu_nova_ext_dev.fakes import nvml as fake_nvml
from gpu_nova_ext.simulate import compute_providers
from gpu_nova_ext.tests.functional.placement import base

LAYOUT = 'A100_80GB_PCIE:3g.40gb=2'


class TestMigLayouts(base.PlacementTestCase):

    def setUp(self):
        super().setUp()
        self.addrs = base.addresses(2)
        self.fake = self.useFixture(fake_nvml.FakeNvml([
            fake_nvml.DeviceSpec('A100_80GB_PCIE', pci_address=a)
            for a in self.addrs]))
        self.root, self.pgpus = self.vgpu_host(2)
        compute_providers.claim(
            self.nova, 'a0d3c3c8-8a8b-4d0e-9f3e-1b2c3d4e5f60',
            {self.pgpus[self.addrs[0]]: {'VGPU': 1}})
        self.conf = self.make_conf(
            agent={'libvirt_uri': 'test:///default',
                   'nova_config_file': '', 'nova_config_dir': ''},
            mig={'layouts': LAYOUT})
        self.useFixture(fixtures.MonkeyPatch(
            'gpu_nova_ext.agent.service._default_discover',
            lambda conf: base.make_inventory(conf.host, self.addrs)))

    def test_agent_lays_out_only_the_free_gpu(self):
        agent = service.AgentService(self.conf, state_client=None,
                                     monitor=None)
        agent.run_cycle(cast=False)
        self.assertTrue(agent.mig.cycle(agent.last_inventory, agent.client))
        self.assertEqual([], self.fake.gpu_instances(0))
        self.assertEqual([0, 0], [self.fake.devices[0].mig_current,
                                  self.fake.devices[0].mig_pending])
        self.assertEqual([('3g.40gb', 0), ('3g.40gb', 4)],
                         self.fake.gpu_instances(1))
        blocked = agent.mig.last[0].plan.blocked
        self.assertEqual(1, len(blocked))
        self.assertIn('holds allocations in Placement (provider %s: '
                      'VGPU=1)' % self.pgpus[self.addrs[0]], blocked[0])

    def test_plan_command_changes_nothing_and_says_why(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = cli.main(['--config-file', self.conf.config_file[0],
                           'mig', 'plan', '--format', 'json'])
        self.assertEqual(0, rc)
        data = json.loads(out.getvalue())
        self.assertEqual([], data['warnings'])
        busy, free = data['gpus']
        self.assertEqual([], busy['would'])
        self.assertIn('holds allocations in Placement', busy['cannot'][0])
        self.assertIn('would enable MIG mode', busy['cannot'][0])
        self.assertEqual(['enable MIG mode', 'create 3g.40gb at slice 0',
                          'create 3g.40gb at slice 4'], free['would'])
        self.assertEqual([], self.fake.gpu_instances(1))
        pynvml.nvmlInit()
        self.addCleanup(pynvml.nvmlShutdown)
        self.assertEqual([0, 0], pynvml.nvmlDeviceGetMigMode(
            self.fake.devices[1].handle))

    def test_plan_table(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = cli.main(['--config-file', self.conf.config_file[0],
                           'mig', 'plan'])
        self.assertEqual(0, rc)
        text = out.getvalue()
        self.assertIn('Host cmp-1: 2 GPU(s) with a MIG layout', text)
        self.assertIn('0000:3b:00.0  A100_80GB_PCIE  disabled  3g.40gb=2  '
                      'model', text)
        self.assertIn('    cannot: holds allocations in Placement', text)
        self.assertIn('    would create 3g.40gb at slice 4', text)


AGG = '6f1c2f4e-2b7e-4a43-9a0a-3c1f0e9d8b71'
AGG2 = 'b3a0c1d2-5e6f-4a7b-8c9d-0e1f2a3b4c5d'


class TestLayoutAndPowerOverrides(base.PlacementTestCase):
    """host > aggregate > model, the aggregates read from Placement."""

    def setUp(self):
        super().setUp()
        self.addrs = base.addresses(1)
        self.fake = self.useFixture(fake_nvml.FakeNvml([
            fake_nvml.DeviceSpec('A100_80GB_PCIE', pci_address=a)
            for a in self.addrs]))
        self.root, self.pgpus = self.vgpu_host(1)
        self.useFixture(fixtures.MonkeyPatch(
            'gpu_nova_ext.agent.service._default_discover',
            lambda conf: base.make_inventory(conf.host, self.addrs)))
        pynvml.nvmlInit()
        self.addCleanup(pynvml.nvmlShutdown)

    def join(self, *aggregates):
        """What Nova does when the host joins host aggregates."""
        gen = self.client.get('/resource_providers/%s' % self.root,
                              version='1.19')['generation']
        self.nova.put('/resource_providers/%s/aggregates' % self.root,
                      {'aggregates': list(aggregates),
                       'resource_provider_generation': gen},
                      version='1.19')

    def agent(self, mig=None, power=None, more=()):
        """An agent after one cycle; ``more``: lines for the last group."""
        groups = {'agent': {'libvirt_uri': 'test:///default',
                            'nova_config_file': '',
                            'nova_config_dir': ''}}
        if mig:
            groups['mig'] = mig
        if power:
            groups['power'] = power
        self.conf = self.make_conf(**groups)
        if more:
            # a MultiStrOpt given twice (write_conf joins lists with ",")
            path = self.conf.config_file[0]
            with open(path, 'a') as f:
                f.write(''.join(line + '\n' for line in more))
            self.conf = base.load_conf(path)
        agent = service.AgentService(self.conf, state_client=None,
                                     monitor=None)
        agent.run_cycle(cast=False)
        agent.refresh_aggregates()
        return agent

    def plan(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = cli.main(['--config-file', self.conf.config_file[0],
                           'mig', 'plan', '--format', 'json'])
        self.assertEqual(0, rc)
        return json.loads(out.getvalue())

    def test_aggregate_layout_over_the_model(self):
        self.join(AGG)
        agent = self.agent(mig={
            'layouts': 'A100_80GB_PCIE:7g.80gb=1',
            'aggregate_layouts': '%s:A100_80GB_PCIE:3g.40gb=2' % AGG,
            # another host's layout: checked, not used here
            'host_layouts': 'cmp-9:A100_80GB_PCIE:1g.10gb=7'})
        self.assertEqual(frozenset([AGG]), agent.mig.aggregates)
        row, = self.plan()['gpus']
        self.assertEqual('3g.40gb=2', row['layout'])
        self.assertEqual('aggregate %s' % AGG, row['layout_source'])
        self.assertTrue(agent.mig.cycle(agent.last_inventory, agent.client))
        self.assertEqual([('3g.40gb', 0), ('3g.40gb', 4)],
                         self.fake.gpu_instances(0))

    def test_host_layout_over_the_aggregate(self):
        self.join(AGG)
        agent = self.agent(mig={
            'layouts': 'A100_80GB_PCIE:7g.80gb=1',
            'aggregate_layouts': '%s:A100_80GB_PCIE:3g.40gb=2' % AGG,
            'host_layouts': 'cmp-1:A100_80GB_PCIE:2g.20gb=3,1g.10gb=1'})
        row, = self.plan()['gpus']
        self.assertEqual(('2g.20gb=3,1g.10gb=1', 'host cmp-1'),
                         (row['layout'], row['layout_source']))
        agent.mig.cycle(agent.last_inventory, agent.client)
        self.assertEqual(['1g.10gb', '2g.20gb', '2g.20gb', '2g.20gb'],
                         sorted(n for n, _ in self.fake.gpu_instances(0)))

    def test_outside_the_aggregate_the_model_layout(self):
        self.join(AGG2)
        agent = self.agent(mig={
            'layouts': 'A100_80GB_PCIE:7g.80gb=1',
            'aggregate_layouts': '%s:A100_80GB_PCIE:3g.40gb=2' % AGG})
        row, = self.plan()['gpus']
        self.assertEqual(('7g.80gb=1', 'model'),
                         (row['layout'], row['layout_source']))
        agent.mig.cycle(agent.last_inventory, agent.client)
        self.assertEqual([('7g.80gb', 0)], self.fake.gpu_instances(0))

    def test_two_aggregates_disagreeing_change_nothing(self):
        self.join(AGG, AGG2)
        agent = self.agent(
            mig={'aggregate_layouts': '%s:A100_80GB_PCIE:3g.40gb=2' % AGG},
            more=['aggregate_layouts = %s:A100_80GB_PCIE:7g.80gb=1' % AGG2])
        self.assertFalse(agent.mig.cycle(agent.last_inventory,
                                         agent.client))
        self.assertEqual([], self.fake.gpu_instances(0))
        self.assertEqual('blocked', agent.mig.last[0].status)
        row, = self.plan()['gpus']
        self.assertIsNone(row['layout'])
        self.assertEqual('disabled', row['mig_mode'])
        self.assertIn('give A100_80GB_PCIE different values',
                      row['cannot'][0])

    def test_aggregate_power_profile_applied_through_nvml(self):
        self.join(AGG)
        agent = self.agent(power={
            'profiles': '*:max-performance',
            'aggregate_profiles': '%s:*:efficiency' % AGG})
        agent.run_cycle(cast=False)      # the power step, aggregates known
        handle = self.fake.devices[0].handle
        # 70 % of the A100's 300 W default limit
        self.assertEqual(210000,
                         pynvml.nvmlDeviceGetPowerManagementLimit(handle))
        gpu, = agent.last_inventory.gpus
        self.assertEqual('efficiency', gpu.power_profile)

    def test_host_power_profile_over_the_aggregate(self):
        self.join(AGG)
        agent = self.agent(power={
            'aggregate_profiles': '%s:*:efficiency' % AGG,
            'host_profiles': 'cmp-1:A100_80GB_PCIE:250W'})
        agent.run_cycle(cast=False)
        self.assertEqual(250000, pynvml.nvmlDeviceGetPowerManagementLimit(
            self.fake.devices[0].handle))
