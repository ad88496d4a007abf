# SPDX-License-Identifier: Apache-2.0

"""``openstack gpu snapshot`` and ``gpu capacity`` against Nova's harness.

h1 has an A100 (8 vGPUs of nvidia-12) and an L4 (16 of nvidia-11); h2,
in host aggregate rack2, two L4s (8 and 16); our agent reports them all;
one A100 server runs.  The snapshot must be a scenario the simulator
loads unchanged; the capacity of an A100 flavor must equal the number of
its servers that really boot in the harness before NoValidHost (our model
rule keeps them off the free L4s).

The A100 flavor takes 16 vCPUs: h1 offers 64 (16 x 4.0), so four fit,
vCPUs bound before vGPUs do.  vGPUs cannot bound in this harness:
fakelibvirt's pGPU keeps its ``availableInstances`` when an mdev is
created, so Nova's VGPU inventory grows with each server.
"""
import contextlib
import os

import fixtures
import testtools

from gpu_nova_ext.operator import audit
from gpu_nova_ext.operator import capacity
from gpu_nova_ext.operator import cloud_facts
from gpu_nova_ext.operator import snapshot
from gpu_nova_ext.simulate import nova_conf_file
from gpu_nova_ext.simulate import scenario as scn
from gpu_nova_ext.tests.functional.nova import base
from gpu_nova_ext.tests.functional import osc_client
from nova.tests.fixtures import libvirt as fakelibvirt

A100_VGPU = {'resources:VGPU': '1', 'gpu:model': 'A100'}
FLAVOR = 'a100-vgpu'


@contextlib.contextmanager
def harness_kept(testcase, hosts):
    """Around a command that runs the simulator in the harness's process.

    The simulator's embedded Placement and the harness's share
    Placement's process globals (one Placement per process), and the
    simulation resets the scheduler's GPU state cache: the harness's
    policy enforcer comes back and the agents of ``hosts`` cast again, as
    they do every report_interval.
    """
    from placement import policy
    enforcer = policy._ENFORCER

    def reset():
        # forget the embedded Placement's enforcer, keep the harness's
        policy._ENFORCER = None

    try:
        with fixtures.MonkeyPatch('placement.policy.reset', reset):
            yield
    finally:
        policy._ENFORCER = enforcer
        for host in hosts:
            testcase.run_agent(host)


def simulating(testcase, hosts, *argv) -> list[dict]:
    """``openstack ARGV -f json`` of a command that runs the simulator."""
    with harness_kept(testcase, hosts):
        return osc_client.openstack_json(testcase, *argv)


def start_a100_l4_hosts(testcase) -> None:
    """h1 with an A100 and an L4, h2 with two L4s (vGPUs).

    One vGPU type per pGPU address on both hosts: the harness's
    nova-computes share one nova.conf.
    """
    for host, first_gpu in (('h1', base.A100), ('h2', base.L4)):
        testcase.start_gpu_host(
            host, {base.PGPU0: base.gpu(first_gpu),
                   base.PGPU1: base.gpu(base.L4)},
            multiple_gpu_types=True,
            mdev_types={base.PGPU0: fakelibvirt.NVIDIA_12_VGPU_TYPE,
                        base.PGPU1: fakelibvirt.NVIDIA_11_VGPU_TYPE})


