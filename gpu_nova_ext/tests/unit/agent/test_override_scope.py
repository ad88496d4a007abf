# SPDX-License-Identifier: Apache-2.0

"""host > aggregate > model for MIG layouts and power profiles."""
from oslo_config import cfg
from oslo_config import fixture as cfg_fixture
from oslotest import base

from gpu_nova_ext.agent import mig_layout
from gpu_nova_ext.agent import mig_manager
from gpu_nova_ext.agent import override_scope
from gpu_nova_ext.agent import power_policy
from gpu_nova_ext import conf as gconf
from gpu_nova_ext import exception

AGG = '6f1c2f4e-2b7e-4a43-9a0a-3c1f0e9d8b71'
AGG2 = 'b3a0c1d2-5e6f-4a7b-8c9d-0e1f2a3b4c5d'
A100 = 'A100_80GB_PCIE'


class ChooserTest(base.BaseTestCase):

    def chooser(self, wildcard=False):
        return override_scope.Chooser(
            'cn1', {A100: 'model', '*': 'model-any'},
            {AGG: {A100: 'agg'}, AGG2: {'*': 'agg2-any'}},
            {'H200': 'host'}, wildcard=wildcard)

    def test_order(self):
        c = self.chooser()
        self.assertEqual(('host', 'host cn1'),
                         (c.choose('H200', None).value,
                          c.choose('H200', None).source))
        self.assertEqual(('agg', 'aggregate %s' % AGG),
                         (c.choose(A100, {AGG}).value,
                          c.choose(A100, {AGG}).source))
        self.assertEqual('model', c.choose(A100, set()).value)
        self.assertEqual('model', c.choose(A100, {AGG2}).source)
        self.assertIsNone(c.choose('A30', set()).value)

    def test_wildcard_by_scope(self):
        c = self.chooser(wildcard=True)
        # the aggregate's * is over the model's own value
        self.assertEqual('agg2-any', c.choose(A100, {AGG2}).value)
        self.assertEqual('model-any', c.choose('A30', set()).value)
        # with both aggregates, AGG's own A100 and AGG2's * disagree
        self.assertIn('different values', c.choose(A100, {AGG, AGG2})
                      .problem)

    def test_unknown_aggregates_is_a_problem_not_a_guess(self):
        choice = self.chooser().choose(A100, None)
        self.assertIsNone(choice.value)
        self.assertIn('aggregates are not known yet', choice.problem)

    def test_aggregate_must_be_a_uuid(self):
        exc = self.assertRaises(
            exception.InvalidOption, mig_layout.parse_scoped_layouts,
            ['gpu-pool:%s:1g.10gb=7' % A100], 'aggregate_layouts',
            'aggregate')
        self.assertIn('[mig] aggregate_layouts', str(exc))
        self.assertIn("aggregate 'gpu-pool' is not a UUID", str(exc))

    def test_scoped_layout_checked_like_the_model_ones(self):
        exc = self.assertRaises(
            exception.InvalidOption, mig_layout.parse_scoped_layouts,
            ['cn1:%s:1g.10gb=8' % A100], 'host_layouts', 'host')
        self.assertIn('[mig] host_layouts', str(exc))
        self.assertIn('GPU model A100_80GB_PCIE holds at most 7 '
                      'instance(s) of MIG profile 1g.10gb', str(exc))

    def test_scoped_power_profile_checked(self):
        exc = self.assertRaises(
            exception.InvalidOption, power_policy.parse_scoped_profiles,
            ['%s:*:5000W' % AGG], 'aggregate_profiles', 'aggregate')
        self.assertIn('[power] aggregate_profiles', str(exc))
        self.assertIn('a limit in watts must be 10 to 2000', str(exc))


class ManagerScopeTest(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(cfg_fixture.Config(cfg.ConfigOpts()))
        gconf.register_agent_opts(self.conf.conf)
        self.conf.config(nova_config_file='', nova_config_dir='',
                         group='agent')
        self.conf.config(host='cn1')

    def test_other_hosts_layouts_checked_and_ignored(self):
        self.conf.config(group='mig', host_layouts=[
            'cn2:%s:7g.80gb=1' % A100])
        manager = mig_manager.MigManager(self.conf.conf)
        self.assertFalse(manager.active)
        self.conf.config(group='mig', host_layouts=[
            'cn2:%s:7g.80gb=2' % A100])
        self.assertRaises(exception.InvalidOption, mig_manager.MigManager,
                          self.conf.conf)

    def test_layout_for_this_host(self):
        self.conf.config(group='mig', layouts=['%s:7g.80gb=1' % A100],
                         host_layouts=['cn1:%s:1g.10gb=7' % A100])
        manager = mig_manager.MigManager(self.conf.conf)
        choice = manager.layout_for(A100)
        self.assertEqual(('1g.10gb=7', 'host cn1'),
                         (choice.value.describe(), choice.source))

    def test_nova_conf_layouts_for_this_host(self):
        self.conf.config(group='mig', layouts=['%s:7g.80gb=1' % A100,
                                               'A30:4g.24gb=1'],
                         host_layouts=['cn1:%s:1g.10gb=7' % A100],
                         aggregate_layouts=['%s:H200:7g.141gb=1' % AGG])
        layouts, notes = mig_layout.layouts_for_host(
            self.conf.conf, [A100, 'A30', 'H200', 'L4'])
        self.assertEqual({A100: (('1g.10gb', 7),),
                          'A30': (('4g.24gb', 1),)}, layouts)
        self.assertEqual(1, len(notes))
        self.assertIn('GPU model H200: not written from a MIG layout: the '
                      "host's Placement aggregates are not known yet",
                      notes[0])

    def test_power_waits_for_the_aggregates_and_says_why(self):
        from gpu_nova_ext.inventory import base as inv
        self.conf.config(group='power', profiles=['*:balanced'],
                         aggregate_profiles=['%s:*:efficiency' % AGG])
        policy = power_policy.PowerPolicy(self.conf.conf)
        self.assertTrue(policy.needs_aggregates)
        inventory = inv.HostInventory(host='cn1', gpus=[inv.Gpu(
            pci_address='0000:3b:00.0', vendor='nvidia', model=A100)])
        applied = policy.apply(None, inventory)['0000:3b:00.0']
        self.assertIn('aggregates are not known yet', applied.error)
        self.assertIsNone(inventory.gpus[0].power_profile)
        # read, and not a member: the model's profile
        policy.aggregates = frozenset([AGG2])
        self.assertEqual('balanced', policy.profile_for(A100).name)
        policy.aggregates = frozenset([AGG])
        self.assertEqual(('efficiency', 'aggregate %s' % AGG),
                         (policy.choose(A100).value.name,
                          policy.choose(A100).source))
