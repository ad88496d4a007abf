# SPDX-License-Identifier: Apache-2.0

"""The pure part of the snapshot: the cloud as Placement and Nova describe
it -> a scenario the simulator's loader accepts, and what it left out."""
import datetime
import sys
from unittest import mock

import fixtures
import testtools
import yaml

from gpu_nova_ext import exception
from gpu_nova_ext import naming
from gpu_nova_ext.operator import audit
from gpu_nova_ext.operator import capacity
from gpu_nova_ext.operator import cloud_facts
from gpu_nova_ext.operator import snapshot
from gpu_nova_ext.simulate import scenario as scn

A100 = ['CUSTOM_GPU_MODEL_A100_80GB_PCIE', 'CUSTOM_GPU_MODE_VGPU',
        'CUSTOM_GPU_DRIVER_550']
L4_PASS = ['CUSTOM_GPU_MODEL_L4', 'CUSTOM_GPU_MODE_PASSTHROUGH']
COMPUTE = {'VCPU': {'total': 64, 'reserved': 4, 'allocation_ratio': 4.0},
           'MEMORY_MB': {'total': 262144, 'reserved': 4096,
                         'allocation_ratio': 1.5},
           'DISK_GB': {'total': 1000, 'reserved': 0,
                       'allocation_ratio': 1.0}}
GPU_FLAVOR = cloud_facts.FlavorFact(name='a100.vgpu', vcpus=4, ram=8192,
                                    disk=20, extra_specs={
                                        'resources:VGPU': '1',
                                        'gpu:model': 'A100'})
SMALL = cloud_facts.FlavorFact(name='small', vcpus=1, ram=512, disk=1,
                               extra_specs={})


def child(uuid, name, root, traits, inv):
    return audit.ProviderView(
        uuid=uuid, name=name, root_uuid=root, parent_uuid=root,
        traits=list(traits),
        inventories={rc: {'total': t, 'reserved': 0}
                     for rc, t in inv.items()})


def cloud(*hosts, servers=(), flavors=(GPU_FLAVOR, SMALL), aggregates=None):
    """Facts of hosts ``(name, [child views])``."""
    providers, roots = [], {}
    for name, children in hosts:
        providers.append(audit.ProviderView(uuid=name, name=name,
                                            root_uuid=name))
        roots[name] = COMPUTE
        providers += children
    return cloud_facts.CloudFacts(providers=providers, root_inventories=roots,
                                  servers=list(servers), flavors=list(flavors),
                                  aggregates=dict(aggregates or {}))


def pgpus(host, count, traits=A100, total=8, rc='VGPU'):
    return [child('%s-g%d' % (host, i), '%s_pci_0000_%02x_00_0'
                  % (host, 0x3b + i), host, traits, {rc: total})
            for i in range(count)]


def server(name, host, flavor=GPU_FLAVOR, created='2026-01-01', **kw):
    return cloud_facts.ServerFact(
        id=name + '-id', name=name, host=host, status='ACTIVE',
        project_id=kw.get('project', 'p1'), created_at=created,
        flavor={'name': flavor.name, 'vcpus': flavor.vcpus,
                'ram': flavor.ram, 'disk': flavor.disk,
                'extra_specs': dict(flavor.extra_specs)})