class SnapshotCapacityTest(base.GpuVGPUTestBase):

    def setUp(self):
        super().setUp()
        start_a100_l4_hosts(self)
        agg = self.admin_api.post_aggregate({'aggregate': {'name': 'rack2'}})
        self.admin_api.add_host_to_aggregate(agg['id'], 'h2')
        self.flavor = self._create_flavor(
            name=FLAVOR, vcpu=16, memory_mb=512, disk=1, ephemeral=0,
            extra_spec=A100_VGPU)
        self.first = self._create_server(
            name='first', image_uuid=base.IMAGE, flavor_id=self.flavor,
            networks='none')
        self.assertEqual('h1', self.first['OS-EXT-SRV-ATTR:host'])
        self.run_agent('h1')
        self.useFixture(osc_client.Cloud.of_harness(self))

    def test_snapshot_is_a_scenario_of_the_cloud(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'cloud.yaml')
        rc, out, err = osc_client.openstack('gpu', 'snapshot', '--output',
                                            path)
        self.assertEqual(0, rc, err)
        with open(path) as f:
            text = f.read()
        self.assertTrue(text.startswith('# gpu-nova-ext scenario'), text)
        self.assertIn('taken 20', text)
        self.assertIn('Not represented:', text)
        # what simulate reads, unchanged
        scenario = scn.load(path)
        self.assertEqual(['h1', 'h2'], [h.name for h in scenario.hosts])

        def gpus(host):
            return sorted((g['name'], g['vgpu_types'][0]['max'])
                          for g in scenario.host(host).gpus.values())
        self.assertEqual([('A100 80GB PCIE', 8), ('L4', 16)], gpus('h1'))
        self.assertEqual([('L4', 8), ('L4', 16)], gpus('h2'))
        self.assertEqual({'rack2'}, set(scenario.host('h2').aggregates))
        self.assertEqual({}, scenario.host('h1').aggregates)
        self.assertEqual(A100_VGPU, scenario.flavors[FLAVOR].extra_specs)
        # the server that runs: one boot of its flavor
        self.assertEqual([(FLAVOR, 'first')],
                         [(s.flavor, s.name) for s in scenario.steps])
        self.assertEqual({FLAVOR: 1}, scenario.workload.flavors)

    def boot_until_failure(self) -> list[dict]:
        """Servers of the flavor, one by one, until one finds no host."""
        booted = []
        while True:
            created = self.api.post_server({'server': {
                'name': 'fill-%d' % len(booted), 'imageRef': base.IMAGE,
                'flavorRef': self.flavor, 'networks': 'none'}})
            server = self._until(
                lambda: self.api.get_server(created['id']),
                lambda s: s['status'] in ('ACTIVE', 'ERROR'),
                lambda s: 'server %s still %s' % (created['id'],
                                                  s['status']))
            if server['status'] == 'ERROR':
                self.assertIn('No valid host', server['fault']['message'])
                return booted
            booted.append(server)
            self.assertLess(len(booted), 20, 'no NoValidHost in sight')

    def capacity(self, *argv) -> list[dict]:
        """``openstack gpu capacity ARGV -f json``; the harness kept."""
        return simulating(self, ('h1', 'h2'), 'gpu', 'capacity', *argv)

    def test_capacity_is_what_boots(self):
        rows = self.capacity('--flavor', FLAVOR)
        self.assertEqual([(FLAVOR, 'A100_80GB_PCIE', '-', 3, False)],
                         [(r['Flavor'], r['GPU Model'], r['Aggregate'],
                           r['Fits'], r['At Least']) for r in rows])
        booted = self.boot_until_failure()
        self.assertEqual(3, len(booted))
        self.assertEqual({'h1'}, {s['OS-EXT-SRV-ATTR:host'] for s in booted})
        # --aggregate: the rows of its hosts only (L4s: none fits)
        rows = self.capacity('--flavor', FLAVOR, '--aggregate', 'rack2')
        self.assertEqual([('rack2', 0)], [(r['Aggregate'], r['Fits'])
                                          for r in rows])

    def test_bad_input_one_line_exit_2(self):
        err = osc_client.refused(self, 'gpu', 'capacity', '--flavor', 'nope')
        self.assertIn('no such flavor in Nova; GPU flavors: %s' % FLAVOR,
                      err)
        err = osc_client.refused(self, 'gpu', 'capacity', '--aggregate',
                                 'nope')
        self.assertIn('openstack aggregate list', err)
        err = osc_client.refused(self, 'gpu', 'capacity', '--max-servers',
                                 '0')
        self.assertIn('give 1 or more', err)
        err = osc_client.refused(self, 'gpu', 'snapshot', '--output',
                                 '/nonexistent/dir/cloud.yaml')
        self.assertIn('cannot write it', err)
        for command in ('capacity', 'explain'):
            err = osc_client.refused(self, 'gpu', command, '--flavor',
                                     FLAVOR, '--nova-conf',
                                     '/nonexistent/nova.conf')
            self.assertIn('--nova-conf: cannot read /nonexistent/nova.conf',
                          err)


