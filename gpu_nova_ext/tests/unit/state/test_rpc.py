# SPDX-License-Identifier: Apache-2.0

"""The state channel's RPC API over oslo.messaging's in-memory transport."""
import socket
import threading
import time
import uuid

import fixtures
from oslo_config import cfg
import oslo_messaging as messaging
from oslo_messaging import opts as messaging_opts
import testtools

from gpu_nova_ext.agent import payload as agent_payload
from gpu_nova_ext.agent import state_client
from gpu_nova_ext import conf as gconf
from gpu_nova_ext.inventory import base
from gpu_nova_ext import messaging as transport
from gpu_nova_ext.state import rpc
from gpu_nova_ext.tests import deadline


def make_conf(url: str = 'fake://', register_messaging: bool = True
              ) -> cfg.ConfigOpts:
    conf = cfg.ConfigOpts()
    gconf.register_opts(conf)
    if register_messaging:
        for group, opts in messaging_opts.list_opts():
            conf.register_opts(opts, group=group)
    conf([], default_config_files=[], default_config_dirs=[])
    if register_messaging:
        conf.set_override('transport_url', url)
    tag = uuid.uuid4().hex[:8]
    for group, name, value in (
            ('gpu_scheduler', 'state_topic', 'unit_%s_sched' % tag),
            ('agent', 'scheduler_topic', 'unit_%s_sched' % tag),
            ('gpu_scheduler', 'agent_topic', 'unit_%s_agent' % tag),
            ('agent', 'agent_topic', 'unit_%s_agent' % tag)):
        conf.set_override(name, value, group=group)
    return conf


def _state(host: str, now: float = 1000.0) -> dict:
    """A host's whole state, as the agent casts it."""
    return agent_payload.build_payload(
        base.HostInventory(host), host=host, nodename=host,
        root_provider_uuid=None, mode='annotate', now=now)


class Sink:
    def __init__(self, verdict=True):
        self.verdict = verdict
        self.payloads = []
        self.arrived = threading.Event()

    def update(self, payload):
        self.payloads.append(payload)
        self.arrived.set()
        if isinstance(self.verdict, Exception):
            raise self.verdict
        return self.verdict


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        port = sock.getsockname()[1]
    return 'rabbit://guest:guest@127.0.0.1:%d/' % port


class TestApi(testtools.TestCase):

    def test_endpoints_are_versioned(self):
        for endpoint in (rpc.SchedulerStateEndpoint(Sink()),
                         state_client.AgentStateEndpoint(lambda: None, 'h')):
            self.assertIsInstance(endpoint.target, messaging.Target)
            self.assertEqual('1.1', endpoint.target.version)

    def test_update_ignores_unknown_kwargs_of_a_later_minor(self):
        sink = Sink()
        rpc.SchedulerStateEndpoint(sink).update_gpu_state(
            {}, state={'host': 'h'}, added_in_1_1=True)
        self.assertEqual([{'host': 'h'}], sink.payloads)

    def test_resend_never_raises_into_the_server(self):
        def on_resend():
            raise RuntimeError('boom')

        logs = self.useFixture(fixtures.FakeLogger())
        state_client.AgentStateEndpoint(on_resend, 'h').resend_gpu_state({})
        self.assertIn('resend_gpu_state failed', logs.output)

    def test_resend_for_one_host(self):
        calls = []
        endpoint = state_client.AgentStateEndpoint(
            lambda: calls.append(1), 'h1')
        endpoint.resend_gpu_state({}, host='h2')
        self.assertEqual([], calls)
        self.assertFalse(endpoint.resend_requested.is_set())
        endpoint.resend_gpu_state({}, host='h1')
        endpoint.resend_gpu_state({})
        self.assertEqual([1, 1], calls)
        self.assertTrue(endpoint.resend_requested.is_set())


class TestMessagingOpts(testtools.TestCase):

    def test_private_conf_gets_global_only_groups(self):
        conf = make_conf(register_messaging=False)
        self.assertRaises(cfg.NoSuchOptError, getattr, conf,
                          'oslo_messaging_tracing')
        transport.register_messaging_opts(conf)
        transport.register_messaging_opts(conf)   # idempotent
        self.assertFalse(conf.oslo_messaging_tracing.tracing_enabled)
        self.assertFalse(conf.oslo_messaging_metrics.metrics_enabled)

    def test_global_conf_unharmed(self):
        # Nova's CONF is cfg.CONF, where oslo.messaging registered them.
        transport.register_messaging_opts(cfg.CONF)
        self.assertFalse(cfg.CONF.oslo_messaging_tracing.tracing_enabled)

    def test_cast_on_private_conf(self):
        # Without the tracing group a cast raises NoSuchOptError.
        conf = make_conf()
        sink = Sink()
        server = rpc.SchedulerStateServer(conf, sink)
        server.start()
        self.addCleanup(server.stop)
        client = state_client.AgentStateClient(conf, lambda: None)
        self.addCleanup(client.stop)
        self.assertTrue(client.cast_state(_state('h')))
        self.assertTrue(sink.arrived.wait(deadline.WAIT_S))


