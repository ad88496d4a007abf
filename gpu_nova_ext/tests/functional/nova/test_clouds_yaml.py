# SPDX-License-Identifier: Apache-2.0

"""``openstack gpu`` from a clouds.yaml alone (issue 39), in Nova's harness.

No ``--config-file``, so no transport_url: the agents' GPU state comes
from the ``CUSTOM_GPU_HOST_*`` traits the agent keeps on each compute node
provider (design doc: Placement ownership), written by the real agent
into the harness's Placement, beside a real nova-compute whose resource
tracker runs its ``update_available_resource`` periodic.
"""
import datetime
import os
import shlex
import sys
import threading

import fixtures

from gpu_nova_ext import naming
from gpu_nova_ext.operator import live_state
from gpu_nova_ext.tests import deadline
from gpu_nova_ext.tests.functional.nova import base
from gpu_nova_ext.tests.functional.nova import ops_base
from gpu_nova_ext.tests.functional.nova import test_rollout
from gpu_nova_ext.tests.functional import osc_client

HOSTS = ('h1', 'h2')


def no_bus(conf, wait):
    raise AssertionError('the message bus was used: %s' % conf.transport_url)


class CloudsYamlOnlyTest(ops_base.LiveMigrationVGPUTestBase):

    def setUp(self):
        super().setUp()
        self.start_a100_hosts(HOSTS)
        # no command below may listen on a bus
        self.useFixture(fixtures.MonkeyPatch(
            'gpu_nova_ext.operator.live_state.live_states', no_bus))

    def root_traits(self, host) -> set[str]:
        return set(self._get_provider_traits(
            self._get_provider_uuid_by_name(host)))

    def test_root_traits_survive_the_resource_tracker(self):
        traits = self.root_traits('h1')
        self.assertIn(naming.host_driver_trait('550'), traits)
        self.assertIn('COMPUTE_NODE', traits)
        self.assertEqual(1, len([t for t in traits
                                 if naming.host_reported_at(t)]), traits)
        self.assertFalse([t for t in traits if naming.gpu_health(t)])

        self.gpu_facts['h1'][base.PGPU1]['health'] = 'unhealthy'
        self.run_agent('h1')
        unhealthy = naming.gpu_health_trait('unhealthy', base.PGPU1)
        traits = self.root_traits('h1')
        self.assertIn(unhealthy, traits)
        # the cycle that wrote the change stamped it (a minute later, when
        # the clock turned over meanwhile)
        [stamp] = [t for t in traits if naming.host_reported_at(t)]
        # nova-compute's periodic rewrites the root's traits from its
        # provider tree: ours stay
        self._run_periodics()
        traits = self.root_traits('h1')
        self.assertIn(unhealthy, traits)
        self.assertIn(naming.host_driver_trait('550'), traits)
        self.assertIn(stamp, traits)
        # a cycle where nothing changed writes nothing, the stamp included
        agent = self._agent('h1')
        result = agent.run_cycle()
        self.assertEqual(0, result.writes, result.changes)
        self.assertEqual(traits, self.root_traits('h1'))

        # healthy again, two hours later: the trait goes, the stamp is
        # renewed; the old one stays in Placement's trait list while h2
        # carries it (started in the same minute), and leaves it once h2's
        # agent renews its own stamp too (its state unchanged, an hour on)
        self.gpu_facts['h1'][base.PGPU1]['health'] = 'healthy'
        later = naming.host_reported_at(stamp) + datetime.timedelta(hours=2)
        agent.reporter.now = lambda: later
        self.run_agent('h1')
        traits = self.root_traits('h1')
        self.assertNotIn(unhealthy, traits)
        self.assertIn(naming.host_reported_trait(later), traits)
        self.assertNotIn(stamp, traits)
        if stamp in self.root_traits('h2'):
            self.assertIn(stamp, self.stamps())
        self._agent('h2').reporter.now = lambda: later
        self.run_agent('h2')
        self.assertEqual({naming.host_reported_trait(later)}, self.stamps())

    def test_a_health_change_reaches_the_root_at_once(self):
        # the agent's daemon, its next state cycle an hour away
        agent = self._agent('h1')
        agent.conf.set_override('report_interval', 3600, group='agent')
        thread = threading.Thread(target=agent.run)
        thread.start()
        self.addCleanup(thread.join, deadline.WAIT_S)
        self.addCleanup(agent.stop)
        self.assertTrue(deadline.wait_for(lambda: agent.cycles >= 1))
        cycles = agent.cycles

        # the GPU fails; the health monitor calls the agent back (as its
        # judge does on a verdict that changed)
        self.gpu_facts['h1'][base.PGPU1]['health'] = 'unhealthy'
        self._write_agent_files('h1')
        agent._on_health_change()
        unhealthy = naming.gpu_health_trait('unhealthy', base.PGPU1)
        self.assertTrue(deadline.wait_for(
            lambda: unhealthy in self.root_traits('h1')),
            self.root_traits('h1'))
        self.assertGreater(agent.cycles, cycles)

    def stamps(self) -> set[str]:
        """The reported stamps in Placement's trait list."""
        return {t for t in self._get_all_traits()
                if naming.host_reported_at(t)}

    def test_list_and_audit_health_from_placement(self):
        self.gpu_facts['h2'][base.PGPU1]['health'] = 'unhealthy'
        self.run_agent('h2')
        gpus = osc_client.openstack_json(self, 'gpu', 'list', '--long')
        self.assertEqual({'h1': {'healthy'}, 'h2': {'unhealthy'}},
                         {h: {g['Health'] for g in gpus if g['Host'] == h}
                          for h in HOSTS})
        for g in gpus:
            self.assertTrue(g['State From'].startswith('placement, '),
                            g['State From'])
        [bad] = osc_client.openstack_json(self, 'gpu', 'list',
                                          '--unhealthy', '--long')
        self.assertEqual('h2', bad['Host'])
        self.assertIn('GPU %s unhealthy (Placement)' % base.PGPU1,
                      bad['Health Reasons'])
        audit = osc_client.openstack_json(self, 'gpu', 'audit')
        self.assertEqual(['h2'], [g['host'] for g in audit['unhealthy']])
        self.assertEqual({'placement'}, {
            s['source'] for s in audit['state_sources'].values()})
        self.assertEqual({'550': ['h1', 'h2']},
                         audit['drivers']['branches'])

    def test_undrain_without_a_transport_url(self):
        self.gpu('host', 'drain', 'h1')
        err = self.gpu_refused('host', 'undrain', 'h1', '--expect-driver',
                               '570')
        self.assertIn('expected driver branch 570, but GPU %s runs 550'
                      % base.PGPU0, err)
        self.assertIn('Still to do: 1. install driver branch 570 on h1', err)

        for facts in self.gpu_facts['h1'].values():
            facts['driver_version'] = '570.86.10'
        self.run_agent('h1')
        rc, out = self.gpu('host', 'undrain', 'h1', '--expect-driver', '570')
        self.assertIn("every GPU runs driver branch 570 (gpu-nova-agent's "
                      'traits in Placement, as of ', out)
        [svc] = self.admin_api.get_services(binary='nova-compute', host='h1')
        self.assertEqual('enabled', svc['status'])

    def test_rollout_run_without_a_transport_url(self):
        # the upgrade command writes HOST.driver; the host's agent starts
        # again (one cycle) when the command next reads the state
        directory = self.useFixture(fixtures.TempDir()).path
        script = os.path.join(directory, 'upgrade.py')
        with open(script, 'w') as f:
            f.write(test_rollout.UPGRADE)
        read = live_state.placement_states

        def placement_states(providers, now=None):
            for host in HOSTS:
                path = os.path.join(directory, host + '.driver')
                if os.path.exists(path):
                    with open(path) as f:
                        driver = f.read()
                    facts = self.gpu_facts[host]
                    if facts[base.PGPU0]['driver_version'] != driver:
                        for gpu in facts.values():
                            gpu['driver_version'] = driver
                        self.run_agent(host)
            return read(providers, now)

        self.useFixture(fixtures.MonkeyPatch(
            'gpu_nova_ext.operator.live_state.placement_states',
            placement_states))
        upgrade = '%s %s %s {host} {driver}' % (
            shlex.quote(sys.executable), shlex.quote(script),
            shlex.quote(directory))
        rc, out = self.gpu('rollout', 'run', '--upgrade-command', upgrade,
                           '--max-unavailable', '50%', '--target-driver',
                           test_rollout.NEW, '--wait-timeout', '60')
        self.assertIn("GPU state from the agents' CUSTOM_GPU_HOST_* traits "
                      'in Placement (no transport_url)', out)
        for host in HOSTS:
            self.assertIn('%s: undrained: every GPU runs driver branch 570 '
                          'and is healthy' % host, out)
            self.assertIn(naming.host_driver_trait('570'),
                          self.root_traits(host))
        self.assertIn('roll-out done: 2 host(s) run driver branch 570', out)
