# SPDX-License-Identifier: Apache-2.0

"""``openstack gpu host drain|undrain`` and ``gpu rollout plan`` in Nova's
harness (python-openstackclient): the runbook of
doc/source/operations.rst (a driver roll-out) on a three-host vGPU cloud
(two A100 pGPUs per host, driver 550 reported by the agent), on a
passthrough host and on a vendor-VFIO vGPU host (both PCI in Placement,
the driver trait a [pci] device_spec tag of the generated drop-in)."""
import json
import time

import fixtures
from nova.tests.fixtures import libvirt as fakelibvirt
from nova.tests.functional.libvirt import base as libvirt_base

from gpu_nova_ext_dev.fakes import sysfs
from gpu_nova_ext.inventory import manager
from gpu_nova_ext.operator import nova_conf as nova_conf_gen
from gpu_nova_ext.tests.functional.nova import base
from gpu_nova_ext.tests.functional.nova import ops_base
from gpu_nova_ext.tests.functional.nova import test_pci
from gpu_nova_ext.tests.functional import osc_client

VGPU = {'resources:VGPU': '1'}
HOSTS = ('h1', 'h2', 'h3')


class DrainTest(ops_base.LiveMigrationVGPUTestBase):

    def setUp(self):
        super().setUp()
        self.start_a100_hosts(HOSTS)

    def cli(self, *argv):
        """``openstack gpu host drain|undrain ...``: (0, stdout)."""
        return self.gpu('host', *argv, config=True)

    def refused(self, *argv) -> str:
        return self.gpu_refused('host', *argv, config=True)

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

        # still 550 (the agent's state): refused, the service stays
        # disabled, and the command says what to do
        exc = self.refused('undrain', 'h1', '--expect-driver', '570')
        self.assertIn('expected driver branch 570, but GPU %s runs '
                      '550.54.15' % base.PGPU0, str(exc))
        self.assertIn('Still to do: 1. install driver branch 570 on h1',
                      str(exc))
        self.assertEqual('disabled', self.service('h1')['status'])

        self.upgrade_driver('h1', '570.86.10')
        rc, out = self.cli('undrain', 'h1', '--expect-driver', '570.86.10')
        self.assertEqual(0, rc)
        self.assertIn('every GPU runs driver branch 570 (agent state and '
                      'Placement)', out)
        self.assertEqual('enabled', self.service('h1')['status'])

    def test_drain_all_servers_moves_those_without_gpus(self):
        # the runbook's step before a reboot: nothing may stay
        gpu_server = self.boot(VGPU, host='h1')
        plain = self.boot({}, host='h1')
        kept = self.boot({}, host='h1')
        self.set_metadata(kept['id'], {'gpu_nova_ext:remediation': 'never'})
        rc, out = self.cli('drain', 'h1', '--migrate', '--dry-run')
        self.assertIn('note: servers without a GPU were not looked at: a '
                      'reboot of h1 stops them', out)
        rc, out = self.cli('drain', 'h1', '--all-servers')
        self.assertEqual(0, rc)
        self.assertIn('h1: 1 server(s) on its GPUs: 1 to live-migrate', out)
        self.assertIn('h1: 2 other server(s): 1 to live-migrate, 1 to skip',
                      out)
        self.assertIn('moved %s' % gpu_server['id'], out)
        self.assertIn('moved %s' % plain['id'], out)
        self.assertIn('stays on h1: 1 server(s): %s' % kept['id'], out)
        self.assertIn('metadata gpu_nova_ext:remediation=never', out)
        self.assertIn('note: a reboot of h1 stops the servers that stay',
                      out)
        for server in (gpu_server, plain):
            self.assertNotEqual('h1', self.server_host(server['id']))
        self.api.delete_server(kept['id'])
        self._wait_until_deleted(kept)
        # Nova drops the migration's allocation on h1 after the move ends
        # (until then drain lists it as staying: a migration in progress)
        self._wait_for_no_usages(self._get_provider_uuid_by_name(
            self.pgpu('h1', base.PGPU0)))
        rc, out = self.cli('drain', 'h1', '--all-servers')
        self.assertIn('h1 holds no server: it can be rebooted.', out)

    def _wait_for_no_usages(self, rp_uuid, tries=500):
        for _ in range(tries):
            if not any(self._get_provider_usages(rp_uuid).values()):
                return
            time.sleep(0.02)
        self.fail('the allocation of the moved server stays on %s'
                  % rp_uuid)

    def test_drain_dry_run_changes_nothing(self):
        server = self.boot(VGPU, host='h2')
        rc, out = self.cli('drain', 'h2', '--migrate', '--dry-run')
        self.assertEqual(0, rc)
        self.assertIn('dry run: would disable nova-compute on h2', out)
        self.assertIn('dry run: would live-migrate %s' % server['id'], out)
        self.assertEqual('enabled', self.service('h2')['status'])
        self.assertEqual('h2', self.server_host(server['id']))

    def test_unknown_host(self):
        exc = self.refused('drain', 'h9')
        self.assertIn("No host 'h9' in Nova's compute services", str(exc))

    def plan(self, *argv):
        return osc_client.openstack_json(self, 'gpu', 'rollout', 'plan',
                                         *argv)

    def test_rollout_plan_keeps_capacity(self):
        # 3 hosts x 2 pGPUs x 16 vGPUs: at 34% 32 vGPUs may be out, one
        # host per batch
        pool = 'A100_80GB_PCIE vgpu'
        plan = self.plan('--max-unavailable', '34%')
        self.assertEqual(({pool: 96}, {pool: 32}),
                         (plan['totals'], plan['allowed']))
        self.assertEqual([([h], {pool: 32}) for h in HOSTS],
                         [(b['hosts'], b['down']) for b in plan['batches']])
        # at 67% 64 may be out: two hosts, then the third
        plan = self.plan('--max-unavailable', '67', '--model', 'A100')
        self.assertEqual([(['h1', 'h2'], {pool: 64}), (['h3'], {pool: 32})],
                         [(b['hosts'], b['down']) for b in plan['batches']])
        # a host on the target driver already is left out
        self.upgrade_driver('h3', '570.86.10')
        plan = self.plan('--max-unavailable', '34%', '--target-driver',
                         '570')
        self.assertEqual(['h3'], plan['done'])
        self.assertEqual([['h1'], ['h2']],
                         [b['hosts'] for b in plan['batches']])
        # the hosts of an aggregate: capacity counted among them only
        agg = self.admin_api.post_aggregate(
            {'aggregate': {'name': 'gpu-a'}})
        for host in ('h1', 'h2'):
            self.admin_api.add_host_to_aggregate(agg['id'], host)
        plan = self.plan('--max-unavailable', '50%', '--aggregate', 'gpu-a')
        self.assertEqual(({pool: 64}, {pool: 32}),
                         (plan['totals'], plan['allowed']))
        self.assertEqual([['h1'], ['h2']],
                         [b['hosts'] for b in plan['batches']])
        err = self.gpu_refused('rollout', 'plan', '--max-unavailable',
                               '50%', '--aggregate', 'nosuch')
        self.assertIn('Invalid --aggregate nosuch', err)
        self.assertIn('known: gpu-a', err)
        err = self.gpu_refused('rollout', 'plan', '--max-unavailable', '0%')
        self.assertIn('Invalid --max-unavailable 0%', err)


