# SPDX-License-Identifier: Apache-2.0

"""The agent service and its commands against a real Placement.

In-process: the daemon loop in a thread (waiting for the compute node,
surviving a Placement outage, SIGHUP-like triggers, resend, fast stop).
Out of process: ``gpu-nova-agent`` with real signals, and
``gpu-nova-ext report --once``.
"""
import contextlib
import io
import os
import signal
import subprocess
import sys
import threading
import time

import fixtures
import yaml

from gpu_nova_ext.agent import service
from gpu_nova_ext.cmd import cli
from gpu_nova_ext import exception
from gpu_nova_ext import naming
from gpu_nova_ext.simulate import compute_providers
from gpu_nova_ext.tests import deadline
from gpu_nova_ext.tests.functional.placement import base


class RecordingStateClient:
    def __init__(self):
        self.payloads = []
        self.started = self.stopped = False

    def start(self):
        self.started = True

    def stop(self):
        self.stopped = True

    def cast_state(self, payload):
        self.payloads.append(payload)
        return True


class TestAgentService(base.PlacementTestCase):

    def setUp(self):
        super().setUp()
        self.addrs = base.addresses(2)
        self.state = RecordingStateClient()
        self.discoveries = 0
        self.useFixture(fixtures.MonkeyPatch(
            'gpu_nova_ext.agent.service.COMPUTE_NODE_RETRY', (0.05, 0.1)))

    def discover(self, conf):
        self.discoveries += 1
        return base.make_inventory(conf.host, self.addrs)

    def make_service(self, **agent_opts):
        conf = self.make_conf(agent=dict({'report_interval': '1'},
                                         **agent_opts))
        return service.AgentService(conf, discover=self.discover,
                                    state_client=self.state,
                                    monitor=_NullMonitor())

    def test_run_cycle_casts_the_payload(self):
        root, pgpus = self.vgpu_host(2)
        agent = self.make_service()
        result = agent.run_cycle()
        self.assertEqual(root, result.root_provider_uuid)
        payload = self.state.payloads[-1]
        self.assertNotIn('version', payload)
        self.assertEqual(self.HOST, payload['host'])
        self.assertEqual(self.HOST, payload['nodename'])
        self.assertEqual(root, payload['root_provider_uuid'])
        self.assertEqual('annotate', payload['agent_mode'])
        self.assertEqual(
            {a: [pgpus[a]] for a in self.addrs},
            {g['pci_address']: g['provider_uuids']
             for g in payload['gpus']})
        # Placement down: the state is still cast, with the last UUIDs
        self.placement.stop()
        self.assertRaises(exception.PlacementUnavailable, agent.run_cycle)
        self.assertEqual([pgpus[self.addrs[0]]],
                         self.state.payloads[-1]['gpus'][0]['provider_uuids'])

    def test_daemon_waits_survives_outage_and_stops_fast(self):
        logger = self.useFixture(fixtures.FakeLogger(
            name='gpu_nova_ext.agent.service'))
        agent = self.make_service()
        thread = threading.Thread(target=agent.run)
        thread.start()
        self.addCleanup(agent.stop)
        # no compute node yet: it waits, saying why
        self.assertTrue(deadline.wait_for(
            lambda: 'Waiting for nova-compute' in logger.output))
        # the state flows meanwhile, without a compute node provider
        self.assertTrue(deadline.wait_for(lambda: self.state.payloads))
        self.assertIsNone(self.state.payloads[0]['root_provider_uuid'])
        self.assertEqual(0, agent.cycles)
        root, pgpus = self.vgpu_host(2)
        self.assertTrue(deadline.wait_for(lambda: agent.cycles >= 1))
        self.assertIn(naming.HOST_TRAIT, self.traits(root))
        self.assertTrue(self.state.started)
        # the report found the providers: the state is cast again at once
        self.assertTrue(deadline.wait_for(
            lambda: self.state.payloads[-1]['root_provider_uuid'] == root))

        # Placement goes away for a while: cycles fail, the agent lives
        self.placement.stop()
        failed = agent.failed_cycles
        agent.trigger()
        self.assertTrue(deadline.wait_for(
            lambda: agent.failed_cycles > failed))
        self.assertTrue(thread.is_alive())
        self.placement.start()
        self.addrs = base.addresses(1)       # a GPU went away meanwhile
        gone = pgpus[base.addresses(2)[1]]
        self.assertTrue(deadline.wait_for(
            lambda: 'CUSTOM_GPU_MODEL_A100_80GB_PCIE' not in self.traits(
                gone)))

        # a scheduler asks for state: cast without a cycle
        casts, discoveries = len(self.state.payloads), self.discoveries
        agent.request_resend()
        self.assertTrue(deadline.wait_for(
            lambda: len(self.state.payloads) > casts))
        self.assertEqual(discoveries, self.discoveries)

        start = time.monotonic()
        agent.stop()
        thread.join(deadline.WAIT_S)
        self.assertFalse(thread.is_alive())
        self.assertLess(time.monotonic() - start, 2.0)
        self.assertTrue(self.state.stopped)
        self.assertEqual(0, agent.exit_code)

    def test_gives_up_after_compute_node_wait_timeout(self):
        agent = self.make_service(compute_node_wait_timeout='1')
        start = time.monotonic()
        self.assertEqual(1, agent.run())
        self.assertLess(time.monotonic() - start, 5)


