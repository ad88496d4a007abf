# SPDX-License-Identifier: Apache-2.0

"""``openstack gpu explain``: the rule that removes each host, or its rank.

:class:`ExplainFactsTest` gives :func:`explain.answer` the facts as
:func:`cloud_facts.collect` returns them (no harness, no Keystone: the
quota's limits are facts too); :class:`ExplainHarnessTest` runs the
command against Nova's in-process harness and boots the flavor to see
that the top host is where Nova's scheduler puts it.
"""
import datetime
import json
import os
import re

import fixtures
from nova import conf as nova_conf
from nova.tests.functional.api import client as api_client
from nova.tests.functional.libvirt import base as libvirt_base
import testtools
import yaml

from gpu_nova_ext import naming
from gpu_nova_ext.operator import audit
from gpu_nova_ext.operator import cloud_facts
from gpu_nova_ext.operator import explain
from gpu_nova_ext.operator import snapshot
from gpu_nova_ext.tests.functional.nova import base
from gpu_nova_ext.tests.functional.nova import test_osc_capacity
from gpu_nova_ext.tests.functional.nova import test_quota
from gpu_nova_ext.tests.functional import osc_client
from gpu_nova_ext.tests.functional.simulate import cli as simulate_cli

A100_RC = 'CUSTOM_VGPU_A100_80GB_PCIE'
L4_RC = 'CUSTOM_VGPU_L4'
TEAM_A = 'team-a'
TEAM_B = 'team-b'
CONF = nova_conf.CONF
# servers a snapshot's simulation and the live scheduler place
NEXT = 4
REPORTED = naming.host_reported_trait(
    datetime.datetime.now(datetime.timezone.utc))


def a100_flavor(name='a100', model='A100'):
    return cloud_facts.FlavorFact(name=name, vcpus=4, ram=1024, disk=1,
                                  extra_specs={'resources:%s' % A100_RC: '1',
                                               'gpu:model': model})


def gpu_host(host, model, rc, *, root_traits=(), gpu_traits=(), vcpus=16):
    """A host with one vGPU GPU at 0000:3b:00.0 (8 vGPUs of ``rc``)."""
    root = audit.ProviderView(uuid=host, name=host, root_uuid=host,
                              traits=[REPORTED, *root_traits])
    gpu = audit.ProviderView(
        uuid=host + '-g', name=host + '_pci_0000_3b_00_0', root_uuid=host,
        parent_uuid=host, traits=['CUSTOM_GPU_MODEL_' + model,
                                  'CUSTOM_GPU_MODE_VGPU', *gpu_traits],
        inventories={rc: {'total': 8, 'reserved': 0}})
    inventory = {'VCPU': {'total': vcpus, 'reserved': 0,
                          'allocation_ratio': 1.0},
                 'MEMORY_MB': {'total': 65536, 'reserved': 0},
                 'DISK_GB': {'total': 100, 'reserved': 0}}
    return [root, gpu], inventory, {}