class DrainPassthroughTest(ops_base.OpsMixin, base.GpuSchedulerMixin,
                           base.GpuAgentMixin, libvirt_base.ServersTestBase):
    """The runbook on a passthrough host (PCI in Placement).

    The driver trait of its GPUs is a tag of the generated ``[pci]
    device_spec``: after the driver upgrade the agent reports 570 at once,
    Placement only once the drop-in is regenerated and nova-compute
    restarted.  (The host of test_pci: two A100s passed through whole.)
    """

    microversion = 'latest'
    ADMIN_API = True
    ADDITIONAL_FILTERS = ['PciPassthroughFilter'] + base.GPU_FILTERS

    def setUp(self):
        super().setUp()
        a100 = ('20b5', 'GA100 [A100 PCIe 80GB]', base.gpu(base.A100))
        self.start_pci_in_placement_host(test_pci.HOST, (a100, a100))
        self.use_openstack_gpu(self.ops_conf())

    def cli(self, *argv):
        """``openstack gpu host drain|undrain ...``: (0, stdout)."""
        return self.gpu('host', *argv, config=True)

    def refused(self, *argv) -> str:
        return self.gpu_refused('host', *argv, config=True)

    def test_runbook_order(self):
        host = test_pci.HOST
        rc, out = self.cli('drain', host, '--all-servers', '--reason',
                           'driver 570')
        self.assertEqual(0, rc)
        self.assertIn('%s holds no server: it can be rebooted.' % host, out)
        # the driver upgrade and the agent's restart
        for facts in self.gpu_facts[host].values():
            facts['driver_version'] = '570.86.10'
        self.run_agent(host)
        exc = self.refused('undrain', host, '--expect-driver', '570')
        self.assertIn('Placement says GPU %s runs 550 (a [pci] device_spec '
                      'tag)' % test_pci.A100_0, str(exc))
        self.assertIn('regenerate the nova-conf drop-in on %s (gpu-nova-ext '
                      'nova-conf, as at install) and restart nova-compute '
                      'there: its [pci] device_spec still tags driver 550'
                      % host, str(exc))
        self.assertNotIn('install driver', str(exc))
        # regenerate the drop-in, restart nova-compute
        drop_in = nova_conf_gen.generate(
            manager.discover(self.agent_conf(host)))
        self.assertIn('CUSTOM_GPU_DRIVER_570',
                      ' '.join(drop_in.values('pci', 'device_spec')))
        self.flags(group='pci', device_spec=drop_in.values('pci',
                                                           'device_spec'))
        self.restart_compute_service(host)
        rc, out = self.cli('undrain', host, '--expect-driver', '570')
        self.assertEqual(0, rc)
        self.assertIn('every GPU runs driver branch 570', out)

    def test_no_live_state(self):
        host = test_pci.HOST
        self.cli('drain', host)
        self.useFixture(fixtures.MonkeyPatch(
            'gpu_nova_ext.operator.live_state.live_states',
            lambda conf, wait: {}))
        exc = self.refused('undrain', host, '--expect-driver', '550')
        self.assertIn('no live GPU state from gpu-nova-agent on %s' % host,
                      str(exc))