class TestChannel(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.conf = make_conf()

    def _server(self, sink):
        server = rpc.SchedulerStateServer(self.conf, sink)
        server.start()
        self.addCleanup(server.stop)
        return server

    def _agent(self, on_resend=lambda: None):
        agent = state_client.AgentStateClient(self.conf, on_resend)
        agent.start()
        self.addCleanup(agent.stop)
        return agent

    def test_cast_reaches_every_scheduler(self):
        sinks = [Sink(), Sink()]
        for sink in sinks:
            self._server(sink)
        agent = self._agent()
        self.assertTrue(agent.cast_state(_state('cmp-1')))
        for sink in sinks:
            # protocol 1.1: the facts, then the metrics
            self.assertTrue(deadline.wait_for(lambda: len(sink.payloads)
                                              == 2))
            self.assertEqual([('1.1', 'facts', 'cmp-1'),
                              ('1.1', 'metrics', 'cmp-1')],
                             [(m['version'], m['kind'], m['host'])
                              for m in sink.payloads])

    def test_starting_scheduler_asks_every_agent(self):
        asked = [threading.Event(), threading.Event()]
        for event in asked:
            self._agent(event.set)
        server = self._server(Sink())
        self.assertTrue(server.running)
        for event in asked:
            self.assertTrue(event.wait(deadline.WAIT_S))

    def test_a_failing_cache_does_not_stop_the_server(self):
        sink = Sink(verdict=RuntimeError('boom'))
        self._server(sink)
        agent = self._agent()
        self.useFixture(fixtures.FakeLogger())
        agent.cast_state(_state('h', 1.0))
        self.assertTrue(deadline.wait_for(lambda: len(sink.payloads) == 2))
        sink.verdict = True
        agent.cast_state(_state('h', 2.0))
        self.assertTrue(deadline.wait_for(lambda: len(sink.payloads) == 3))
        self.assertEqual([1.0, 1.0, 2.0],
                         [m['generated_at'] for m in sink.payloads])

    def test_start_and_stop_are_idempotent(self):
        server = rpc.SchedulerStateServer(self.conf, Sink())
        server.stop()                       # never started: fine
        server.start()
        first = server.server_name
        server.start()                      # running: nothing new
        self.assertEqual(first, server.server_name)
        started = time.monotonic()
        server.stop()
        server.stop()
        self.assertFalse(server.running)
        self.assertLess(time.monotonic() - started, 3.0)

    def test_fake_transport_server_names_are_unique(self):
        # The fake driver delivers a fanout once per server name.
        one = self._server(Sink())
        two = self._server(Sink())
        self.assertNotEqual(one.server_name, two.server_name)

    def test_real_transport_server_name_is_the_host(self):
        # Stable: RabbitMQ keeps a <topic>.<server> queue per name.
        conf = make_conf('rabbit://guest:guest@127.0.0.1:5672/')
        conf.set_override('host', 'sched-1')
        self.assertEqual('sched-1', transport.server_name(conf))

    def test_after_fork_the_child_starts_its_own(self):
        sink = Sink()
        server = self._server(sink)
        parent_name = server.server_name
        # What a forked child sees: another pid, the parent's objects.
        self.useFixture(fixtures.MonkeyPatch(
            'gpu_nova_ext.state.rpc.os.getpid', lambda: -42))
        self.assertFalse(server.running)
        server.start()
        self.assertTrue(server.running)
        self.assertNotEqual(parent_name, server.server_name)
        agent = state_client.AgentStateClient(self.conf, lambda: None)
        self.addCleanup(agent.stop)
        agent.cast_state(_state('h'))
        self.assertTrue(sink.arrived.wait(deadline.WAIT_S))


class TestBrokerDown(testtools.TestCase):

    def test_cast_logs_and_returns_false(self):
        conf = make_conf(closed_port_url())
        logs = self.useFixture(fixtures.FakeLogger())
        agent = state_client.AgentStateClient(conf, lambda: None)
        self.addCleanup(agent.stop)
        started = time.monotonic()
        self.assertFalse(agent.cast_state(_state('h')))
        self.assertLess(time.monotonic() - started, 10.0)
        self.assertIn('Could not cast update_gpu_state', logs.output)

    def test_bad_transport_url_raises_at_start(self):
        conf = make_conf('nosuchdriver://x/')
        server = rpc.SchedulerStateServer(conf, Sink())
        self.assertRaises(messaging.MessagingException, server.start)
        self.assertFalse(server.running)
