# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

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
from gpu_nova_ext.fakes import nvml as fake_nvml
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
        self.assertIn('0000:3b:00.0  A100_80GB_PCIE  MIG disabled  layout '
                      '3g.40gb=2', text)
        self.assertIn('    cannot: holds allocations in Placement', text)
        self.assertIn('    would create 3g.40gb at slice 4', text)
