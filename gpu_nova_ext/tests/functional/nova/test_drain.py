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

"""drain, undrain and rollout plan on a three-host vGPU cloud in Nova's
harness (two A100 pGPUs per host, driver 550 reported by the agent)."""
from gpu_nova_ext import exception
from gpu_nova_ext.tests.functional.nova import base
from gpu_nova_ext.tests.functional.nova import ops_base

VGPU = {'resources:VGPU': '1'}
HOSTS = ('h1', 'h2', 'h3')


class DrainTest(ops_base.LiveMigrationVGPUTestBase):

    def setUp(self):
        super().setUp()
        for host in HOSTS:
            self.start_gpu_host(host, {base.PGPU0: base.gpu(base.A100),
                                       base.PGPU1: base.gpu(base.A100)})
        self.conf = self.ops_conf()

    def cli(self, *argv):
        return super().cli(self.conf, *argv)

    def service(self, host):
        [svc] = self.admin_api.get_services(binary='nova-compute', host=host)
        return svc

    def upgrade_driver(self, host, version):
        for facts in self.gpu_facts[host].values():
            facts['driver_version'] = version
        self.run_agent(host)

    def test_drain_migrate_then_undrain_on_expected_driver(self):
        server = self.boot(VGPU, host='h1')
        rc, out = self.cli('drain', 'h1', '--migrate', '--reason',
                           'driver 570')
        self.assertEqual(0, rc)
        svc = self.service('h1')
        self.assertEqual(('disabled', 'gpu-nova-ext drain: driver 570'),
                         (svc['status'], svc['disabled_reason']))
        self.assertIn('h1: 1 server(s) on its GPUs: 1 to live-migrate', out)
        self.assertIn('moved %s' % server['id'], out)
        self.assertIn('progress: 1 of 1 move(s) done', out)
        body = self.api.get_server(server['id'])
        self.assertIn(body['OS-EXT-SRV-ATTR:host'], ('h2', 'h3'))
        self.assertEqual('ACTIVE', body['status'])

        # still 550: refused, the service stays disabled
        exc = self.assertRaises(exception.UndrainRefused, self.cli,
                                'undrain', 'h1', '--expect-driver', '570')
        # (the agent's CUSTOM_GPU_DRIVER_550 trait: the branch)
        self.assertIn('expected driver branch 570, but GPU %s runs 550'
                      % base.PGPU0, str(exc))
        self.assertEqual('disabled', self.service('h1')['status'])

        self.upgrade_driver('h1', '570.86.10')
        rc, out = self.cli('undrain', 'h1', '--expect-driver', '570.86.10')
        self.assertEqual(0, rc)
        self.assertIn('every GPU runs driver branch 570', out)
        self.assertEqual('enabled', self.service('h1')['status'])

    def test_drain_dry_run_changes_nothing(self):
        server = self.boot(VGPU, host='h2')
        rc, out = self.cli('drain', 'h2', '--migrate', '--dry-run')
        self.assertEqual(0, rc)
        self.assertIn('dry run: would disable nova-compute on h2', out)
        self.assertIn('dry run: would live-migrate %s' % server['id'], out)
        self.assertEqual('enabled', self.service('h2')['status'])
        self.assertEqual('h2', self.server_host(server['id']))

    def test_unknown_host(self):
        exc = self.assertRaises(exception.UnknownHost, self.cli,
                                'drain', 'h9')
        self.assertIn("No host 'h9' in Nova's compute services", str(exc))

    def test_rollout_plan_keeps_capacity(self):
        # 3 hosts x 2 pGPUs x 16 vGPUs: at 34% 32 vGPUs may be out, one
        # host per batch
        rc, out = self.cli('rollout', 'plan', '--max-unavailable', '34%')
        self.assertEqual(0, rc)
        self.assertIn('A100_80GB_PCIE vgpu 96 (at most 32 down at once)',
                      out)
        for n, host in enumerate(HOSTS, 1):
            self.assertIn('batch %d: %s  (down: A100_80GB_PCIE vgpu 32/96)'
                          % (n, host), out)
        # at 67% 64 may be out: two hosts, then the third
        rc, out = self.cli('rollout', 'plan', '--max-unavailable', '67',
                           '--model', 'A100')
        self.assertIn('batch 1: h1, h2  (down: A100_80GB_PCIE vgpu 64/96)',
                      out)
        self.assertIn('batch 2: h3  (down: A100_80GB_PCIE vgpu 32/96)', out)
        # a host on the target driver already is left out
        self.upgrade_driver('h3', '570.86.10')
        rc, out = self.cli('rollout', 'plan', '--max-unavailable', '34%',
                           '--target-driver', '570')
        self.assertIn('already on the target branch: h3', out)
        self.assertNotIn('batch 3', out)
        # the hosts of an aggregate: capacity counted among them only
        agg = self.admin_api.post_aggregate(
            {'aggregate': {'name': 'gpu-a'}})
        for host in ('h1', 'h2'):
            self.admin_api.add_host_to_aggregate(agg['id'], host)
        rc, out = self.cli('rollout', 'plan', '--max-unavailable', '50%',
                           '--aggregate', 'gpu-a')
        self.assertIn('A100_80GB_PCIE vgpu 64 (at most 32 down at once)',
                      out)
        self.assertIn('batch 2: h2', out)
        self.assertNotIn('h3', out)
        exc = self.assertRaises(exception.GpuNovaExtException, self.cli,
                                'rollout', 'plan', '--max-unavailable',
                                '50%', '--aggregate', 'nosuch')
        self.assertIn("No host aggregate 'nosuch'", str(exc))
        exc = self.assertRaises(exception.GpuNovaExtException, self.cli,
                                'rollout', 'plan', '--max-unavailable',
                                '0%')
        self.assertIn("Invalid --max-unavailable '0%'", str(exc))
