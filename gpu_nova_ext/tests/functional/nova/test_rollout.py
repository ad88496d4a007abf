# SPDX-License-Identifier: Apache-2.0

"""``openstack gpu rollout run`` in Nova's harness: a driver roll-out over
two waves of a three-host vGPU cloud (two A100 pGPUs per host, 16 vGPUs
each, driver 550 reported by the agent) with a server on every host.

The upgrade command is a real process (:data:`UPGRADE`): it writes the
new driver version into a file of the host, or fails for a host marked
broken.  The host's agent reads it when it starts again: each time the
command listens for the agents' state, the test runs the agent of every
host whose file changed (:meth:`RolloutTest.live_states`), as a real
agent casts its state at start.
"""
import json
import os
import shlex
import sys

import fixtures

from gpu_nova_ext.tests.functional.nova import ops_base

VGPU = {'resources:VGPU': '1'}
HOSTS = ('h1', 'h2', 'h3')
POOL = 'A100_80GB_PCIE vgpu'
NEW = '570.86.10'

#: the operator's upgrade action: argv DIR HOST DRIVER
UPGRADE = """
import os, sys
directory, host, driver = sys.argv[1:]
broken = os.path.join(directory, host + '.broken')
if os.path.exists(broken):
    print('installing driver %s on %s' % (driver, host))
    print(open(broken).read().strip())
    sys.exit(3)
with open(os.path.join(directory, host + '.driver'), 'w') as f:
    f.write(driver)
"""