class TestBuild(testtools.TestCase):

    def loaded(self, snap):
        """The scenario as ``gpu-nova-ext simulate`` reads the file."""
        text = snapshot.render(snap, 'test-cloud')
        return scn.from_dict(yaml.safe_load(text), '<test>')

    def test_hosts_gpus_servers_and_workload(self):
        facts = cloud(('h1', pgpus('h1', 2)), ('h2', pgpus('h2', 2)),
                      servers=[server('vm b', 'h2', created='2026-02'),
                               server('vm a', 'h1', created='2026-01'),
                               server('lost', None)],
                      aggregates={'rack2': (['h2'], {'x': 1})})
        snap = snapshot.build(facts, '2026-12-03T00:00:00Z')
        h1, h2 = snap.data['hosts']
        # what Placement offers: (total - reserved) x ratio; vCPUs keep
        # their ratio
        self.assertEqual((60, 4.0, 387072, 1000), (
            h1['vcpus'], h1['cpu_allocation_ratio'], h1['memory_mb'],
            h1['disk_gb']))
        # the GPUs at the cloud's own PCI addresses
        self.assertEqual([{'model': 'A100_80GB_PCIE', 'count': 2,
                           'mode': 'vgpu', 'vgpu_type': 'snapshot-vgpu',
                           'vgpu_instances': 8, 'driver_version': '550',
                           'addresses': ['0000:3b:00.0', '0000:3c:00.0']}],
                         h1['gpus'])
        self.assertEqual({'rack2': {'x': '1'}}, h2['aggregates'])
        self.assertNotIn('aggregates', h1)
        # servers oldest first, names the format takes
        self.assertEqual([('a100.vgpu', 'vm-a', 'p1'),
                          ('a100.vgpu', 'vm-b', 'p1')],
                         [(b['flavor'], b['name'], b['project'])
                          for b in snap.data['boots']])
        self.assertEqual({'vm-a': 'h1', 'vm-b': 'h2'}, snap.placed)
        # what fits next: the GPU flavors, bounded
        self.assertEqual({'flavors': {'a100.vgpu': 1},
                          'until': 'first_failure',
                          'max_servers': snapshot.FILL_MAX_SERVERS},
                         snap.data['workload'])
        self.assertEqual(['1 server(s) without a host (ERROR or not '
                          'scheduled) hold nothing and are left out'],
                         snap.dropped)
        scenario = self.loaded(snap)
        self.assertEqual(['h1', 'h2'], [h.name for h in scenario.hosts])
        self.assertEqual(2, len(scenario.host('h1').gpus))
        self.assertEqual(['a100.vgpu', 'small'], sorted(scenario.flavors))

    def test_pci_aliases_follow_from_the_models(self):
        # nova.conf's [pci] alias is in no API: gpu-nova-ext's own alias
        # of an offered passthrough model is written, another is said
        l4 = cloud_facts.FlavorFact(name='l4.pci', vcpus=1, ram=512, disk=1,
                                    extra_specs={
                                        'pci_passthrough:alias': 'gpu-l4:1'})
        own = cloud_facts.FlavorFact(name='own.pci', vcpus=1, ram=512, disk=1,
                                     extra_specs={
                                         'pci_passthrough:alias': 'my-l4:1'})
        facts = cloud(('h1', pgpus('h1', 2, traits=L4_PASS, total=1,
                                   rc='CUSTOM_GPU_L4')),
                      flavors=(l4, own, SMALL),
                      servers=[server('vm', 'h1', flavor=own)])
        snap = snapshot.build(facts, '2026-12-03T00:00:00Z')
        self.assertEqual({'pci': {'alias': [{
            'name': 'gpu-l4', 'resource_class': 'CUSTOM_GPU_L4',
            'device_type': 'type-PCI'}]}}, snap.data['nova_conf'])
        self.assertEqual(['l4.pci', 'small'],
                         sorted(f['name'] for f in snap.data['flavors']))
        said = '\n'.join(snap.dropped)
        self.assertIn('flavor own.pci: its PCI alias my-l4 is defined in '
                      'nova.conf', said)
        self.assertIn('server vm (vm-id) on h1: its PCI alias my-l4', said)
        scenario = self.loaded(snap)
        self.assertIn('l4.pci', scenario.flavors)

    def test_header_says_when_and_what_is_missing(self):
        facts = cloud(('h1', pgpus('h1', 1)),
                      servers=[server('x', 'gone')])
        text = snapshot.render(snapshot.build(facts, '2026-12-03T10:00:00Z'),
                               'mycloud')
        head = [line for line in text.splitlines() if line.startswith('#')]
        self.assertIn('# gpu-nova-ext scenario: a snapshot of the cloud '
                      'mycloud', head)
        self.assertIn('# taken 2026-12-03T10:00:00Z by openstack gpu '
                      'snapshot; play it with', head)
        self.assertIn('#   - server x (x-id) on gone: its host is not in '
                      'the snapshot', head)
        for line in snapshot.NOT_REPRESENTED:
            self.assertIn('#   - ' + line, head)

    def test_passthrough_vfio_and_what_cannot_be_written(self):
        vfs = [child('h2-vf%d' % i, 'h2_pci_0000_3b_00_%d' % (i + 1), 'h2',
                     A100, {'VGPU': 1}) for i in range(4)]
        mig = pgpus('h3', 1, traits=A100 + ['CUSTOM_GPU_MIG_ENABLED'])
        odd = pgpus('h4', 1, traits=['CUSTOM_GPU_MODEL_NOT_A_GPU'])
        facts = cloud(
            ('h1', pgpus('h1', 2, traits=L4_PASS, total=1,
                         rc='CUSTOM_GPU_L4')),
            ('h2', vfs), ('h3', mig), ('h4', odd),
            ('bad name!', []))
        snap = snapshot.build(facts, 'now')
        hosts = {h['name']: h for h in snap.data['hosts']}
        self.assertEqual([{'model': 'L4', 'count': 2,
                           'mode': 'passthrough',
                           'addresses': ['0000:3b:00.0', '0000:3c:00.0']}],
                         hosts['h1']['gpus'])
        self.assertEqual('CUSTOM_GPU_L4', hosts['h1']['pci_resource_class'])
        # the VFs of one GPU: one vgpu-vfio GPU with one vGPU each (at
        # the simulator's address, which lays out its VFs)
        self.assertEqual([{'model': 'A100_80GB_PCIE', 'count': 1,
                           'mode': 'vgpu-vfio', 'vgpu_type': 'snapshot-vgpu',
                           'vgpu_instances': 4, 'driver_version': '550'}],
                         hosts['h2']['gpus'])
        # left out, and said
        self.assertEqual('none', hosts['h3']['nova_gpu_mode'])
        self.assertEqual('none', hosts['h4']['nova_gpu_mode'])
        self.assertNotIn('bad name!', hosts)
        said = '\n'.join(snap.dropped)
        self.assertIn('MIG-partitioned', said)
        self.assertIn('NOT_A_GPU, which the simulator does not know', said)
        self.assertIn('host bad name!: its name is not a scenario name',
                      said)
        self.loaded(snap)

    def test_servers_replay_on_the_gpus_they_hold(self):
        vfs = [child('h2-vf%d' % i, 'h2_pci_0000_3b_00_%d' % (4 + i), 'h2',
                     A100, {'VGPU': 1}) for i in range(2)]
        facts = cloud(('h1', pgpus('h1', 2)), ('h2', vfs),
                      servers=[server('on-second', 'h1'),
                               server('on-vf', 'h2')])
        # Placement's allocations of the GPU providers in use
        facts.gpu_consumers = {'h1-g1': ['on-second-id'],
                               'h2-vf1': ['on-vf-id']}
        snap = snapshot.build(facts, 'now')
        boots = {b['name']: b for b in snap.data['boots']}
        self.assertEqual(['0000:3c:00.0'], boots['on-second']['gpus'])
        # a vgpu-vfio GPU is at the simulator's address: not pinned, said
        self.assertNotIn('gpus', boots['on-vf'])
        self.assertIn("server on-vf (on-vf-id) on h2: its GPU(s) "
                      "0000:3b:00.5 are at the simulator's addresses",
                      '\n'.join(snap.dropped))
        # the scenario pins it there: the replay claims that GPU
        scenario = self.loaded(snap)
        pinned = [step for step in scenario.steps
                  if getattr(step, 'name', None) == 'on-second']
        self.assertEqual(['0000:3c:00.0'], pinned[0].gpus)

    def test_addresses_colliding_with_the_vf_layout_are_said(self):
        # a pGPU at 0000:12:00.0, where the simulator lays out the PF of
        # the host's vgpu-vfio GPU (its second kind): every GPU of the
        # host at the simulator's addresses, said
        pgpu = child('h1-g0', 'h1_pci_0000_12_00_0', 'h1', A100,
                     {'VGPU': 8})
        vfs = [child('h1-vf%d' % i, 'h1_pci_0000_3b_00_%d' % (4 + i), 'h1',
                     A100, {'VGPU': 1}) for i in range(2)]
        snap = snapshot.build(cloud(('h1', [pgpu] + vfs)), 'now')
        kinds = snap.data['hosts'][0]['gpus']
        self.assertEqual(['vgpu', 'vgpu-vfio'], [k['mode'] for k in kinds])
        self.assertFalse(any('addresses' in k for k in kinds), kinds)
        self.assertIn("h1: its GPUs' PCI addresses collide with the "
                      "simulator's layout", '\n'.join(snap.dropped))
        self.loaded(snap)

    def test_health_reservations_and_quotas_reach_the_scenario(self):
        """Each reaches the scenario the simulator plays.

        h1: 3 GPUs, the second unhealthy by its agent's root trait, the
        third reserved for project team-a; h2 in an aggregate kept for
        team-b; Keystone limits on h1's class and others.
        """
        rc = 'CUSTOM_VGPU_A100_80GB_PCIE'
        gpus = pgpus('h1', 3, rc=rc)
        gpus[2].traits.append(naming.reservation_trait('team-a'))
        facts = cloud(('h1', gpus), ('h2', pgpus('h2', 1)),
                      aggregates={'gpu-reserved-team-b': (
                          ['h2'], {'filter_tenant_id': 'team-b'})})
        h1 = facts.providers[0]
        h1.traits += [naming.host_reported_trait(datetime.datetime.now(
            datetime.timezone.utc)), naming.gpu_health_trait(
                'unhealthy', '0000:3c:00.0')]
        facts.limits = cloud_facts.LimitFacts(
            registered={'class:' + rc: 8, 'class:CUSTOM_VGPU_L4': 4,
                        'servers': 10, 'class:VCPU': 100},
            projects={'team-a': {'class:' + rc: 2},
                      'team-b': {'class:' + rc: 0}})
        snap = snapshot.build(facts, 'now')
        hosts = {h['name']: h for h in snap.data['hosts']}
        self.assertEqual([(2, None), (1, 'unhealthy')],
                         [(k['count'], k.get('health'))
                          for k in hosts['h1']['gpus']])
        # each GPU at its own address: the unhealthy one is the last
        # kind's, the reserved one is the cloud's 0000:3d:00.0
        self.assertEqual([['0000:3b:00.0', '0000:3d:00.0'],
                          ['0000:3c:00.0']],
                         [k['addresses'] for k in hosts['h1']['gpus']])
        self.assertEqual({a: a for a in ('0000:3b:00.0', '0000:3c:00.0',
                                         '0000:3d:00.0')},
                         snap.addresses['h1'])
        self.assertEqual(
            [{'project': 'team-a', 'host': 'h1', 'gpu': '0000:3d:00.0'},
             {'project': 'team-b', 'host': 'h2'}],
            snap.data['reservations'])
        # h2 offers VGPU: only h1's class can be a scenario quota
        self.assertEqual([{'model': rc, 'limit': 8},
                          {'project': 'team-a', 'model': rc, 'limit': 2}],
                         snap.data['quotas'])
        said = '\n'.join(snap.dropped)
        self.assertIn('GPU quota of project team-b on class:%s (0): a '
                      'scenario cannot hold it' % rc, said)
        self.assertIn('GPU quota on class:CUSTOM_VGPU_L4: no host of the '
                      'snapshot offers that class by that name', said)
        self.assertNotIn('VCPU', said)
        scenario = self.loaded(snap)
        self.assertEqual(['team-a', 'team-b'],
                         [r.project for r in scenario.reservations])
        self.assertEqual(2, len(scenario.quotas))

    def test_limits_not_read_are_said(self):
        facts = cloud(('h1', pgpus('h1', 1)))
        facts.unread = ["GPU quotas: Keystone's unified limits were not "
                        'read (no identity endpoint)']
        snap = snapshot.build(facts, 'now')
        self.assertNotIn('quotas', snap.data)
        self.assertEqual(facts.unread, snap.dropped)

    def test_a_deleted_flavor_comes_from_the_server(self):
        gone = cloud_facts.FlavorFact(name='old', vcpus=2, ram=1024, disk=5,
                                      extra_specs={'resources:VGPU': '1'})
        snap = snapshot.build(cloud(('h1', pgpus('h1', 1)),
                                    servers=[server('s', 'h1', gone)]),
                              'now')
        old = [f for f in snap.data['flavors'] if f['name'] == 'old']
        self.assertEqual([{'name': 'old', 'vcpus': 2, 'ram_mb': 1024,
                           'disk_gb': 5,
                           'extra_specs': {'resources:VGPU': '1'}}], old)
        self.loaded(snap)

    def test_disk_is_what_nova_asks_placement(self):
        self.assertEqual(10 + 20 + 2, cloud_facts.disk_gb(10, 20, 1025))
        self.assertEqual(0, cloud_facts.disk_gb(None, None, ''))

    def test_no_compute_host_is_one_clear_error(self):
        exc = self.assertRaises(exception.InvalidArgument, snapshot.build,
                                cloud(), 'now')
        self.assertIn('no compute host', str(exc))