class _NullMonitor:
    def start(self):
        pass

    def stop(self):
        pass

    def apply(self, inventory):
        for gpu in inventory.gpus:
            gpu.metrics = {'utilization_pct': 1.0}


SIMULATED_GPUS = {
    '0000:3b:00.0': {'name': 'NVIDIA A100 80GB PCIe', 'memory_mib': 81920,
                     'driver_version': '550.54.15', 'cuda_cc': '8.0',
                     'health': 'healthy'},
    '0000:3c:00.0': {'name': 'NVIDIA A100 80GB PCIe', 'memory_mib': 81920,
                     'driver_version': '550.54.15', 'cuda_cc': '8.0',
                     'health': 'healthy'},
}


class TestCommands(base.PlacementTestCase):
    """The console entry points, on the simulated inventory source."""

    def setUp(self):
        super().setUp()
        gpus_file = os.path.join(self.tmp, 'gpus.yaml')
        with open(gpus_file, 'w') as f:
            yaml.safe_dump(SIMULATED_GPUS, f)
        self.conf_file = base.write_conf(
            self.tmp, self.placement.endpoint, self.HOST,
            DEFAULT={'transport_url': 'fake://'},
            agent={'inventory_sources': 'simulated',
                   'simulated_gpus_file': gpus_file,
                   'report_interval': '60', 'prometheus_port': '0'})

    def test_report_once(self):
        root = compute_providers.create_compute_node(self.nova, self.HOST)

        def report(*extra):
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                rc = cli.main(['--config-file', self.conf_file, 'report',
                               '--once'] + list(extra))
            return rc, out.getvalue()

        self.placement.reset_counters()
        rc, out = report('--dry-run')
        self.assertEqual(0, rc, out)
        self.assertEqual(0, self.placement.writes)
        self.assertIn('would cmp-1: traits +CUSTOM_GPU_', out)
        rc, out = report()
        self.assertEqual(0, rc, out)
        self.assertIn('CUSTOM_GPU_MODEL_A100_80GB_PCIE', self.traits(root))
        self.assertIn('write request(s)', out)
        self.placement.reset_counters()
        rc, out = report()
        self.assertEqual(0, rc, out)
        self.assertEqual(0, self.placement.writes, self.placement.write_log)
        self.assertIn('Placement is up to date', out)
        self.assertIn('0 write request(s)', out)

    def test_report_without_compute_node_exits_2(self):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rc = cli.main(['--config-file', self.conf_file, 'report',
                           '--once'])
        self.assertEqual(2, rc)
        self.assertIn("No compute node resource provider named 'cmp-1'",
                      err.getvalue())

    def test_agent_daemon_signals(self):
        root = compute_providers.create_compute_node(self.nova, self.HOST)
        log_file = os.path.join(self.tmp, 'agent.log')
        proc = subprocess.Popen(
            [sys.executable, '-m', 'gpu_nova_ext.cmd.agent',
             '--config-file', self.conf_file],
            stdout=subprocess.DEVNULL, stderr=open(log_file, 'w'))
        self.addCleanup(lambda: proc.poll() is None and proc.kill())

        def cycles_done():
            with open(log_file) as log:
                return log.read().count('Cycle done in')

        first = deadline.wait_for(cycles_done)
        self.assertTrue(first, open(log_file).read())
        self.assertIn(naming.HOST_TRAIT, self.traits(root))
        # report_interval is 60 s: only SIGHUP makes a cycle now
        self.placement.reset_counters()
        proc.send_signal(signal.SIGHUP)
        self.assertTrue(deadline.wait_for(lambda: cycles_done() > first),
                        open(log_file).read())
        self.assertGreaterEqual(self.placement.requests['GET'], 1)
        self.assertEqual(0, self.placement.writes)
        start = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(deadline.WAIT_S)
        elapsed = time.monotonic() - start
        self.assertEqual(0, rc, open(log_file).read())
        self.assertLess(elapsed, 2.0)
