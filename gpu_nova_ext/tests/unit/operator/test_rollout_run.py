# SPDX-License-Identifier: Apache-2.0

"""A roll-out carried out: the capacity guard, the health gate, the
upgrade command (real processes), the state file and the run's order.

The run's cloud is :class:`Cloud` below, a stand-in keeping the services'
state in a dict; the functional test (``functional/nova/test_rollout.py``)
runs the real one in Nova's harness.
"""
import json
import os
import re
import shlex
import sys

import fixtures
from prometheus_client import parser as prom_parser
import testtools

from gpu_nova_ext import exception
from gpu_nova_ext.operator import notifications
from gpu_nova_ext.operator import rollout
from gpu_nova_ext.operator import rollout_metrics
from gpu_nova_ext.operator import rollout_run as rr
from gpu_nova_ext.tests.functional import osc_client
from gpu_nova_ext.tests.unit.operator import test_rollout as plan_tests

POOL = 'A100_80GB_PCIE passthrough'


def report(*groups, unhealthy=()):
    r = plan_tests.report(*groups)
    for g in r.gpus:
        g.health = 'unhealthy' if (g.host, g.address) in unhealthy else (
            'healthy')
    return r


def gpus(host, n=2):
    return plan_tests.gpus(host, n)


class TestGuard(testtools.TestCase):

    def setUp(self):
        super().setUp()
        # 4 hosts x 2 GPUs, 50%: 4 GPUs may be out
        self.report = report(gpus('a'), gpus('b'), gpus('c'), gpus('d'))
        self.allowed = {POOL: 4}

    def wave(self, *hosts, over=()):
        return rr.Wave(hosts=list(hosts), down={POOL: 2 * len(hosts)},
                       over_limit=list(over))

    def test_a_wave_within_the_limit_starts(self):
        self.assertEqual([], rr.guard_problems(
            self.report, set(), self.wave('a', 'b'), self.allowed))
        # its own hosts drained already (a resumed wave) count once
        self.assertEqual([], rr.guard_problems(
            self.report, {'a', 'b'}, self.wave('a', 'b'), self.allowed))

    def test_hosts_out_and_unhealthy_gpus_count(self):
        problems = rr.guard_problems(self.report, {'c'},
                                     self.wave('a', 'b'), self.allowed)
        self.assertEqual(['%s: 2 out already (c 2) and 4 of this wave is '
                          'more than the 4 allowed' % POOL], problems)
        r = report(gpus('a'), gpus('b'), gpus('c'), gpus('d'),
                   unhealthy={('d', '0000:3b:00.0')})
        [problem] = rr.guard_problems(r, set(), self.wave('a', 'b'),
                                      self.allowed)
        self.assertIn('d GPU 0000:3b:00.0 (unhealthy) 1', problem)

    def test_over_limit_wave_only_alone(self):
        wave = self.wave('a', over=[POOL])
        self.assertEqual([], rr.guard_problems(self.report, set(), wave,
                                               {POOL: 1}))
        [problem] = rr.guard_problems(self.report, {'d'}, wave, {POOL: 1})
        self.assertIn('this wave alone takes 2 (over the limit of 1, as '
                      'planned) and 2 is out already (d 2)', problem)


class TestHealth(testtools.TestCase):

    def test_every_gpu_must_be_healthy(self):
        state = {'gpus': [
            {'pci_address': 'A', 'health': {'state': 'healthy'}},
            {'pci_address': 'B', 'health': {'state': 'unhealthy',
                                            'reasons': ['XID 79']}},
            {'pci_address': 'C', 'health': {'state': 'degraded'}},
            {'pci_address': 'D'}]}
        self.assertEqual(['GPU B is unhealthy (XID 79)', 'GPU C is degraded',
                          'GPU D is of unknown health'],
                         rr.health_problems(state))


