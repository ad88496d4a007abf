# SPDX-License-Identifier: Apache-2.0

"""The state channel between separate processes over a real RabbitMQ.

Three agents and two scheduler caches (the real GpuStateCache and its RPC
server), each in its own process (see ``stateproc``); a scheduler started
late; and the broker restarted under them.
"""
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import testtools
from testtools import content

from gpu_nova_ext.tests import deadline
from gpu_nova_ext.tests.functional.state import support

AGENTS = ('cmp-1', 'cmp-2', 'cmp-3')
# What the tests assert a round trip takes at most (on loopback it takes
# milliseconds); waits themselves end at the tests' deadline.
ROUND_TRIP = 2.0


class Proc:
    """A stateproc child: JSON lines out, commands in."""

    def __init__(self, name: str, role: str, topics: dict, logdir: str,
                 *extra: str, module: str = 'stateproc') -> None:
        self.name = name
        self.done = False
        self.log_path = os.path.join(logdir, name + '.log')
        self._log = open(self.log_path, 'w')
        command = [sys.executable, '-m',
                   'gpu_nova_ext.tests.functional.state.' + module]
        if role:
            command += [role, '--host', name]
        self.popen = subprocess.Popen(
            command + ['--state-topic', topics['state_topic'],
                       '--agent-topic', topics['agent_topic'],
                       '--exchange', topics['exchange'], *extra],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self._log, text=True, bufsize=1)
        self._lines = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.popen.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _tail(self) -> str:
        self._log.flush()
        with open(self.log_path) as handle:
            return handle.read()[-3000:]

    def read(self) -> dict:
        """Its next JSON line, within the tests' deadline."""
        try:
            line = self._lines.get(timeout=deadline.WAIT_S)
        except queue.Empty:
            line = None
            why = 'no answer within %ss' % deadline.WAIT_S
        else:
            why = 'it exited (rc %s)' % self.popen.poll()
        if line is None:
            raise AssertionError('%s: %s. Its log:\n%s'
                                 % (self.name, why, self._tail()))
        return json.loads(line)

    def send(self, command: str) -> None:
        self.popen.stdin.write(command + '\n')
        self.popen.stdin.flush()

    def ask(self, command: str) -> dict:
        self.send(command)
        return self.read()

    def send_quit(self) -> None:
        self.done = True
        try:
            self.popen.stdin.write('quit\n')
            self.popen.stdin.flush()
        except (OSError, ValueError):
            pass

    def quit(self) -> dict | None:
        """Stop the process; its answer (how long stopping took)."""
        if not self.done:
            self.send_quit()
        try:
            answer = self.read()
        except (AssertionError, ValueError):
            answer = None
        try:
            self.popen.wait(deadline.WAIT_S)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()
        self._log.close()
        return answer