VFIO_HOST = 'vfio1'
VFIO_PF = '0000:81:00.0'
VFIO_VFS = ('0000:81:00.1', '0000:81:00.2')


class DrainVendorVfioTest(ops_base.OpsMixin, base.GpuSchedulerMixin,
                          base.GpuAgentMixin, libvirt_base.ServersTestBase):
    """The runbook on a vendor-VFIO vGPU host (PCI in Placement).

    An NVIDIA A10 whose SR-IOV VFs carry NVIDIA's vendor-specific VFIO
    vGPUs: the generated ``[pci] device_spec`` lists each VF (``managed=no``)
    with the GPU's static traits, the driver branch among them; nova-compute
    reports the VFs in Placement.
    """

    microversion = 'latest'
    ADMIN_API = True
    ADDITIONAL_FILTERS = ['PciPassthroughFilter'] + base.GPU_FILTERS
    # the VFs' device_spec carries live_migratable: Nova needs libvirt
    # 10.0.0 and QEMU 8.2.2 for it (MIN_VFIO_PCI_VARIANT_*)
    LIBVIRT_VERSION = 10000000
    QEMU_VERSION = 8002002

    def setUp(self):
        super().setUp()
        base.no_host_pci_sysfs(self)
        self.sysfs = self.useFixture(sysfs.SysfsTree())
        self.sysfs.add_gpu(VFIO_PF, device='2236', driver='nvidia')
        for vf in VFIO_VFS:
            self.sysfs.add_vf(vf, pf=VFIO_PF, device='2236', creatable=[
                (593, 'NVIDIA A10-4Q'), (595, 'NVIDIA A10-12Q')],
                current=0)
        pci_info = fakelibvirt.HostPCIDevicesInfo(
            num_pci=0, num_pfs=0, num_vfs=0)
        common = dict(bus=0x81, slot=0, iommu_group=40, numa_node=0,
                      vend_id='10de', vend_name='NVIDIA Corporation',
                      prod_id='2236', prod_name='GA102GL [A10]',
                      driver_name='nvidia', vf_ratio=len(VFIO_VFS))
        pci_info.add_device(dev_type='PF', function=0, **common)
        for n in range(1, len(VFIO_VFS) + 1):
            pci_info.add_device(dev_type='VF', function=n,
                                parent=(0x81, 0, 0), **common)
        self.pci_infos[VFIO_HOST] = pci_info
        self.gpu_facts[VFIO_HOST] = {VFIO_PF: base.gpu(A10)}
        self._write_agent_files(VFIO_HOST)
        drop_in = nova_conf_gen.generate(
            manager.discover(self.agent_conf(VFIO_HOST)))
        self.device_specs = drop_in.values('pci', 'device_spec')
        self.flags(group='pci', report_in_placement=True,
                   device_spec=self.device_specs,
                   alias=drop_in.values('pci', 'alias'))
        self.flags(group='filter_scheduler', pci_in_placement=True)
        self.start_compute(VFIO_HOST, pci_info=pci_info,
                           libvirt_version=self.LIBVIRT_VERSION,
                           qemu_version=self.QEMU_VERSION)
        self.run_agent(VFIO_HOST)
        self.use_openstack_gpu(self.ops_conf())

    def agent_conf(self, host):
        conf = super().agent_conf(host)
        conf.set_override('inventory_sources',
                          ['libvirt', 'simulated', 'sysfs'], group='agent')
        conf.set_override('sysfs_root', self.sysfs.root, group='agent')
        return conf

    def cli(self, *argv):
        """``openstack gpu host drain|undrain ...``: (0, stdout)."""
        return self.gpu('host', *argv, config=True)

    def refused(self, *argv) -> str:
        return self.gpu_refused('host', *argv, config=True)

    def test_runbook_order(self):
        # the drop-in offers the VFs, tagged with the driver branch
        specs = [json.loads(spec) for spec in self.device_specs]
        self.assertEqual(set(VFIO_VFS), {s['address'] for s in specs})
        self.assertEqual({'no'}, {s['managed'] for s in specs})
        self.assertIn('CUSTOM_GPU_DRIVER_550', specs[0]['traits'])
        rc, out = self.cli('drain', VFIO_HOST, '--all-servers')
        self.assertEqual(0, rc)
        self.assertIn('%s holds no server: it can be rebooted.' % VFIO_HOST,
                      out)
        self.gpu_facts[VFIO_HOST][VFIO_PF]['driver_version'] = '570.86.10'
        self.run_agent(VFIO_HOST)
        exc = self.refused('undrain', VFIO_HOST, '--expect-driver',
                           '570')
        self.assertIn('runs 550 (a [pci] device_spec tag)', str(exc))
        self.assertIn('regenerate the nova-conf drop-in on %s' % VFIO_HOST,
                      str(exc))
        self.assertNotIn('install driver', str(exc))
        drop_in = nova_conf_gen.generate(
            manager.discover(self.agent_conf(VFIO_HOST)))
        self.assertIn('CUSTOM_GPU_DRIVER_570',
                      ' '.join(drop_in.values('pci', 'device_spec')))
        self.flags(group='pci', device_spec=drop_in.values('pci',
                                                           'device_spec'))
        self.restart_compute_service(VFIO_HOST)
        rc, out = self.cli('undrain', VFIO_HOST, '--expect-driver', '570')
        self.assertEqual(0, rc)
        self.assertIn('every GPU runs driver branch 570', out)


A10 = {'name': 'NVIDIA A10', 'memory_mib': 23028,
       'driver_version': '550.54.15', 'cuda_cc': '8.6'}