class TestAgentLags(testtools.TestCase):

    def test_driver_and_health_from_the_live_state(self):
        state = {'gpus': [
            {'pci_address': 'A', 'driver_version': '570.86.10',
             'health': {'state': 'healthy'}},
            {'pci_address': 'B', 'driver_version': '550.54.15',
             'health': {'state': 'healthy'}},
            {'pci_address': 'C', 'driver_version': '570.86.10',
             'health': {'state': 'unhealthy', 'reasons': ['XID 48']}}]}
        self.assertEqual(['GPU B runs 550.54.15',
                          'GPU C is unhealthy (XID 48)'],
                         rr.agent_lags(state, 'h1', '570'))
        self.assertEqual([], rr.agent_lags(
            {'gpus': state['gpus'][:1]}, 'h1', '570'))
        self.assertEqual(['no GPU state from gpu-nova-agent on h1 yet'],
                         rr.agent_lags(None, 'h1', '570'))


class TestUpgradeCommand(testtools.TestCase):

    def test_split_then_formatted(self):
        cmd = rr.UpgradeCommand(
            template='ansible-playbook up.yml --limit {host} -e '
                     '"driver={driver} x=1"')
        self.assertEqual(['ansible-playbook', 'up.yml', '--limit',
                          'odd host;rm', '-e', 'driver=570 x=1'],
                         cmd.argv('odd host;rm', '570'))
        self.assertEqual("ansible-playbook up.yml --limit 'odd host;rm' -e "
                         "'driver=570 x=1'", cmd.text('odd host;rm', '570'))

    def test_shell_quotes_the_values(self):
        cmd = rr.UpgradeCommand(template='echo {host} | cat', shell=True)
        self.assertEqual(['/bin/sh', '-c', "echo 'a b' | cat"],
                         cmd.argv('a b', '570'))

    def test_bad_template_names_the_placeholders(self):
        for template in ('up {hostname}', 'up {0}', 'up "open', 'up {'):
            exc = self.assertRaises(
                exception.InvalidArgument,
                rr.UpgradeCommand(template=template).argv, 'h1', '570')
            self.assertIn('Invalid --upgrade-command %s' % template,
                          str(exc))
            self.assertIn('{host} and {driver}', str(exc))


def python(code: str) -> list[str]:
    return [sys.executable, '-c', code]


class TestRunUpgrade(testtools.TestCase):

    def test_success_and_log(self):
        log = os.path.join(self.useFixture(fixtures.TempDir()).path, 'h.log')
        outcome = rr.run_upgrade(python('print("ok")'), 30, log)
        self.assertEqual(rr.Outcome(ok=True), outcome)
        with open(log) as f:
            self.assertEqual('ok\n', f.read())

    def test_failure_says_exit_code_and_last_line(self):
        outcome = rr.run_upgrade(python(
            'import sys; print("step 1"); '
            'print("dkms failed", file=sys.stderr); print(); sys.exit(4)'),
            30)
        self.assertEqual(rr.Outcome(ok=False,
                                    reason='exit code 4: dkms failed'),
                         outcome)

    def test_failure_says_the_last_error_line_before_a_summary(self):
        # as ansible-playbook with ANSIBLE_DISPLAY_FAILED_STDERR: the
        # failed task on stderr, then the play recap on stdout; the log
        # keeps both (in the order they were read)
        log = os.path.join(self.useFixture(fixtures.TempDir()).path, 'h.log')
        outcome = rr.run_upgrade(python(
            'import sys; print("TASK [install]", flush=True); '
            'print("fatal: [h1]: FAILED! => no such package", '
            'file=sys.stderr, flush=True); '
            'print("PLAY RECAP"); print("h1 : ok=1 failed=1"); '
            'sys.exit(2)'), 30, log)
        self.assertEqual(
            'exit code 2: fatal: [h1]: FAILED! => no such package',
            outcome.reason)
        with open(log) as f:
            self.assertEqual(sorted(['TASK [install]',
                                     'fatal: [h1]: FAILED! => no such '
                                     'package',
                                     'PLAY RECAP', 'h1 : ok=1 failed=1']),
                             sorted(f.read().splitlines()))
        # nothing on stderr: the last line of stdout
        outcome = rr.run_upgrade(python(
            'import sys; print("step 1"); print("disk full"); sys.exit(1)'),
            30)
        self.assertEqual('exit code 1: disk full', outcome.reason)

    def test_timeout_and_missing_program(self):
        outcome = rr.run_upgrade(python(
            'import time; print("rebooting", flush=True); time.sleep(30)'),
            0.5)
        self.assertEqual('not done after 0s: rebooting', outcome.reason)
        outcome = rr.run_upgrade(['/nonexistent/upgrade'], 30)
        self.assertFalse(outcome.ok)
        self.assertIn('could not run /nonexistent/upgrade', outcome.reason)


