# SPDX-License-Identifier: Apache-2.0

"""GPU quota per model, end to end: ``openstack gpu quota``
(python-openstackclient) sets Keystone unified limits, Nova enforces them.

Real here: Keystone (its own process, :mod:`keystone_fixture`), Nova's API
with ``[quota] driver = nova.quota.UnifiedLimitsDriver`` and oslo.limit
reading that Keystone, Placement (usages), and the host's nova.conf from
our generator (per-model resource classes).
"""
import fixtures
from keystoneauth1 import loading as ks_loading
from nova.cmd import manage as nova_manage
from nova import conf as nova_conf
from nova.tests.fixtures import libvirt as fakelibvirt
from nova.tests.functional.api import client as api_client
from nova.tests.functional import integrated_helpers
from nova.tests.functional.libvirt import base as libvirt_base

from gpu_nova_ext.inventory import manager
from gpu_nova_ext.operator import flavor
from gpu_nova_ext.operator import nova_conf as nova_conf_gen
from gpu_nova_ext.tests.functional.nova import base
from gpu_nova_ext.tests.functional.nova import keystone_fixture
from gpu_nova_ext.tests.functional.nova import keystone_server
from gpu_nova_ext.tests.functional.nova import ops_base
from gpu_nova_ext.tests.functional import osc_client

HOST = 'gpu1'
A100_RC = 'CUSTOM_GPU_A100_80GB_PCIE'
L4_RC = 'CUSTOM_GPU_L4'
N_A100 = 5


def passthrough_specs(model: str) -> dict:
    """The flavor ``openstack gpu flavor create --mode passthrough`` makes."""
    return flavor.extra_specs(flavor.GpuFlavorRequest(
        model=model, mode='passthrough'))


class QuotaMixin(ops_base.OpsMixin):
    """Keystone with unified limits; our CLI logged in as its admin."""

    def setUp(self):
        super().setUp()
        self.keystone = self.useFixture(keystone_fixture.UnifiedLimits(self))
        # Nova's default [quota] unified_limits_resource_strategy=require
        # refuses every server while 'servers' has no registered limit
        self.keystone.register('servers', 100)
        self.project = self.keystone.project()
        # the harness's API authenticates by header: boot as that project
        self.api.project_id = self.project.id
        self.cloud = self.useFixture(osc_client.Cloud.of_harness(self))
        self.cloud.keystone(self.keystone.auth())

    def quota(self, *argv):
        """``openstack gpu quota ARGV``: (exit code, stdout)."""
        rc, out, err = osc_client.openstack('gpu', 'quota', *argv)
        self.assertIn(rc, (0, 1), err)
        return rc, out

    def refused(self, *argv) -> str:
        return osc_client.refused(self, 'gpu', 'quota', *argv)

    def shown(self, *argv) -> list:
        """``gpu quota show ARGV -f json``: the projects' rows as lists."""
        return [[r[k] for k in ('project', 'model', 'kind', 'resource',
                                'limit', 'from', 'used', 'over')]
                for r in osc_client.openstack_json(
                    self, 'gpu', 'quota', 'show', *argv)
                if r['project'] != '(default)']