class TestCapacityFlavors(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.snap = snapshot.build(cloud(('h1', pgpus('h1', 1))), 'now')

    def test_default_is_every_gpu_flavor(self):
        self.assertEqual(['a100.vgpu'],
                         capacity.check_flavors(self.snap, []))

    def test_unknown_or_gpu_less_flavor_refused(self):
        exc = self.assertRaises(exception.InvalidArgument,
                                capacity.check_flavors, self.snap, ['small'])
        self.assertIn('it asks no GPU', str(exc))
        exc = self.assertRaises(exception.InvalidArgument,
                                capacity.check_flavors, self.snap, ['nope'])
        self.assertIn('no such flavor in Nova; GPU flavors: a100.vgpu',
                      str(exc))

    def test_fill_scenario_is_the_snapshot_with_one_flavor(self):
        data = capacity.scenario_of(self.snap, 'a100.vgpu', 5)
        self.assertEqual({'flavors': {'a100.vgpu': 1},
                          'until': 'first_failure', 'max_servers': 5},
                         data['workload'])
        self.assertEqual(self.snap.data['hosts'], data['hosts'])
        scn.from_dict(data, '<fill>')


class TestSimulatorExtra(testtools.TestCase):

    def test_without_the_simulator_the_extra_is_named(self):
        # an admin host without Nova and Placement: the import fails
        # (None in sys.modules, and no attribute on the package where
        # another test imported the module already)
        import gpu_nova_ext.simulate   # noqa: F401 - the package itself
        patcher = mock.patch.dict(sys.modules,
                                  {'gpu_nova_ext.simulate.runner': None})
        patcher.start()
        self.addCleanup(patcher.stop)
        self.useFixture(fixtures.MonkeyPatch(
            'gpu_nova_ext.simulate.runner', fixtures.MonkeyPatch.delete))
        exc = self.assertRaises(exception.ConfigError, snapshot.simulator,
                                'explain')
        self.assertIn('openstack gpu explain runs the simulator', str(exc))
        self.assertIn('pip install "gpu-nova-ext[simulator]"', str(exc))