class ExplainFactsTest(testtools.TestCase):
    """Four A100 hosts, each kept from team-b's A100 server by one rule.

    h1's GPU is unhealthy (its agent's trait on the root provider), h2's
    is reserved for team-a, h3 has an L4 (of its own vGPU class: Placement
    removes it for an A100 flavor), h4 has 2 vCPUs (the flavor takes 4);
    h5 is a free A100 host.
    """

    def facts(self, *hosts, servers=(), limits=None):
        """Facts of hosts ``(name, gpu_host args, gpu_host kwargs)``."""
        providers, roots, usages = [], {}, {}
        for name, args, kwargs in hosts:
            views, inventory, used = gpu_host(name, *args, **kwargs)
            providers += views
            roots[name], usages[name] = inventory, used
        return cloud_facts.CloudFacts(
            providers=providers, root_inventories=roots,
            root_usages=usages, servers=list(servers),
            flavors=[a100_flavor(), a100_flavor('h100', 'H100')],
            aggregates={}, limits=limits)

    def setUp(self):
        super().setUp()
        unhealthy = naming.gpu_health_trait('unhealthy', '0000:3b:00.0')
        self.cloud = self.facts(
            ('h1', ('A100_80GB_PCIE', A100_RC),
             {'root_traits': [unhealthy]}),
            ('h2', ('A100_80GB_PCIE', A100_RC),
             {'gpu_traits': [naming.reservation_trait(TEAM_A)]}),
            ('h3', ('L4', L4_RC), {}),
            ('h4', ('A100_80GB_PCIE', A100_RC), {'vcpus': 2}),
            ('h5', ('A100_80GB_PCIE', A100_RC), {}))
        self.snap = snapshot.build(self.cloud, 'now')

    def explain(self, facts, snap, flavor='a100', project=TEAM_B):
        found = explain.answer(facts, snap, explain.request_of_flavor(
            facts, flavor, project))
        return found, {r.host: r for r in found.rows}

    def test_each_host_names_its_rule(self):
        found, rows = self.explain(self.cloud, self.snap)
        self.assertIsNone(found.quota)
        self.assertEqual('h5', found.top)
        self.assertEqual(['rank 1', '', ''], [
            rows['h5'].verdict, rows['h5'].rule, rows['h5'].reason])
        self.assertEqual(('removed', 'GpuHealthFilter'),
                         (rows['h1'].verdict, rows['h1'].rule))
        self.assertIn('GPU 0000:3b:00.0: unhealthy', rows['h1'].reason)
        self.assertEqual('GpuReservationFilter', rows['h2'].rule)
        self.assertIn('GPU 0000:3b:00.0: reserved for project team-a',
                      rows['h2'].reason)
        self.assertEqual(('Placement', 'VCPU: 2 free, 4 asked'),
                         (rows['h4'].rule, rows['h4'].reason))

        # team-a's request: its reserved GPU on h2 wins, by the
        # reservation weigher's share
        found, rows = self.explain(self.cloud, self.snap, project=TEAM_A)
        self.assertEqual('h2', found.top)
        self.assertEqual('rank 2', rows['h5'].verdict)
        self.assertGreater(rows['h2'].weights['GpuReservationWeigher'],
                           rows['h5'].weights['GpuReservationWeigher'])
        self.assertAlmostEqual(rows['h2'].weight,
                               sum(rows['h2'].weights.values()), places=3)

    def test_impossible_model(self):
        _found, rows = self.explain(self.cloud, self.snap, flavor='h100')
        self.assertEqual('GpuModelFilter', rows['h2'].rule)
        self.assertIn('needs model H100', rows['h2'].reason)
        self.assertIn('GPU 0000:3b:00.0: model A100_80GB_PCIE',
                      rows['h2'].reason)
        # the L4 host offers no A100 vGPU class: Placement says so
        self.assertEqual(('Placement', 'no %s inventory (1 asked)'
                          % A100_RC), (rows['h3'].rule, rows['h3'].reason))

    def test_quota_is_said_once(self):
        """team-b's limit of one A100 vGPU, used by its server on h5."""
        limits = cloud_facts.LimitFacts(
            registered={'class:' + A100_RC: -1, 'servers': 10},
            projects={TEAM_B: {'class:' + A100_RC: 1}})
        used = cloud_facts.ServerFact(
            id='vm-id', name='vm', host='h5', status='ACTIVE',
            project_id=TEAM_B, created_at='2026-01-01',
            flavor={'name': 'a100', 'vcpus': 4, 'ram': 1024, 'disk': 1,
                    'extra_specs': dict(a100_flavor().extra_specs)})
        facts = self.facts(('h5', ('A100_80GB_PCIE', A100_RC), {}),
                           servers=[used], limits=limits)
        snap = snapshot.build(facts, 'now')
        self.assertEqual([{'project': TEAM_B, 'model': A100_RC,
                           'limit': 1}], snap.data['quotas'])
        found, rows = self.explain(facts, snap)
        self.assertIn('Quota exceeded', found.quota)
        self.assertIn(A100_RC, found.quota)
        # the hosts are still judged: h5 would take it
        self.assertEqual('rank 1', rows['h5'].verdict)
        # another project has no limit of its own
        found, _rows = self.explain(facts, snap, project=TEAM_A)
        self.assertIsNone(found.quota)


def by_host(rows: list[dict]) -> dict[str, dict]:
    return {r['Host']: r for r in rows}


