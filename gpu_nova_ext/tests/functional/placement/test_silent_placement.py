# SPDX-License-Identifier: Apache-2.0

"""A Placement that accepts connections and never answers (issue 16.1).

A real TCP server that accepts and then says nothing stands for the hung
Placement: ``report --once`` and ``audit`` end with one line naming
``[placement] timeout``; the agent daemon keeps casting its GPU state
every interval (in process, and over a real RabbitMQ as a process that
SIGTERM ends).  Bounds on time here only prove "does not hang".
"""
import os
import signal
import socket
import subprocess
import sys
import threading

import fixtures
import testtools
import yaml

from gpu_nova_ext.agent import service
from gpu_nova_ext.conf import placement as placement_conf
from gpu_nova_ext.placement import client as pclient
from gpu_nova_ext.state import rpc
from gpu_nova_ext.tests import deadline
from gpu_nova_ext.tests.functional.placement import base
from gpu_nova_ext.tests.functional.placement import test_agent
from gpu_nova_ext.tests.functional.state import support


class SilentServer(fixtures.Fixture):
    """Accepts TCP connections on loopback and never sends a byte."""

    def _setUp(self):
        self.sock = socket.socket()
        self.sock.bind(('127.0.0.1', 0))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.accepted = []
        self._stop = threading.Event()
        thread = threading.Thread(target=self._accept, daemon=True)
        thread.start()
        self.addCleanup(thread.join, 5)
        self.addCleanup(self._stop.set)
        self.endpoint = 'http://127.0.0.1:%d/placement' % (
            self.sock.getsockname()[1])

    def _accept(self):
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            self.accepted.append(conn)
        for conn in self.accepted:
            conn.close()
        self.sock.close()


def simulated_agent_conf(directory, endpoint, **groups):
    gpus_file = os.path.join(directory, 'gpus.yaml')
    with open(gpus_file, 'w') as f:
        yaml.safe_dump(test_agent.SIMULATED_GPUS, f)
    agent = {'inventory_sources': 'simulated',
             'simulated_gpus_file': gpus_file, 'report_interval': '1',
             'prometheus_port': '0'}
    agent.update(groups.pop('agent', {}))
    return base.write_conf(directory, endpoint, agent=agent, **groups)


def run_cli(conf_file, *argv, module='gpu_nova_ext.cmd.cli'):
    proc = subprocess.run(
        [sys.executable, '-m', module, '--config-file', conf_file, *argv],
        capture_output=True, text=True, timeout=deadline.WAIT_S)
    return proc.returncode, proc.stdout, proc.stderr


class TestCommandsAgainstSilentPlacement(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.silent = self.useFixture(SilentServer())
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.conf_file = simulated_agent_conf(
            self.tmp, self.silent.endpoint, placement={'timeout': '1'})

    def assert_timed_out(self, rc, err):
        self.assertEqual(2, rc, err)
        last = err.strip().splitlines()[-1]
        self.assertIn('did not answer', last)
        self.assertIn('[placement] timeout', last)
        self.assertIn(self.silent.endpoint, last)
        self.assertNotIn('Traceback', err)
        # a request that timed out is not retried (keystoneauth says each
        # retry; the silent Placement counts the connections)
        self.assertNotIn('Retrying in', err)
        self.assertEqual(1, len(self.silent.accepted))

    def test_report_once_ends(self):
        rc, out, err = run_cli(self.conf_file, 'report', '--once')
        self.assert_timed_out(rc, err)

    def test_timeout_has_a_default(self):
        conf = base.load_conf(base.write_conf(self.tmp, self.silent.endpoint))
        self.assertEqual(placement_conf.DEFAULT_TIMEOUT,
                         conf.placement.timeout)
        client = pclient.PlacementClient(conf)
        self.assertEqual(placement_conf.DEFAULT_TIMEOUT,
                         client._adapter.session.timeout)


class TestDaemonAgainstSilentPlacement(testtools.TestCase):
    """The state flows whatever Placement does."""

    def setUp(self):
        super().setUp()
        self.silent = self.useFixture(SilentServer())
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def test_state_and_health_keep_flowing(self):
        # the requests hang for the whole test (timeout 300 s)
        conf = base.load_conf(simulated_agent_conf(
            self.tmp, self.silent.endpoint, placement={'timeout': '300'}))
        state = test_agent.RecordingStateClient()
        monitor = test_agent._NullMonitor()
        agent = service.AgentService(conf, state_client=state,
                                     monitor=monitor)
        thread = threading.Thread(target=agent.run)
        thread.start()
        self.addCleanup(thread.join, 10)
        self.addCleanup(agent.stop)
        self.assertTrue(deadline.wait_for(
            lambda: len(state.payloads) >= 3), state.payloads)
        self.assertTrue(self.silent.accepted)
        self.assertEqual(0, agent.cycles)
        # a health change is cast at once, not after Placement
        casts = len(state.payloads)
        agent._on_health_change()
        self.assertTrue(deadline.wait_for(
            lambda: len(state.payloads) > casts))
        gpu = state.payloads[-1]['gpus'][0]
        self.assertEqual('healthy', gpu['health']['state'])
        agent.stop()
        thread.join(deadline.WAIT_S)
        self.assertFalse(thread.is_alive())


class RecordingSink:
    def __init__(self):
        self.payloads = []

    def update(self, payload):
        self.payloads.append(payload)
        return True


class TestDaemonProcessOverRabbitMQ(testtools.TestCase):
    """gpu-nova-agent, a silent Placement, the schedulers' real channel."""

    def setUp(self):
        super().setUp()
        self.useFixture(support.BrokerInUse())
        support.require_broker(self)
        self.silent = self.useFixture(SilentServer())
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def test_casts_state_and_ends_at_sigterm(self):
        topics = support.topics()
        listener_conf = support.make_conf(**topics)
        sink = RecordingSink()
        server = rpc.SchedulerStateServer(listener_conf, sink)
        server.start()
        self.addCleanup(server.stop)
        conf_file = simulated_agent_conf(
            self.tmp, self.silent.endpoint,
            DEFAULT={'transport_url': support.TRANSPORT_URL,
                     'control_exchange': topics['exchange']},
            oslo_messaging_rabbit={'amqp_auto_delete': 'true'},
            agent={'scheduler_topic': topics['state_topic'],
                   'agent_topic': topics['agent_topic']},
            placement={'timeout': '300'})
        log = open(os.path.join(self.tmp, 'agent.log'), 'w+')
        self.addCleanup(log.close)
        proc = subprocess.Popen(
            [sys.executable, '-m', 'gpu_nova_ext.cmd.agent',
             '--config-file', conf_file],
            stdout=subprocess.DEVNULL, stderr=log)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())

        def tail():
            log.seek(0)
            return log.read()[-3000:]

        self.assertTrue(deadline.wait_for(
            lambda: len(sink.payloads) >= 3), tail())
        self.assertEqual('cmp-1', sink.payloads[-1]['host'])
        self.assertIsNone(proc.poll(), tail())
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(0, proc.wait(deadline.WAIT_S), tail())
        self.assertIn('gpu-nova-agent stopped', tail())