class PassthroughQuotaTest(QuotaMixin, base.GpuSchedulerMixin,
                           base.GpuAgentMixin, libvirt_base.ServersTestBase):
    """One host with five A100s and an L4 passed through whole."""

    microversion = 'latest'
    ADMIN_API = True
    ADDITIONAL_FILTERS = ['PciPassthroughFilter'] + base.GPU_FILTERS

    def setUp(self):
        super().setUp()
        self.start_pci_in_placement_host(HOST, (
            [('20b5', 'GA100 [A100 PCIe 80GB]', base.gpu(base.A100))] * N_A100
            + [('27b8', 'AD104GL [L4]', base.gpu(base.L4))]))

    def test_fifth_a100_refused_l4_boots(self):
        rc, out = self.quota('set', '--project', self.project.name,
                             '--model', 'A100', '--limit', '4')
        self.assertEqual(0, rc)
        # no default existed: an unlimited one first (Keystone needs it)
        self.assertIn('default class:%s (A100_80GB_PCIE (passthrough)): '
                      'none -> unlimited' % A100_RC, out)
        self.assertIn('project %s: class:%s (A100_80GB_PCIE (passthrough)):'
                      ' - -> 4, used 0' % (self.project.name, A100_RC), out)

        a100 = passthrough_specs('A100_80GB_PCIE')
        for _ in range(4):
            self.boot(a100)
        exc = self.assertRaises(api_client.OpenStackApiException,
                                self.boot, a100)
        self.assertEqual(403, exc.response.status_code)
        # Nova's unified-limits quota error, naming the model's class
        self.assertIn('is over a limit for [Resource class:%s is over '
                      'limit of 4 due to current usage 4 and delta 1'
                      % A100_RC, exc.response.text)
        # another model is not limited by it
        self.boot(passthrough_specs('L4'))

        self.assertEqual(
            [[self.project.name, 'A100_80GB_PCIE', 'passthrough',
              'class:' + A100_RC, 4, 'project', 4, 0],
             [self.project.name, 'L4', 'passthrough', 'class:' + L4_RC,
              None, 'none', 1, 0]],
            self.shown('--project', self.project.id))

    def test_limit_below_usage_is_allowed_and_shown(self):
        a100 = passthrough_specs('A100_80GB_PCIE')
        for _ in range(3):
            self.boot(a100)
        rc, out = self.quota('set', '--project', self.project.name,
                             '--model', 'A100_80GB_PCIE', '--limit', '1')
        self.assertEqual(0, rc)
        self.assertIn('warning: project %s uses 3 of class:%s, 2 above its '
                      'limit 1' % (self.project.name, A100_RC), out)
        self.assertEqual([[self.project.name, 'A100_80GB_PCIE',
                           'passthrough', 'class:' + A100_RC, 1,
                           'project', 3, 2]],
                         self.shown('--project', self.project.name,
                                    '--model', 'A100'))
        # Nova refuses a new one while over
        exc = self.assertRaises(api_client.OpenStackApiException,
                                self.boot, a100)
        self.assertEqual(403, exc.response.status_code)

    def test_default_then_unset_project(self):
        rc, out = self.quota('set', '--default', '--model', 'L4',
                             '--limit', '0')
        self.assertEqual(0, rc)
        self.assertIn('default class:%s (L4 (passthrough)): - -> 0'
                      % L4_RC, out)
        # the cloud-wide default of 0 L4s holds for this project too
        exc = self.assertRaises(api_client.OpenStackApiException,
                                self.boot, passthrough_specs('L4'))
        self.assertIn('class:%s' % L4_RC, exc.response.text)
        self.quota('set', '--project', self.project.id, '--model', 'L4',
                   '--limit', '1')
        self.boot(passthrough_specs('L4'))
        rc, out = self.quota('unset', '--project', self.project.id,
                             '--model', 'L4')
        self.assertIn('limit 1 removed; the default 0 applies now', out)
        # a default still used by project limits is not removed
        self.quota('set', '--project', self.project.id, '--model', 'L4',
                   '--limit', '1')
        exc = self.refused('unset', '--default', '--model', 'L4')
        self.assertIn('still has project limits', str(exc))

    def test_bad_input(self):
        exc = self.refused('set', '--project', 'nobody', '--model',
                           'A100', '--limit', '4')
        self.assertIn("Keystone has no project 'nobody'", str(exc))
        exc = self.refused('set', '--project', self.project.id,
                           '--model', 'H100', '--limit', '4')
        self.assertIn("No GPU resource class in Placement matches model "
                      "'H100'; known: A100_80GB_PCIE (passthrough), "
                      "L4 (passthrough).", str(exc))

    def test_reserve_looks_the_project_up_in_keystone(self):
        # gpu reservation create asks the same real Keystone: an id it
        # does not know is refused before anything is written
        gpu = '0000:81:00.0'
        err = osc_client.refused(self, 'gpu', 'reservation', 'create',
                                 '--project', 'f' * 32, '--host', HOST,
                                 '--gpu', gpu)
        self.assertIn('Keystone has no such project', err)
        # a project Keystone knows passes that check and reaches Placement,
        # which refuses a PCI-in-Placement GPU (nova-compute rewrites its
        # traits): reserve the whole host instead
        err = osc_client.refused(self, 'gpu', 'reservation', 'create',
                                 '--project', self.project.id, '--host',
                                 HOST, '--gpu', gpu)
        self.assertNotIn('Keystone', err)
        self.assertIn('whole host', err)

    def test_keystone_refusals_name_the_fix(self):
        # a project member, not an admin with system scope: Keystone's 403
        self.cloud.keystone(self.keystone.member_auth(self.project))
        err = self.refused('set', '--project', self.project.id, '--model',
                           'L4', '--limit', '1')
        self.assertIn('Keystone refused to', err)
        self.assertIn('authenticate with OS_SYSTEM_SCOPE=all', err)
        # a member for Placement too: its policy refuses first
        self.cloud.roles = 'reader,member'
        err = self.refused('set', '--project', self.project.id, '--model',
                           'L4', '--limit', '1')
        self.assertIn('Placement answered 403', err)