class ExplainHarnessTest(base.GpuVGPUTestBase):
    """``openstack gpu explain`` against Nova's harness.

    The set-up of the capacity test: h1 has an A100 (8 vGPUs) and an L4,
    h2 two L4s; our agent reports them all; one A100 server runs on h1.
    One test, one harness: each step changes the cloud and asks again.
    """

    HOSTS = ('h1', 'h2')

    def setUp(self):
        super().setUp()
        test_osc_capacity.start_a100_l4_hosts(self)
        self.flavors = {
            model: self._create_flavor(
                name=name, vcpu=4, memory_mb=512, disk=1, ephemeral=0,
                extra_spec={'resources:VGPU': '1', 'gpu:model': model})
            for name, model in (('a100-vgpu', 'A100'), ('l4-vgpu', 'L4'),
                                ('h100-vgpu', 'H100'))}
        self.boot_flavor('a100-vgpu', 'ACTIVE')
        self.run_agent('h1')
        self.useFixture(osc_client.Cloud.of_harness(self))

    def boot_flavor(self, flavor, state):
        model = flavor.split('-')[0].upper()
        server = self._create_server(
            image_uuid=base.IMAGE, flavor_id=self.flavors[model],
            networks='none', expected_state=state)
        if state == 'ERROR':
            self.assertIn('No valid host', server['fault']['message'])
        return server

    def explain(self, *argv) -> dict[str, dict]:
        return by_host(test_osc_capacity.simulating(
            self, self.HOSTS, 'gpu', 'explain', *argv))

    def test_snapshot_simulation_places_the_next_servers_as_nova(self):
        """The next servers go where the live scheduler puts them.

        The snapshot, played by ``gpu-nova-ext simulate`` with the
        harness's scheduler options copied into ``nova_conf:`` (as an
        operator copies nova.conf's), then the same servers booted one by
        one in the harness, each host's agent reporting after each boot.
        """
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'cloud.yaml')
        rc, _out, err = osc_client.openstack('gpu', 'snapshot', '--output',
                                             path)
        self.assertEqual(0, rc, err)
        with open(path) as f:
            data = yaml.safe_load(f)
        replayed = len(data['boots'])
        data['workload'] = {'flavors': {'l4-vgpu': 1},
                            'until': 'first_failure', 'max_servers': NEXT}
        data['nova_conf'] = {'filter_scheduler': {
            'enabled_filters': list(CONF.filter_scheduler.enabled_filters),
            'weight_classes': list(CONF.filter_scheduler.weight_classes)}}
        rc, out, err = simulate_cli.simulate(data, '--format', 'json')
        self.assertEqual(0, rc, err)
        simulated = [s.get('host') for s in
                     json.loads(out)['placements'][replayed:]]
        self.assertEqual(NEXT, len(simulated), out)
        live = []
        for _ in range(NEXT):
            host = self.boot_flavor('l4-vgpu', 'ACTIVE')[
                'OS-EXT-SRV-ATTR:host']
            live.append(host)
            self.run_agent(host)
        # both hosts can take them (explain ranks both): the packing
        # weigher's choice, in the simulation as in Nova.  (Spreading
        # cannot be compared here: fakelibvirt's pGPU keeps its
        # availableInstances, so the harness's free vGPUs never drop.)
        self.assertEqual(live, simulated)

    def test_the_rule_of_each_host_and_the_top_host_nova_picks(self):
        # the ranking: the top host is where Nova's scheduler puts it
        rows = self.explain('--flavor', 'l4-vgpu')
        [top] = [h for h, r in rows.items() if r['Verdict'] == 'rank 1']
        self.assertEqual({'rank 1', 'rank 2'},
                         {r['Verdict'] for r in rows.values()})
        self.assertTrue(rows[top]['Weights'], rows)
        server = self.boot_flavor('l4-vgpu', 'ACTIVE')
        self.assertEqual(top, server['OS-EXT-SRV-ATTR:host'])
        self.run_agent(top)

        # an impossible model: our model rule on every host, for a
        # server that found no host too (its own request)
        server = self.boot_flavor('h100-vgpu', 'ERROR')
        for argv in (('--flavor', 'h100-vgpu'), ('--server', server['id'])):
            rows = self.explain(*argv)
            for host in self.HOSTS:
                self.assertEqual(('removed', 'GpuModelFilter'), (
                    rows[host]['Verdict'], rows[host]['Rule']), argv)
                self.assertIn('needs model H100', rows[host]['Reason'])
        # h2's two L4s: one fact, both addresses (the cloud's)
        self.assertIn('GPU %s, %s: model L4' % (base.PGPU0, base.PGPU1),
                      rows['h2']['Reason'])

        # h1's A100 reserved for team-a: kept from team-b's servers
        rc, out, err = osc_client.openstack(
            'gpu', 'reservation', 'create', '--project', TEAM_A,
            '--host', 'h1', '--gpu', base.PGPU0)
        self.assertEqual(0, rc, err)
        self.run_agent('h1')
        rows = self.explain('--flavor', 'a100-vgpu', '--project', TEAM_B)
        self.assertEqual(('removed', 'GpuReservationFilter'), (
            rows['h1']['Verdict'], rows['h1']['Rule']))
        self.assertIn('GPU %s: reserved for project %s' % (
            base.PGPU0, TEAM_A), rows['h1']['Reason'])
        self.assertEqual('GpuModelFilter', rows['h2']['Rule'])
        rows = self.explain('--flavor', 'a100-vgpu', '--project', TEAM_A)
        self.assertEqual('rank 1', rows['h1']['Verdict'])

        # then unhealthy (its agent's trait on h1's root provider)
        self.gpu_facts['h1'][base.PGPU0]['health'] = 'unhealthy'
        self.run_agent('h1')
        rows = self.explain('--flavor', 'a100-vgpu', '--project', TEAM_A)
        self.assertEqual(('removed', 'GpuHealthFilter'), (
            rows['h1']['Verdict'], rows['h1']['Rule']))
        # (the harness's pGPUs share PCI bus 0x81, which the health
        # traits are read per: live_state.placement_states)
        self.assertRegex(rows['h1']['Reason'], 'GPU [^;]*%s[^;]*: unhealthy'
                         % re.escape(base.PGPU0))