def plan(*waves, allowed=4):
    """A RunState of waves of 2-GPU hosts."""
    r = report(*[gpus(h) for wave in waves for h in wave])
    batches = [rollout.Batch(hosts=list(w), down={POOL: 2 * len(w)})
               for w in waves]
    totals = {POOL: 2 * sum(len(w) for w in waves)}
    p = rollout.RolloutPlan(batches=batches, totals=totals,
                            allowed={POOL: allowed}, done=[], notes=[])
    return r, rr.RunState.from_plan(p, '570.86.10', 50)


class TestStateFile(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.path = os.path.join(self.dir, 'state.json')

    def test_round_trip_leaves_no_temporary_file(self):
        _, state = plan(['a', 'b'], ['c'])
        state.hosts['a'].step = rr.DONE
        state.hosts['b'].failed = 'upgrade failed: exit code 1: no'
        rr.save(self.path, state)
        rr.save(self.path, state)
        self.assertEqual(['state.json'], os.listdir(self.dir))
        loaded = rr.load(self.path)
        self.assertEqual(state, loaded)
        self.assertEqual('570', loaded.target)
        self.assertEqual([('b', 'upgrade failed: exit code 1: no')],
                         loaded.failures())

    def test_bad_files_are_refused_with_the_fix(self):
        def refused(text):
            if text is not None:
                with open(self.path, 'w') as f:
                    f.write(text)
            exc = self.assertRaises(exception.InvalidArgument, rr.load,
                                    self.path)
            self.assertIn('Invalid --state-file %s' % self.path, str(exc))
            return str(exc)

        self.assertIn('start one without --resume', refused(None))
        self.assertIn('give the file a roll-out wrote', refused('{'))
        self.assertIn('not a roll-out state of version 1',
                      refused('{"version": 9}'))
        self.assertIn("KeyError: 'driver'", refused('{"version": 1}'))
        _, state = plan(['a'])
        data = state.to_dict()
        data['hosts']['a']['step'] = 'rebooting'
        self.assertIn('unknown step(s) rebooting', refused(json.dumps(data)))


class Cloud:
    """The cloud of a run: which services are out, which hosts are ready.

    ``ready`` hosts pass the health gate once upgraded; ``stays`` keep a
    server after their drain.
    """

    source = 'the stand-in'

    def __init__(self, report, ready=(), stays=()):
        self.report = report
        self.ready = set(ready)
        self.stays = set(stays)
        self.disabled: set[str] = set()
        self.most_out = 0

    def view(self):
        return self.report, set(self.disabled)

    def drain(self, host):
        self.disabled.add(host)
        self.most_out = max(self.most_out, len(self.disabled))

    def servers_left(self, host, all_servers):
        return ['vm-1 (web)'] if host in self.stays else []

    def readiness(self, hosts, target):
        return {h: [] if h in self.ready else ['GPU A runs 550.54.15']
                for h in hosts}

    def undrain(self, host):
        self.disabled.discard(host)


class TestRunner(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.path = os.path.join(self.dir, 'state.json')
        self.lines = []
        self.events = []
        self.now = 0.0

    def upgrade(self, fail=()):
        """A real command: exits 1 for the hosts in ``fail``."""
        code = ('import sys; h = sys.argv[1]; print("upgrading", h); '
                'sys.exit(h in %r)' % (tuple(fail),))
        return rr.UpgradeCommand(template='%s -c %s {host} {driver}' % (
            shlex.quote(sys.executable), shlex.quote(code)))

    def sleep(self, seconds):
        self.now += seconds

    def runner(self, state, cloud, fail=()):
        return rr.Runner(state, cloud=cloud, drain=cloud.drain,
                         upgrade=self.upgrade(fail), say=self.lines.append,
                         save=lambda s: rr.save(self.path, s),
                         wait_timeout=10, poll_interval=1,
                         log_prefix=self.path,
                         notify=lambda *e: self.events.append(e),
                         clock=lambda: self.now, sleep=self.sleep)

    def notified(self):
        """(event type, wave, host or hosts, step, error) of each."""
        return [(event, p.get('wave'), p.get('host', p.get('hosts')),
                 p.get('step'), p.get('error')) for event, p in self.events]

    def steps(self, host):
        return [line.split(': ', 1)[1] for line in self.lines
                if line.startswith(host + ': ')]

    def test_waves_in_order_within_the_guard(self):
        r, state = plan(['a', 'b'], ['c'])
        cloud = Cloud(r, ready='abc')
        self.runner(state, cloud).run()
        self.assertEqual(2, cloud.most_out)
        self.assertEqual(set(), cloud.disabled)
        self.assertEqual(['draining', 'drained',
                          'upgrading: %s' % self.upgrade().text(
                              'a', '570.86.10'), 'upgraded',
                          'waiting for driver branch 570 on healthy GPUs '
                          '(at most 10s)',
                          'undrained: every GPU runs driver branch 570 and '
                          'is healthy'], self.steps('a'))
        self.assertTrue(rr.load(self.path).finished)
        self.assertEqual('roll-out done: 3 host(s) run driver branch 570',
                         self.lines[-1])
        # each wave, each host's steps and the end are notified
        wave, host, end = (notifications.ROLLOUT_WAVE,
                           notifications.ROLLOUT_HOST,
                           notifications.ROLLOUT_END)
        self.assertEqual(
            [(wave, 1, ['a', 'b'], None, None)] +
            [(host, 1, h, step, None)
             for step in (rr.DRAINED, rr.UPGRADED, rr.DONE) for h in 'ab'] +
            [(wave, 2, ['c'], None, None)] +
            [(host, 2, 'c', step, None)
             for step in (rr.DRAINED, rr.UPGRADED, rr.DONE)] +
            [(end, None, 3, None, None)], self.notified())
        self.assertEqual({('570', '570.86.10', 2)}, {
            (p['target'], p['driver'], p['waves']) for _, p in self.events})

    def test_failed_upgrade_stops_after_its_wave_mates_come_back(self):
        r, state = plan(['a', 'b'], ['c'])
        cloud = Cloud(r, ready='abc')
        exc = self.assertRaises(exception.GpuNovaExtException,
                                self.runner(state, cloud, fail='b').run)
        self.assertEqual(
            'roll-out stopped: b: upgrade failed: upgrade command: exit '
            'code 1: upgrading b (output in %s.b.log); b stays drained '
            '(nova-compute disabled). Fix the cause, then run again '
            '(--resume with the --state-file).' % self.path,
            exc.format_message())
        self.assertEqual({'b'}, cloud.disabled)
        self.assertEqual([(notifications.ROLLOUT_HOST_ERROR, 1, 'b',
                           'upgrade', 'upgrade command: exit code 1: '
                           'upgrading b (output in %s.b.log)' % self.path)],
                         [e for e in self.notified()
                          if e[0] == notifications.ROLLOUT_HOST_ERROR])
        saved = rr.load(self.path)
        metrics = {(m.name, m.labels.get('step')): m.value
                   for family in prom_parser.text_string_to_metric_families(
                       rollout_metrics.text(saved, now=1.5))
                   for m in family.samples}
        self.assertEqual({
            ('gpu_nova_ext_rollout_hosts', rr.PENDING): 1.0,
            ('gpu_nova_ext_rollout_hosts', rr.DRAINED): 1.0,
            ('gpu_nova_ext_rollout_hosts', rr.UPGRADED): 0.0,
            ('gpu_nova_ext_rollout_hosts', rr.DONE): 1.0,
            ('gpu_nova_ext_rollout_failed_hosts', None): 1.0,
            ('gpu_nova_ext_rollout_waves', None): 2.0,
            ('gpu_nova_ext_rollout_waves_done', None): 0.0,
            ('gpu_nova_ext_rollout_last_update_timestamp_seconds',
             None): 1.5}, metrics)
        rollout_metrics.write(self.path + '.prom', saved)
        with open(self.path + '.prom') as f:
            self.assertIn('gpu_nova_ext_rollout_failed_hosts{target="570"} '
                          '1.0', f.read())
        self.assertEqual({'a': rr.DONE, 'b': rr.DRAINED, 'c': rr.PENDING},
                         {h: p.step for h, p in saved.hosts.items()})

        # resumed: b retries its upgrade (no second drain), c follows
        self.lines = []
        self.runner(saved, cloud).run()
        self.assertEqual(['upgrading', 'upgraded', 'waiting', 'undrained'],
                         [s.split(':')[0].split(' ')[0]
                          for s in self.steps('b')])
        self.assertEqual([], self.steps('a'))
        self.assertIn('drained', self.steps('c'))
        self.assertEqual([], rr.load(self.path).failures())

    def test_server_that_stays_fails_the_drain(self):
        r, state = plan(['a'], ['b'])
        cloud = Cloud(r, ready='ab', stays='a')
        exc = self.assertRaises(exception.GpuNovaExtException,
                                self.runner(state, cloud).run)
        self.assertIn('a: drain failed: 1 server(s) still on it: vm-1 '
                      '(web)', exc.format_message())
        self.assertEqual({'a'}, cloud.disabled)
        self.assertFalse(os.path.exists(self.path + '.a.log'))

    def test_host_never_ready_fails_at_the_timeout(self):
        r, state = plan(['a'])
        cloud = Cloud(r, ready='')
        exc = self.assertRaises(exception.GpuNovaExtException,
                                self.runner(state, cloud).run)
        self.assertIn('a: wait failed: not ready after 10s: GPU A runs '
                      '550.54.15', exc.format_message())
        self.assertEqual(10, self.now)
        self.assertEqual(rr.UPGRADED, rr.load(self.path).hosts['a'].step)

    def test_guard_refuses_the_wave(self):
        r, state = plan(['a', 'b'], ['c'])
        cloud = Cloud(r, ready='abc')
        cloud.disabled.add('c')
        exc = self.assertRaises(exception.GpuNovaExtException,
                                self.runner(state, cloud).run)
        self.assertIn('wave 1 not started', exc.format_message())
        self.assertEqual({'c'}, cloud.disabled)
        self.assertFalse(os.path.exists(self.path))


class TestDescribe(testtools.TestCase):

    def test_down_of_a_wave(self):
        wave = rr.Wave(hosts=['a'], down={POOL: 4}, over_limit=[POOL])
        self.assertEqual('down: %s 4 of 6, at most 1 (OVER LIMIT: a host '
                         'alone holds more)' % POOL,
                         rr.describe_down(wave, {POOL: 6}, {POOL: 1}))


class TestOperationsPage(testtools.TestCase):
    """doc/source/operations.rst: the synopsis of rollout run is real."""

    def test_synopsis_matches_the_parser(self):
        page = os.path.join(os.path.dirname(__file__), '..', '..', '..',
                            '..', 'doc', 'source', 'operations.rst')
        with open(page) as f:
            text = f.read()
        m = re.search(r'^``openstack gpu rollout run (.*)``$', text, re.M)
        self.assertIsNotNone(m)
        parser = osc_client.parser_of('gpu rollout run')
        documented = set(re.findall(r'--[a-z-]+', m.group(1)))
        self.assertEqual(
            {opt for action in parser._actions
             for opt in action.option_strings
             if opt.startswith('--') and opt != '--help'}, documented)
