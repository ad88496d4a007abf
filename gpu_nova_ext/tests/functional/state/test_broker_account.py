# SPDX-License-Identifier: Apache-2.0

"""The agent's least-privilege RabbitMQ account, over TLS (issue 42).

A real broker (``tools/ensure-rabbitmq``: plain AMQP on 5672, TLS on
5671 with its test CA) and the account ``contrib/rabbitmq/gpu-agent-account``
makes: the agent's own state client, connected over TLS with that account,
hears a scheduler's resend request and delivers GPU state to it; the broker
refuses the same account a forged Nova RPC (a cast to Nova's
``scheduler``/``compute`` topic on the ``nova`` exchange) and any touch of
Nova's queues with ACCESS_REFUSED.
"""
import os
import pathlib
import re
import secrets
import ssl
import subprocess
import tempfile
import threading
import uuid

import amqp
from amqp import exceptions as amqp_exc
import oslo_messaging
import testtools

from gpu_nova_ext.agent import state_client
from gpu_nova_ext.conf import agent as agent_conf
from gpu_nova_ext.state import cache as state_cache
from gpu_nova_ext.state import rpc
from gpu_nova_ext.tests import deadline
from gpu_nova_ext.tests.functional.state import support

TOP = pathlib.Path(__file__).resolve().parents[4]
ACCOUNT_SCRIPT = TOP / 'contrib' / 'rabbitmq' / 'gpu-agent-account'
#: where tools/ensure-rabbitmq keeps the test broker's CA
TLS_DIR = os.environ.get('GPU_NOVA_EXT_TEST_RABBITMQ_TLS_DIR',
                         '/etc/rabbitmq/gpu-nova-ext-test-tls')
CA_FILE = os.path.join(TLS_DIR, 'ca.pem')
TLS_PORT = 5671
HOST = support.broker_address()[0]
#: what Nova's services use: its exchange and RPC topics
NOVA_EXCHANGE = 'nova'
NOVA_TOPICS = ('scheduler', 'compute', 'conductor')


def _as_root(cmd):
    return cmd if os.getuid() == 0 else ['sudo', '-n', *cmd]


def _script(*args, env=None):
    proc = subprocess.run(_as_root([str(ACCOUNT_SCRIPT), *args]),
                          capture_output=True, text=True, env=env,
                          timeout=deadline.WAIT_S)
    if proc.returncode != 0:
        raise AssertionError('%s failed (exit %d): %s' % (
            ACCOUNT_SCRIPT, proc.returncode,
            (proc.stderr or proc.stdout).strip()[-500:]))
    return proc.stdout


#: py-amqp's TLS options: verify the broker against the test CA
TLS_OPTIONS = {'ca_certs': CA_FILE, 'cert_reqs': ssl.CERT_REQUIRED}