class ExplainQuotaTest(test_quota.QuotaMixin, base.GpuSchedulerMixin,
                       base.GpuAgentMixin, libvirt_base.ServersTestBase):
    """The quota rule: Keystone's unified limits, enforced by Nova.

    The set-up of the quota test (a real Keystone): one host with two
    A100s passed through whole; the project may have one.
    """

    microversion = 'latest'
    ADMIN_API = True
    ADDITIONAL_FILTERS = ['PciPassthroughFilter'] + base.GPU_FILTERS

    def setUp(self):
        super().setUp()
        self.start_pci_in_placement_host(test_quota.HOST, (
            [('20b5', 'GA100 [A100 PCIe 80GB]', base.gpu(base.A100))] * 2))

    def test_quota_said_once_hosts_still_judged(self):
        rc, _out = self.quota('set', '--project', self.project.id,
                              '--model', 'A100', '--limit', '1')
        self.assertEqual(0, rc)
        a100 = test_quota.passthrough_specs('A100_80GB_PCIE')
        flavor = self._create_flavor(name='a100-pt', extra_spec=a100,
                                     memory_mb=512, vcpu=1, disk=1)
        self._create_server(image_uuid=base.IMAGE, flavor_id=flavor,
                            networks='none')
        self.run_agent(test_quota.HOST)
        # Nova refuses the next one (asked first: the simulation below
        # clears the harness's [quota] and [oslo_limit] overrides, as it
        # restores Nova's CONF after a run)
        exc = self.assertRaises(
            api_client.OpenStackApiException, self._create_server,
            image_uuid=base.IMAGE, flavor_id=flavor, networks='none')
        self.assertEqual(403, exc.response.status_code)
        with test_osc_capacity.harness_kept(self, [test_quota.HOST]):
            rc, out, err = osc_client.openstack(
                'gpu', 'explain', '--flavor', 'a100-pt', '--project',
                self.project.id, '-f', 'json')
        self.assertEqual(0, rc, err)
        said = [line for line in err.splitlines()
                if line.startswith('openstack gpu explain: ')]
        self.assertIn('not accounted for: ', said[0])
        self.assertIn('quota of project %s refuses this request before '
                      'any host is looked at' % self.project.id, said[1])
        self.assertIn('class:%s' % test_quota.A100_RC, said[1])
        # not per host: the second A100 would take it
        self.assertEqual([(test_quota.HOST, 'rank 1')],
                         [(r['Host'], r['Verdict'])
                          for r in json.loads(out)])