class VgpuQuotaTest(QuotaMixin, base.GpuVGPUTestBase):
    """An A100 vGPU host and an L4 vGPU host, nova.conf from our generator.

    Each model's vGPUs are in their own class (``[mdev_<type>]
    mdev_class``).
    """

    def setUp(self):
        super().setUp()
        self.drops = {}
        self.start_generated_host('va', base.A100)
        self.start_generated_host('vl', base.L4)

    def start_generated_host(self, host: str, model: dict) -> None:
        """Discover the host, generate its nova.conf, start nova-compute.

        nova-compute's libvirt driver reads ``[mdev_*]`` when it starts,
        so each host keeps the classes of its own drop-in.
        """
        pci_info = fakelibvirt.HostPCIDevicesInfo(
            num_pci=0, num_pfs=0, num_vfs=0, num_mdevcap=2)
        self.pci_infos[host] = pci_info
        self.gpu_facts[host] = {base.PGPU0: base.gpu(model),
                                base.PGPU1: base.gpu(model)}
        self._write_agent_files(host)
        drop = nova_conf_gen.generate(
            manager.discover(self.agent_conf(host)),
            nova_conf_gen.GeneratorOptions(scheduler=False))
        self.drops[host] = drop
        types = drop.values('devices', 'enabled_mdev_types')[0]
        self.flags(enabled_mdev_types=types.split(','), group='devices')
        nova_conf.devices.register_dynamic_opts(base.CONF)
        opts = {'devices': {'enabled_mdev_types': types}}
        for mtype in types.split(','):
            section = 'mdev_%s' % mtype
            values = dict(drop.sections[section])
            self.flags(device_addresses=values['device_addresses'].split(
                ','), mdev_class=values['mdev_class'], group=section)
            opts[section] = values
        self.agent_nova_conf[host] = opts
        self.start_compute_with_vgpu(host, pci_info)
        self.run_agent(host)

    def test_fifth_a100_vgpu_refused_l4_vgpu_boots(self):
        a100_rc = 'CUSTOM_VGPU_A100_80GB_PCIE'
        self.assertEqual([a100_rc], self.drops['va'].values(
            'mdev_nvidia-11', 'mdev_class'))
        pgpu = self._get_provider_uuid_by_name(self.pgpu('va', base.PGPU0))
        self.assertEqual({a100_rc: 16}, {
            rc: inv['total'] for rc, inv in
            self._get_provider_inventory(pgpu).items()})

        rc, out = self.quota('set', '--project', self.project.name,
                             '--model', 'A100', '--kind', 'vgpu',
                             '--limit', '4')
        self.assertEqual(0, rc)
        self.assertIn('class:%s (A100_80GB_PCIE (vgpu)): - -> 4' % a100_rc,
                      out)
        # what flavor create writes: the per-model class, not VGPU
        a100 = flavor.extra_specs(flavor.GpuFlavorRequest(
            model='A100_80GB_PCIE'))
        self.assertEqual('1', a100['resources:%s' % a100_rc])
        for _ in range(4):
            self.assertEqual('va', self.server_host(self.boot(a100)['id']))
        exc = self.assertRaises(api_client.OpenStackApiException,
                                self.boot, a100)
        self.assertEqual(403, exc.response.status_code)
        self.assertIn('Resource class:%s is over limit of 4' % a100_rc,
                      exc.response.text)
        l4 = self.boot(flavor.extra_specs(flavor.GpuFlavorRequest(
            model='L4')))
        self.assertEqual('vl', self.server_host(l4['id']))

        self.assertEqual(
            [[self.project.name, 'A100_80GB_PCIE', 'vgpu',
              'class:' + a100_rc, 4, 'project', 4, 0],
             [self.project.name, 'L4', 'vgpu', 'class:CUSTOM_VGPU_L4',
              None, 'none', 1, 0]],
            self.shown('--project', self.project.name, '--kind', 'vgpu'))


