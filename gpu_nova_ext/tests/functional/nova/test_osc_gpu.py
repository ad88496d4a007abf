# SPDX-License-Identifier: Apache-2.0

"""``openstack gpu list|show`` through python-openstackclient, against
Nova's harness: two vGPU hosts (two A100 pGPUs each) reported by our
agent, one server on a GPU and one GPU reserved.

The client loads the plugin by entry point and finds the cloud by
``OS_CLOUD`` alone (:mod:`~gpu_nova_ext.tests.functional.osc_client`);
every answer is ``-f json``.
"""
import os

import fixtures

from gpu_nova_ext import naming
from gpu_nova_ext.tests.functional.nova import base
from gpu_nova_ext.tests.functional.nova import ops_base
from gpu_nova_ext.tests.functional import osc_client

VGPU = {'resources:VGPU': '1'}


class GpuListTest(base.GpuVGPUTestBase):
    """One harness, every list/show check (its set-up is the cost)."""

    def setUp(self):
        super().setUp()
        for host in ('h1', 'h2'):
            self.start_gpu_host(host, {base.PGPU0: base.gpu(base.A100),
                                       base.PGPU1: base.gpu(base.A100)})
        self.server = self.boot(VGPU)
        self.host, self.pgpu_name = self.gpu_of(self.server)
        self.run_agent(self.host)
        self.other = 'h2' if self.host == 'h1' else 'h1'
        self.run_agent(self.other)
        self.cloud = self.useFixture(osc_client.Cloud.of_harness(self))

    def gpus(self, *argv):
        return osc_client.openstack_json(self, 'gpu', 'list', *argv)

    def test_help_lists_the_commands(self):
        rc, out, err = osc_client.openstack('help', 'gpu')
        self.assertEqual(0, rc, err)
        for name in ('gpu list', 'gpu show'):
            self.assertIn(name, out)

    def test_list_every_gpu_with_its_server(self):
        gpus = self.gpus()
        # without the agents' live state (--state-wait), providers on one
        # PCI bus are one GPU, as audit joins the VFs of a GPU: the
        # harness's two pGPUs share bus 81
        self.assertEqual([('h1', base.PGPU0), ('h2', base.PGPU0)],
                         [(g['Host'], g['Address']) for g in gpus])
        for g in gpus:
            self.assertEqual('A100_80GB_PCIE', g['Model'])
            self.assertEqual('vgpu', g['Mode'])
            self.assertEqual('80GB', g['Memory'])
            # from the traits the agent keeps on the compute node
            self.assertEqual('healthy', g['Health'])
            self.assertTrue(g['State From'].startswith('placement, '),
                            g['State From'])
        on = [g for g in gpus if g['Servers']]
        self.assertEqual([[self.server['id']]], [g['Servers'] for g in on])
        self.assertEqual(1, on[0]['Used'])
        self.assertEqual(self.host, on[0]['Host'])
        self.assertEqual(0, sum(g['Used'] for g in gpus if g not in on))

        # filters
        self.assertEqual({self.other}, {g['Host'] for g in self.gpus(
            '--host', self.other)})
        self.assertEqual(2, len(self.gpus('--model', 'A100')))
        long = self.gpus('--long')
        self.assertEqual([2, 2], [len(g['Providers']) for g in long])
        self.assertIn(naming.model_trait('A100_80GB_PCIE'),
                      long[0]['Traits'])
        agg = self.admin_api.post_aggregate({'aggregate': {'name': 'a'}})
        self.admin_api.add_host_to_aggregate(agg['id'], self.other)
        self.assertEqual({self.other}, {g['Host'] for g in self.gpus(
            '--aggregate', 'a')})
        # health from Placement: no --state-wait needed
        self.assertEqual([], self.gpus('--unhealthy'))

    def test_with_the_agents_state(self):
        # the state the agents cast, as the harness's scheduler holds it
        self.useFixture(fixtures.MonkeyPatch(
            'gpu_nova_ext.operator.live_state.live_states',
            ops_base.harness_live_states))
        # the schedulers' bus in the command's configuration
        conf = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'gpu-nova-ext.conf')
        with open(conf, 'w') as f:
            f.write('[DEFAULT]\ntransport_url = fake:/\n')
        gpus = self.gpus('--state-wait', '0.1', '--config-file', conf)
        # the state names each GPU's providers: one row per pGPU now
        self.assertEqual(
            [('h1', base.PGPU0), ('h1', base.PGPU1), ('h2', base.PGPU0),
             ('h2', base.PGPU1)],
            [(g['Host'], g['Address']) for g in gpus])
        self.assertEqual({'healthy'}, {g['Health'] for g in gpus})
        self.assertEqual({'agent'}, {g['State From'] for g in gpus})
        self.assertEqual([self.server['id']],
                         [s for g in gpus for s in g['Servers']])
        self.assertEqual([], self.gpus('--unhealthy', '--state-wait', '0.1',
                                       '--config-file', conf))

    def test_show_one_gpu(self):
        address = [g['Address'] for g in self.gpus('--host', self.host)
                   if g['Servers']][0]
        shown = osc_client.openstack_json(self, 'gpu', 'show', self.host,
                                          address)
        self.assertEqual([self.server['id']], shown['Servers'])
        self.assertEqual(address, shown['Address'])
        self.assertTrue(shown['Providers'])
        self.assertEqual('nvidia', shown['Vendor'])

    def assertRefused(self, argv, *words):
        err = osc_client.refused(self, *argv)
        for word in words:
            self.assertIn(word, err)
        return err

    def test_bad_input_one_line_exit_2(self):
        self.assertRefused(('gpu', 'list', '--host', 'nope'),
                           "No host 'nope' in Placement")
        self.assertRefused(('gpu', 'list', '--model', 'H100'),
                           'H100', 'A100_80GB_PCIE')
        self.assertRefused(('gpu', 'list', '--aggregate', 'nope'),
                           'nope', 'openstack aggregate list')
        for value in ('-5', 'nan', 'inf', '1e300'):
            self.assertRefused(('gpu', 'list', '--state-wait', value),
                               'Invalid --state-wait')
        self.assertRefused(('gpu', 'show', self.host, '0000:99:00.0'),
                           '0000:99:00.0', base.PGPU0)
        self.assertRefused(('gpu', 'show', self.host, 'zzz'),
                           'not a PCI address')

    def test_placement_without_the_microversion(self):
        # Placement as a release that serves up to 1.35 answers
        from placement import microversion
        self.useFixture(fixtures.MonkeyPatch(
            'placement.microversion.VERSIONS',
            microversion.VERSIONS[:microversion.VERSIONS.index('1.35') + 1]))
        self.assertRefused(('gpu', 'list'), 'serves microversions up to '
                           '1.35', 'needs 1.36', 'Upgrade Placement')

    def test_a_member_is_refused(self):
        self.cloud.roles = 'reader,member'
        self.assertRefused(('gpu', 'list'), '403', 'Policy does not allow')