class TestStateChannelProcesses(testtools.TestCase):
    """Three agents, two scheduler caches, one RabbitMQ."""

    keep_logs = False

    @classmethod
    def _keep_logs(cls, exc_info) -> None:
        cls.keep_logs = True

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.topics = support.topics()
        cls.logdir = tempfile.mkdtemp(prefix='gne-state-')
        cls.procs = []
        if not support.broker_listening():
            # Every test fails in setUp with the reason.
            return
        cls.agents = [cls._spawn(name, 'agent') for name in AGENTS]
        for agent in cls.agents:
            agent.read()
        cls.schedulers = [cls._spawn(name, 'scheduler')
                          for name in ('sched-a', 'sched-b')]
        for scheduler in cls.schedulers:
            scheduler.read()

    @classmethod
    def _spawn(cls, name, role, *extra, module='stateproc'):
        proc = Proc(name, role, cls.topics, cls.logdir, *extra,
                    module=module)
        cls.procs.append(proc)
        return proc

    @classmethod
    def tearDownClass(cls):
        running = [p for p in cls.procs if not p.done]
        for proc in running:
            proc.send_quit()
        for proc in running:
            proc.quit()
        # the processes' logs stay only for a failure (its message names
        # the directory)
        if not cls.keep_logs:
            shutil.rmtree(cls.logdir, ignore_errors=True)
        super().tearDownClass()

    def setUp(self):
        super().setUp()
        self.addOnException(self._keep_logs)
        support.require_broker(self)
        for proc in self.procs:
            if not proc.done:
                self.assertIsNone(proc.popen.poll(), '%s died; log in %s'
                                  % (proc.name, proc.log_path))

    def _hosts(self, scheduler) -> dict:
        return scheduler.ask('hosts')['hosts']

    def _wait_all_newer(self, schedulers, since: float,
                        cast: bool = False) -> float:
        """Seconds until every cache holds every host newer than since.

        With ``cast``, the agents cast again after each look that found
        a cache lacking.
        """
        started = time.monotonic()
        missing = {}

        def complete():
            missing.clear()
            for scheduler in schedulers:
                hosts = self._hosts(scheduler)
                late = [h for h in AGENTS if hosts.get(h, 0) <= since]
                if late:
                    missing[scheduler.name] = late
            if missing and cast:
                for agent in self.agents:
                    agent.ask('cast')
            return not missing

        # casting agents: a look every 0.2 s, not a flood of casts
        if not deadline.wait_for(complete, 0.2 if cast else deadline.POLL_S):
            self.fail('after %.1fs these caches still lack fresh state of '
                      'these hosts: %s (logs in %s)'
                      % (deadline.WAIT_S, missing, self.logdir))
        return time.monotonic() - started

    def test_every_cache_sees_every_host(self):
        # Initial state came from the resend the schedulers asked for.
        self._wait_all_newer(self.schedulers, 0)
        # One cast from each agent reaches both caches (fanout).
        before = time.time()
        for agent in self.agents:
            self.assertEqual({'cast': True}, agent.ask('cast'))
        took = self._wait_all_newer(self.schedulers, before)
        self.assertLess(took, ROUND_TRIP)

    def _targeted_asks(self) -> list:
        """Per agent: the caches' logged asks for that one host's state.

        A cache that gets a host's metrics before the facts they belong
        to (the RPC server's workers can swap two messages) asks that host
        again, once per RESEND_INTERVAL, and logs it.
        """
        asks = [0] * len(AGENTS)
        for proc in self.procs:
            with open(proc.log_path) as handle:
                for line in handle:
                    if 'asking that host to resend' not in line:
                        continue
                    for index, host in enumerate(AGENTS):
                        if 'GPU metrics from %s ' % host in line:
                            asks[index] += 1
        return asks

    def test_late_cache_gets_full_state_within_one_round_trip(self):
        resends = [a.ask('stats')['resends'] for a in self.agents]
        asked = self._targeted_asks()
        # The agents cast only every hour: nothing but the late cache's
        # resend_gpu_state can bring it their state now.
        late = self._spawn('sched-late', 'scheduler')
        ready = late.read()
        self.assertTrue(ready['ready'])
        took = self._wait_all_newer([late], 0)
        self.assertLess(took, ROUND_TRIP)
        # Each agent answers the late cache's one request for everyone
        # once, plus any request a cache made for that host alone (each
        # one logged); the answers are awaited, not read at once.
        counts, expected = [], []

        def answered():
            extra = [now - then for now, then in
                     zip(self._targeted_asks(), asked)]
            expected[:] = [before + 1 + more
                           for before, more in zip(resends, extra)]
            counts[:] = [a.ask('stats')['resends'] for a in self.agents]
            return counts == expected

        deadline.wait_for(answered)
        self.assertEqual(expected, counts,
                         'resend requests answered per agent (logs in %s)'
                         % self.logdir)
        stopped = late.quit()
        self.assertIsNotNone(stopped)
        self.assertLess(stopped['stopped'], 3.0)

    def test_each_forked_scheduler_worker_gets_full_state(self):
        # The parent forks two workers before the cache's listener ran,
        # as nova-scheduler does; each worker starts its own (native
        # threads) on first use and gets every host via resend.
        workers = self._spawn('sched-workers', 'workers',
                              '--expect', ','.join(AGENTS))
        answers = [workers.read() for _ in range(3)]
        workers.done = True
        self.assertEqual(0, workers.popen.wait(deadline.WAIT_S))
        reports = [a for a in answers if 'worker' in a]
        self.assertEqual(2, len({r['worker'] for r in reports}))
        for report in reports:
            self.assertTrue(report['started'])
            self.assertEqual(sorted(AGENTS), report['hosts'])
        final = answers[-1]
        self.assertEqual([0, 0], final['exit_codes'])
        self.assertFalse(final['parent_started'])

    def test_nova_scheduler_workers_each_get_full_state(self):
        # nova-scheduler's own process model: native threading mode
        # (eventlet import forbidden), Nova's CONF and rpc.init, and
        # oslo.service forking the workers.
        nova = self._spawn('nova-scheduler', None, '--expect',
                           ','.join(AGENTS), module='novaworkers')
        reports = [nova.read() for _ in range(2)]
        nova.done = True
        nova.popen.send_signal(signal.SIGTERM)
        self.assertEqual(0, nova.popen.wait(deadline.WAIT_S))
        self.assertEqual(2, len({r['worker'] for r in reports}))
        for report in reports:
            self.assertTrue(report['started'])
            self.assertTrue(report['complete'], report)
            self.assertEqual(sorted(AGENTS), report['hosts'])
            self.assertFalse(report['eventlet_imported'])

    def test_broker_restart_both_sides_recover(self):
        self.useFixture(support.BrokerInUse(exclusive=True))
        self._wait_all_newer(self.schedulers, 0)
        support.rabbitmqctl('stop_app')
        try:
            self.assertFalse(support.broker_listening())
            # The broker is gone: the agents' casts fail, logged, without
            # raising into their loop or blocking it for long.
            started = time.monotonic()
            for agent in self.agents:
                agent.send('cast')
            for agent in self.agents:
                self.assertEqual({'cast': False}, agent.read())
            outage_cast = time.monotonic() - started
            self.assertLess(outage_cast, 10.0)
        finally:
            support.rabbitmqctl('start_app')
            support.rabbitmqctl('await_startup')
        back = time.time()
        # Nothing was restarted: fresh state flows again once both sides
        # have reconnected on their own.
        took = self._wait_all_newer(self.schedulers, back, cast=True)
        self.addDetail('recovery_s', content.text_content(
            '%.2f' % took))
        for proc in self.agents + self.schedulers:
            self.assertIsNone(proc.popen.poll(), proc.name)
        # The agents' resend listeners reconnected too: a scheduler that
        # starts now still gets full state at once.
        late = self._spawn('sched-after-restart', 'scheduler')
        late.read()
        self._wait_all_newer([late], 0)
        late.quit()