class UnifiedLimitsSwitchTest(QuotaMixin,
                              integrated_helpers._IntegratedTestBase):
    """quota.rst's switch: check, nova-manage's migration, check again.

    Nova still runs the legacy quota driver (before the switch): its
    quotas are in its database; Keystone is the real one.
    """

    ADMIN_API = True

    def setUp(self):
        super().setUp()
        self.flags(driver='nova.quota.DbQuotaDriver', group='quota')
        self.other = self.keystone.project()

    def nova_manage_migrate(self, project_id=None):
        """``nova-manage limits migrate_to_unified_limits``, Nova's own."""
        conf = nova_conf.CONF
        # what nova-manage's get_sdk_adapter loads from [keystone_authtoken]
        # (the session, adapter and password plugin options), where not
        # registered yet; unregistered after the test as the Keystone
        # fixture does
        group = conf.keystone_authtoken
        opts = {}
        for opt in (ks_loading.get_session_conf_options()
                    + ks_loading.get_adapter_conf_options()
                    + ks_loading.get_auth_common_conf_options()
                    + ks_loading.get_auth_plugin_conf_options('password')):
            if opt.dest not in group and opt.dest not in opts:
                opts[opt.dest] = opt
        conf.register_opts(list(opts.values()), group='keystone_authtoken')
        self.addCleanup(keystone_fixture.UnifiedLimits._unregister, conf,
                        list(opts.values()), 'keystone_authtoken')
        self.flags(auth_type='password', auth_url=self.keystone.url,
                   username='admin', password=keystone_server.PASSWORD,
                   user_domain_id='default', system_scope='all',
                   group='keystone_authtoken')
        stdout = self.useFixture(fixtures.StringStream('nova-manage'))
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', stdout.stream))
        rc = nova_manage.LimitsCommands().migrate_to_unified_limits(
            project_id=project_id, region_id=keystone_server.REGION)
        stdout.stream.flush()
        return rc, stdout.getDetails()['nova-manage'].as_text()

    def test_check_migrate_check(self):
        # a legacy per-project override, and Nova's legacy defaults
        self.admin_api.update_quota({'cores': 40, 'instances': 25},
                                    project_id=self.project.id)
        rc, out = self.quota('check')
        self.assertEqual(1, rc)
        p = '%s (%s)' % (self.project.name, self.project.id)
        # Keystone has a 'servers' default (QuotaMixin), nothing else
        self.assertIn('DIFFERS  default: servers = 10 (legacy instances) '
                      '-> after the switch 100', out)
        self.assertIn('LOST     default: class:VCPU = 20 (legacy cores) -> '
                      'after the switch no limit (unlimited, or 0 where '
                      '[quota] unified_limits_resource_strategy requires '
                      'one: servers by default)', out)
        self.assertIn('LOST     project %s: class:VCPU = 40 (legacy cores) '
                      '-> after the switch no limit' % p, out)
        self.assertIn('LOST     project %s: servers = 25 (legacy instances) '
                      '-> after the switch 100 (the default)' % p, out)
        # a project without overrides loses nothing
        self.assertNotIn(self.other.id, out)
        self.assertIn('  nova-manage limits migrate_to_unified_limits '
                      '--region-id %s\n' % keystone_server.REGION, out)
        self.assertIn('  nova-manage limits migrate_to_unified_limits '
                      '--project-id %s --region-id %s\n'
                      % (self.project.id, keystone_server.REGION), out)

        # the defaults only: the project's overrides are still lost.
        # (nova-manage's exit code 3: its scan of the flavors found
        # DISK_GB, which has no legacy quota, without a registered limit)
        rc, out = self.nova_manage_migrate()
        self.assertEqual(3, rc, out)
        self.assertIn('| class:DISK_GB | missing', out)
        rc, out = self.quota('check')
        self.assertEqual(1, rc)
        self.assertNotIn('LOST     default', out)
        self.assertIn('LOST     project %s: class:VCPU = 40' % p, out)

        # the command the check printed for the project
        rc, out = self.nova_manage_migrate(self.project.id)
        self.assertEqual(3, rc, out)
        rc, out = self.quota('check')
        self.assertEqual(0, rc)
        self.assertIn('nothing would be lost', out)
        rc, out = self.quota('check', '--project', self.project.name)
        self.assertEqual(0, rc)
        self.assertIn(', 1 project(s):', out)