class CapacityReplayTest(testtools.TestCase):
    """What capacity says when the replay of the servers differs.

    No harness: the facts as :func:`cloud_facts.collect` returns them, for a
    cloud whose h1 GPU is MIG-partitioned (a snapshot leaves it out) and
    runs two servers; h2 has one free vGPU.
    """

    def test_unplaced_servers_are_said(self):
        flavor = cloud_facts.FlavorFact(name='g1', vcpus=1, ram=512, disk=1,
                                        extra_specs={'resources:VGPU': '1'})
        a100 = ['CUSTOM_GPU_MODEL_A100_80GB_PCIE', 'CUSTOM_GPU_MODE_VGPU']
        providers, roots = [], {}
        for host, traits, total in (('h1', a100 + ['CUSTOM_GPU_MIG_ENABLED'],
                                     7), ('h2', a100, 1)):
            providers.append(audit.ProviderView(uuid=host, name=host,
                                                root_uuid=host))
            providers.append(audit.ProviderView(
                uuid=host + '-g', name=host + '_pci_0000_3b_00_0',
                root_uuid=host, parent_uuid=host, traits=traits,
                inventories={'VGPU': {'total': total, 'reserved': 0}}))
            roots[host] = {'VCPU': {'total': 8, 'reserved': 0,
                                    'allocation_ratio': 1.0},
                           'MEMORY_MB': {'total': 8192, 'reserved': 0},
                           'DISK_GB': {'total': 100, 'reserved': 0}}
        servers = [
            cloud_facts.ServerFact(
                id='id-%d' % i, name='vm%d' % i, host='h1',
                status='ACTIVE', project_id='p1',
                created_at='2026-01-0%d' % i,
                flavor={'name': 'g1', 'vcpus': 1, 'ram': 512, 'disk': 1,
                        'extra_specs': dict(flavor.extra_specs)})
            for i in (1, 2)]
        facts = cloud_facts.CloudFacts(providers=providers,
                                       root_inventories=roots,
                                       servers=servers, flavors=[flavor],
                                       aggregates={})
        snap = snapshot.build(facts, 'now')
        found = capacity.answer(facts, snap, [])
        # h2's free vGPU: the servers of h1 are not replayed onto it
        self.assertEqual([('g1', 'A100_80GB_PCIE', '-', 1)],
                         [(r.flavor, r.model, r.aggregate, r.fits)
                          for r in found.rows])
        said = '\n'.join(found.notes)
        # both run on h1, whose GPU the snapshot left out: each replayed
        # boot asks for h1 and finds no host there
        self.assertIn('g1: 2 of the 2 current servers found no host when '
                      'replayed on the host they run on (vm1-1, vm2-1): the '
                      'cloud holds more than the snapshot could replay, '
                      'this capacity is too high', said)
        self.assertIn('not represented in the snapshot: h1: GPU '
                      'h1_pci_0000_3b_00_0 is MIG-partitioned', said)
        for line in capacity.UNACCOUNTED:
            self.assertIn('not accounted for: ' + line, said)

    def test_the_schedulers_nova_conf_decides_the_count(self):
        # two hosts of four vGPUs each: eight fit, unless the schedulers'
        # own nova.conf caps the instances per host
        flavor = cloud_facts.FlavorFact(name='g1', vcpus=1, ram=512, disk=1,
                                        extra_specs={'resources:VGPU': '1'})
        a100 = ['CUSTOM_GPU_MODEL_A100_80GB_PCIE', 'CUSTOM_GPU_MODE_VGPU']
        providers, roots = [], {}
        for host in ('h1', 'h2'):
            providers.append(audit.ProviderView(uuid=host, name=host,
                                                root_uuid=host))
            providers.append(audit.ProviderView(
                uuid=host + '-g', name=host + '_pci_0000_3b_00_0',
                root_uuid=host, parent_uuid=host, traits=a100,
                inventories={'VGPU': {'total': 4, 'reserved': 0}}))
            roots[host] = {'VCPU': {'total': 8, 'reserved': 0,
                                    'allocation_ratio': 1.0},
                           'MEMORY_MB': {'total': 8192, 'reserved': 0},
                           'DISK_GB': {'total': 100, 'reserved': 0}}
        facts = cloud_facts.CloudFacts(providers=providers,
                                       root_inventories=roots, servers=[],
                                       flavors=[flavor], aggregates={})
        snap = snapshot.build(facts, 'now')
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'nova.conf')
        with open(path, 'w') as f:
            f.write('[filter_scheduler]\nenabled_filters = ComputeFilter,'
                    'NumInstancesFilter,GpuModelFilter\n'
                    'max_instances_per_host = 3\n[scheduler]\nworkers = 4\n')
        stock = capacity.answer(facts, snap, [])
        capped = capacity.answer(facts, snap, [], nova_conf=(
            nova_conf_file.read([path]), [path]))
        self.assertEqual([8], [r.fits for r in stock.rows])
        self.assertEqual([6], [r.fits for r in capped.rows])
        said = '\n'.join(capped.notes)
        self.assertIn('--nova-conf %s: took [filter_scheduler] '
                      'enabled_filters, [filter_scheduler] '
                      'max_instances_per_host' % path, said)
        self.assertIn('left out (they run the service, not placement): '
                      '[scheduler] workers', said)
        self.assertNotIn(nova_conf_file.NOT_GIVEN, said)
        self.assertIn('not accounted for: ' + nova_conf_file.NOT_GIVEN,
                      '\n'.join(stock.notes))