class RolloutTest(ops_base.LiveMigrationVGPUTestBase):

    def setUp(self):
        super().setUp()
        self.start_a100_hosts(HOSTS)
        self.dir = self.useFixture(fixtures.TempDir()).path
        script = os.path.join(self.dir, 'upgrade.py')
        with open(script, 'w') as f:
            f.write(UPGRADE)
        self.upgrade = '%s %s %s {host} %s' % (
            shlex.quote(sys.executable), shlex.quote(script),
            shlex.quote(self.dir), '{driver}')
        self.state_file = os.path.join(self.dir, 'rollout.json')
        #: the hosts whose nova-compute was disabled at each look
        self.seen_out: list[set] = []
        self.useFixture(fixtures.MonkeyPatch(
            'gpu_nova_ext.operator.live_state.live_states',
            self.live_states))

    def live_states(self, conf, wait):
        """The agents' state; the agents of upgraded hosts start again."""
        self.seen_out.append({
            s['host'] for s in self.admin_api.get_services(
                binary='nova-compute') if s['status'] == 'disabled'})
        for host in HOSTS:
            path = os.path.join(self.dir, host + '.driver')
            if not os.path.exists(path):
                continue
            with open(path) as f:
                driver = f.read()
            if self.driver_of(host) != driver:
                for facts in self.gpu_facts[host].values():
                    facts['driver_version'] = driver
                self.run_agent(host)
        return ops_base.harness_live_states(conf, wait)

    def driver_of(self, host):
        return {f['driver_version']
                for f in self.gpu_facts[host].values()}.pop()

    def rollout(self, *argv):
        return ('rollout', 'run', '--upgrade-command', self.upgrade,
                '--state-file', self.state_file) + argv

    def saved(self):
        with open(self.state_file) as f:
            return json.load(f)

    def service(self, host):
        [svc] = self.admin_api.get_services(binary='nova-compute', host=host)
        return svc

    def assert_all_servers_on_new_driver(self, servers):
        for server in servers:
            body = self.api.get_server(server['id'])
            self.assertEqual('ACTIVE', body['status'])
            self.assertEqual(NEW, self.driver_of(
                body['OS-EXT-SRV-ATTR:host']))

    def assert_guard_held(self):
        # 67% of 96 vGPUs: 64 (two hosts) may be out at once
        self.assertTrue(self.seen_out)
        for out in self.seen_out:
            self.assertLessEqual(len(out), 2, self.seen_out)

    def test_two_waves(self):
        servers = [self.boot(VGPU, host=host) for host in HOSTS]
        rc, out = self.gpu(*self.rollout('--max-unavailable', '67%',
                                         '--target-driver', NEW,
                                         '--dry-run'), config=True)
        self.assertIn('dry run: wave 1/2: h1, h2 (down: %s 64 of 96, at '
                      'most 64)' % POOL, out)
        self.assertIn('dry run: wave 2/2: h3', out)
        self.assertIn('dry run: h1: would run: %s' % self.upgrade.format(
            host='h1', driver=NEW), out)
        self.assertFalse(os.path.exists(self.state_file))
        self.assertEqual('enabled', self.service('h1')['status'])

        metrics_file = os.path.join(self.dir, 'rollout.prom')
        rc, out = self.gpu(*self.rollout('--max-unavailable', '67%',
                                         '--target-driver', NEW,
                                         '--metrics-file', metrics_file),
                           config=True)
        with open(metrics_file) as f:
            metrics = f.read()
        self.assertIn('gpu_nova_ext_rollout_hosts{step="done",target="570"} '
                      '3.0', metrics)
        self.assertIn('gpu_nova_ext_rollout_waves_done{target="570"} 2.0',
                      metrics)
        lines = out.splitlines()
        # each host: drained, upgraded, undrained, in wave order
        order = [(line.split(':')[0], line.split(':')[1].strip())
                 for line in lines if line.split(':')[0] in HOSTS and
                 line.split(':')[1].strip() in ('drained', 'upgraded')]
        self.assertEqual([('h1', 'drained'), ('h2', 'drained'),
                          ('h1', 'upgraded'), ('h2', 'upgraded'),
                          ('h3', 'drained'), ('h3', 'upgraded')], order)
        for host in HOSTS:
            self.assertIn('%s: undrained: every GPU runs driver branch 570 '
                          'and is healthy' % host, out)
            self.assertEqual('enabled', self.service(host)['status'])
            self.assertEqual(NEW, self.driver_of(host))
        for server in servers:
            self.assertIn('moved %s' % server['id'], out)
        self.assertIn('roll-out done: 3 host(s) run driver branch 570', out)
        self.assert_all_servers_on_new_driver(servers)
        self.assert_guard_held()
        self.assertEqual({h: {'step': 'done', 'failed': None}
                          for h in HOSTS}, self.saved()['hosts'])

    def test_failed_upgrade_stops_and_resume_finishes(self):
        servers = [self.boot(VGPU, host=host) for host in HOSTS]
        with open(os.path.join(self.dir, 'h2.broken'), 'w') as f:
            f.write('ERROR: dkms build of nvidia 570 failed')
        err = self.gpu_refused(*self.rollout('--max-unavailable', '67%',
                                             '--target-driver', NEW),
                               config=True)
        self.assertIn('roll-out stopped: h2: upgrade failed: upgrade '
                      'command: exit code 3: ERROR: dkms build of nvidia '
                      '570 failed', err)
        self.assertIn('h2 stays drained', err)
        self.assertIn('--resume', err)
        with open(self.state_file + '.h2.log') as f:
            self.assertIn('installing driver 570.86.10 on h2', f.read())
        # h1 of the same wave is back, h2 drained, h3 untouched
        hosts = self.saved()['hosts']
        self.assertEqual(('done', 'drained', 'pending'),
                         tuple(hosts[h]['step'] for h in HOSTS))
        self.assertIn('exit code 3', hosts['h2']['failed'])
        self.assertEqual(('enabled', 'disabled', 'enabled'),
                         tuple(self.service(h)['status'] for h in HOSTS))
        self.assertEqual('550.54.15', self.driver_of('h2'))
        # a new roll-out over an unfinished one is refused
        err = self.gpu_refused(*self.rollout('--max-unavailable', '67%',
                                             '--target-driver', NEW),
                               config=True)
        self.assertIn('holds an unfinished roll-out', err)

        os.unlink(os.path.join(self.dir, 'h2.broken'))
        rc, out = self.gpu(*self.rollout('--resume'), config=True)
        self.assertNotIn('h1: drain', out)
        self.assertNotIn('h2: draining', out)
        self.assertIn('h2: upgrading', out)
        self.assertIn('h3: drained', out)
        self.assertIn('roll-out done', out)
        self.assertEqual(['enabled'] * 3,
                         [self.service(h)['status'] for h in HOSTS])
        self.assert_all_servers_on_new_driver(servers)
        self.assert_guard_held()

    def test_bad_input_refused_before_anything_changes(self):
        for argv, said in (
                (('--resume',), 'start one without --resume'),
                (('--target-driver', NEW), 'needs --target-driver and '
                                           '--max-unavailable'),
                (('--target-driver', NEW, '--max-unavailable', '0'),
                 'Invalid --max-unavailable 0'),
                (('--target-driver', NEW, '--max-unavailable', '50',
                  '--wait-timeout', 'nan'), 'Invalid --wait-timeout nan')):
            err = self.gpu_refused(*self.rollout(*argv), config=True)
            self.assertIn(said, err)
        err = self.gpu_refused('rollout', 'run', '--upgrade-command',
                               'up {hostname}', '--target-driver', NEW,
                               '--max-unavailable', '50', config=True)
        self.assertIn('Invalid --upgrade-command up {hostname}', err)
        self.assertFalse(os.path.exists(self.state_file))
        self.assertEqual(['enabled'] * 3,
                         [self.service(h)['status'] for h in HOSTS])

    def test_guard_refuses_a_wave_while_another_host_is_out(self):
        self.admin_api.put_service(self.service('h3')['id'],
                                   {'status': 'disabled'})
        err = self.gpu_refused('rollout', 'run', '--upgrade-command',
                               self.upgrade, '--max-unavailable', '34%',
                               '--target-driver', NEW, config=True)
        self.assertIn('wave 1 not started', err)
        self.assertIn('%s: 32 out already (h3 32) and 32 of this wave is '
                      'more than the 32 allowed' % POOL, err)
        self.assertEqual('enabled', self.service('h1')['status'])
        # one wave of all three: h3's own, but someone else disabled it,
        # so the roll-out does not take it (its undrain would enable it)
        err = self.gpu_refused(*self.rollout('--max-unavailable', '100%',
                                             '--target-driver', NEW),
                               config=True)
        self.assertIn('roll-out stopped: h3: drain failed: its nova-compute '
                      'was disabled before the roll-out (no reason given)',
                      err)
        self.assertEqual('disabled', self.service('h3')['status'])
        self.assertIsNone(self.service('h3')['disabled_reason'])