class TestAgentAccountOverTls(testtools.TestCase):
    """One account for the class (rabbitmqctl takes about a second)."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls._hold = support.BrokerInUse()
        cls._hold.setUp()
        try:
            cls._make_account()
        except BaseException:
            cls._hold.cleanUp()
            raise

    @classmethod
    def _make_account(cls):
        if not support.broker_listening('rabbit://%s:%d/' % (HOST, TLS_PORT)):
            raise AssertionError(
                'RabbitMQ does not listen with TLS on %s:%d: run '
                'tools/ensure-rabbitmq (tools/run tests does)'
                % (HOST, TLS_PORT))
        if not os.path.exists(CA_FILE):
            raise AssertionError(
                'The test broker CA %s is missing: run tools/ensure-rabbitmq'
                % CA_FILE)
        tag = uuid.uuid4().hex[:10]
        cls.user = 'gne-test-agent-%s' % tag
        cls.password = secrets.token_urlsafe(16)
        cls.names = {
            'exchange': 'gne_test_%s' % tag,
            'state_topic': 'gne_test_%s_scheduler' % tag,
            'agent_topic': 'gne_test_%s_agent' % tag}
        cls.notification_topic = 'gne_test_%s_notifications' % tag
        with tempfile.NamedTemporaryFile('w', suffix='.pw') as pw:
            pw.write(cls.password + '\n')
            pw.flush()
            _script('--exchange', cls.names['exchange'],
                    '--scheduler-topic', cls.names['state_topic'],
                    '--agent-topic', cls.names['agent_topic'],
                    '--notification-topic', cls.notification_topic,
                    '--password-file', pw.name, cls.user)

    @classmethod
    def tearDownClass(cls):
        try:
            support.rabbitmqctl('delete_user', cls.user)
        finally:
            cls._hold.cleanUp()
            super().tearDownClass()

    def _agent_conf(self, host):
        url = 'rabbit://%s:%s@%s:%d/' % (self.user, self.password, HOST,
                                         TLS_PORT)
        conf = support.make_conf(url=url, host=host, **self.names)
        conf.set_override('ssl', True, group='oslo_messaging_rabbit')
        conf.set_override('ssl_ca_file', CA_FILE,
                          group='oslo_messaging_rabbit')
        return conf

    def _amqp(self, userid, password, port=TLS_PORT):
        conn = amqp.Connection(
            '%s:%d' % (HOST, port), userid=userid, password=password,
            ssl=TLS_OPTIONS if port == TLS_PORT else False,
            confirm_publish=True, connect_timeout=deadline.WAIT_S)
        conn.connect()
        self.addCleanup(conn.collect)
        return conn

    def test_agent_delivers_state_over_tls(self):
        # the scheduler side: Nova's account (guest) on its own control
        # exchange, standing in for "nova"
        sched_conf = support.make_conf(
            exchange=self.names['exchange'] + '_nova',
            state_topic=self.names['state_topic'],
            agent_topic=self.names['agent_topic'])
        asked = threading.Event()
        agent = state_client.AgentStateClient(
            self._agent_conf('cmp-tls'), asked.set)
        agent.start()
        self.addCleanup(agent.stop)
        self.assertTrue(agent.running)
        cache = state_cache.GpuStateCache(sched_conf)
        server = rpc.SchedulerStateServer(sched_conf, cache)
        server.start()
        self.addCleanup(server.stop)
        # the scheduler's resend request reached the agent's queue
        self.assertTrue(asked.wait(deadline.WAIT_S))
        state = support.payload('cmp-tls', gpus=2)
        self.assertTrue(agent.cast_state(state))
        got = deadline.wait_for(lambda: cache.get('cmp-tls'))
        self.assertTrue(got, 'the agent state did not reach the scheduler')
        self.assertEqual(state['gpus'][0]['uuid'], got['gpus'][0]['uuid'])

    def test_agent_sends_notifications(self):
        conf = self._agent_conf('cmp-tls')
        transport = oslo_messaging.get_notification_transport(conf)
        self.addCleanup(transport.cleanup)
        notifier = oslo_messaging.Notifier(
            transport, publisher_id='gpu-nova-agent.cmp-tls',
            driver='messagingv2', topics=[self.notification_topic],
            retry=0)
        notifier.info({}, 'gpu.health.update', {'host': 'cmp-tls'})
        # on the agents' exchange, in the queue oslo.messaging declares
        conn = self._amqp('guest', 'guest', port=support.broker_address()[1])
        channel = conn.channel()
        self.addCleanup(channel.queue_delete,
                        self.notification_topic + '.info')
        got = deadline.wait_for(
            lambda: channel.basic_get(self.notification_topic + '.info',
                                      no_ack=True))
        self.assertTrue(got, 'the notification was not delivered')
        self.assertIn('gpu.health.update', str(got.body))
        self.assertEqual(self.names['exchange'],
                         got.delivery_info['exchange'])

    def test_forged_nova_rpc_refused(self):
        conn = self._amqp(self.user, self.password)
        for topic in NOVA_TOPICS:
            channel = conn.channel()
            # a cast to Nova's topic on Nova's exchange: refused before
            # the broker even looks the exchange up
            exc = self.assertRaises(
                amqp_exc.AccessRefused, channel.basic_publish,
                amqp.Message('{"oslo.message": "{}"}'),
                exchange=NOVA_EXCHANGE, routing_key=topic,
                confirm_timeout=deadline.WAIT_S)
            self.assertIn(NOVA_EXCHANGE, str(exc))
        for queue in NOVA_TOPICS + ('compute.cmp-tls',):
            # nor read, declare or delete Nova's queues
            self.assertRaises(amqp_exc.AccessRefused,
                              conn.channel().basic_consume, queue)
            self.assertRaises(amqp_exc.AccessRefused,
                              conn.channel().queue_declare, queue)
        self.assertRaises(amqp_exc.AccessRefused,
                          conn.channel().exchange_declare,
                          NOVA_EXCHANGE, 'topic')
        # nor bind a queue of its own to Nova's exchange to listen in
        channel = conn.channel()
        own = '%s_fanout_%s' % (self.names['agent_topic'],
                                uuid.uuid4().hex)
        channel.queue_declare(own, auto_delete=True)
        self.assertRaises(amqp_exc.AccessRefused, channel.queue_bind,
                          own, NOVA_EXCHANGE, 'scheduler')

    def test_nova_account_is_not_refused(self):
        # The control: the same cast with Nova's account passes the
        # permission check and only finds no such exchange here (404).
        conn = self._amqp('guest', 'guest', port=support.broker_address()[1])
        channel = conn.channel()
        missing = '%s_nova_missing' % self.names['exchange']
        self.assertRaises(amqp_exc.NotFound, channel.basic_publish,
                          amqp.Message('{}'), exchange=missing,
                          routing_key='scheduler',
                          confirm_timeout=deadline.WAIT_S)


class TestAccountScript(testtools.TestCase):
    """The script's defaults are the options' defaults (one place)."""

    def test_defaults_are_the_agent_options(self):
        out = subprocess.run([str(ACCOUNT_SCRIPT), '--print', 'gpu-agent'],
                             capture_output=True, text=True, check=True,
                             timeout=60).stdout
        defaults = {o.name: o.default for o in agent_conf.agent_opts}
        sched, agent = defaults['scheduler_topic'], defaults['agent_topic']
        (perms,) = [line for line in out.splitlines()
                    if 'set_permissions' in line]
        configure, write, read = [
            re.compile(p.strip("'")) for p in perms.split()[-3:]]
        own = ('gpu_nova_ext', sched + '_fanout', agent, agent + '.cmp-a',
               agent + '_fanout_0123abcd')
        for name in own:
            self.assertTrue(configure.match(name), name)
        # publishes the state; binds and reads its own queues only
        self.assertTrue(write.match(sched + '_fanout'))
        for name in own[2:]:
            self.assertTrue(write.match(name), name)
            self.assertTrue(read.match(name), name)
        # never the schedulers' queues, Nova's, or a shared exchange
        foreign = (NOVA_EXCHANGE, 'openstack', 'amq.default', '') + (
            NOVA_TOPICS + ('compute.cmp-a', 'reply_0123abcd',
                           sched, sched + '.ctl-1', sched + '_fanout_0123',
                           'notifications.info'))
        for regex in (configure, write, read):
            for name in foreign:
                self.assertIsNone(regex.match(name), (regex, name))
        self.assertIsNone(read.match(sched + '_fanout'))

    def test_shared_exchange_refused(self):
        proc = subprocess.run(
            [str(ACCOUNT_SCRIPT), '--print', '--exchange', 'nova', 'x'],
            capture_output=True, text=True, timeout=60)
        self.assertEqual(2, proc.returncode)
        self.assertIn('control_exchange', proc.stderr)
        self.assertEqual(1, len(proc.stderr.strip().splitlines()))
