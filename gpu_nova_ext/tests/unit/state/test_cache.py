# SPDX-License-Identifier: Apache-2.0

"""The scheduler-side GPU state cache."""
import gc
import logging
import threading

import fixtures
from oslo_config import cfg
from oslo_config import fixture as config_fixture
import testtools

from gpu_nova_ext.agent import payload as agent_payload
from gpu_nova_ext import conf as gconf
from gpu_nova_ext.state import cache as state_cache
from gpu_nova_ext.state import records
from gpu_nova_ext.tests.unit.scheduler import nova_objects as no


class Clock:
    def __init__(self, now=1000.0):
        self.now = now

    def __call__(self):
        return self.now


class CacheTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.conf = cfg.ConfigOpts()
        gconf.register_nova_opts(self.conf)
        self.conf([], project='test')
        self.useFixture(config_fixture.Config(self.conf))
        self.clock = Clock()
        self.cache = state_cache.GpuStateCache(self.conf, clock=self.clock)
        self.publishers = {}
        self.asked = []
        self.cache.ask_resend = self.asked.append
        self.log = self.useFixture(fixtures.FakeLogger(
            name='gpu_nova_ext', level=logging.DEBUG))

    def _payload(self, host, generated_at=100.0, gpus=2, nodename=None,
                 **gpu_kwargs):
        return no.payload(host, [no.gpu_state(host, i, **gpu_kwargs)
                                 for i in range(gpus)],
                          generated_at=generated_at, nodename=nodename)

    def send(self, state):
        """Cast ``state`` as its host's agent does; True: all stored."""
        publisher = self.publishers.setdefault(state['host'],
                                               agent_payload.Publisher())
        return all([self.cache.update(message)
                    for message in publisher.messages(state)])

    def warnings(self, text):
        return [line for line in self.log.output.splitlines()
                if text in line]


class TestIngestion(CacheTestCase):

    def test_update_get_hosts(self):
        self.assertTrue(self.send(self._payload('b')))
        self.assertTrue(self.send(self._payload('a')))
        self.assertEqual(['a', 'b'], self.cache.hosts())
        self.assertEqual('a', self.cache.get('a')['host'])
        self.assertIsNone(self.cache.get('c'))
        # by root provider UUID too
        self.assertEqual('a', self.cache.get(no.rp_uuid('a'))['host'])
        # the shape the agent built, from its two messages
        expected = self._payload('a')
        del expected['version']
        self.assertEqual(expected, self.cache.get('a'))

    def test_protocol_1_0_is_refused_with_the_fix(self):
        self.assertFalse(self.cache.update(self._payload('a')))
        (line,) = self.warnings('Rejected GPU state message from a')
        self.assertIn("state protocol '1.0'", line)
        self.assertIn('upgrade gpu-nova-agent on that host', line)
        self.assertEqual([], self.cache.hosts())

    def test_hosts_are_bounded(self):
        self.useFixture(fixtures.MonkeyPatch(
            'gpu_nova_ext.state.cache._TABLE_LIMIT', 2))
        self.assertTrue(self.send(self._payload('a')))
        self.assertTrue(self.send(self._payload('b')))
        self.assertFalse(self.send(self._payload('c')))
        self.assertEqual(1, len(self.warnings('the most this cache holds')))
        # a host without live state makes room
        self.clock.now += self.cache.ttl + 1
        self.assertTrue(self.send(self._payload('b', 101.0)))
        self.assertEqual(['c'], self.asked)
        # its agent answers the resend request
        for message in self.publishers['c'].messages(self._payload('c'),
                                                     resend=True):
            self.assertTrue(self.cache.update(message))
        self.assertEqual(['b', 'c'], self.cache.hosts())
        # a is forgotten: its next metrics find no facts to go with
        self.assertFalse(self.send(self._payload('a', 102.0)))
        self.assertEqual(['c', 'a'], self.asked)

    def test_staleness_with_injected_clock(self):
        self.conf.set_override('state_ttl', 30, 'gpu_scheduler')
        self.cache.configure(self.conf)
        self.assertTrue(self.send(self._payload('a')))
        self.clock.now += 29
        self.assertEqual(['a'], self.cache.hosts())
        self.clock.now += 2
        self.assertEqual([], self.cache.hosts())
        self.assertIsNone(self.cache.get('a'))
        # expired, not forgotten: its next metrics make it live again
        self.assertTrue(self.send(self._payload('a', 101.0)))
        self.assertEqual(['a'], self.cache.hosts())

    def test_protocol_1_1(self):
        pub = agent_payload.Publisher()
        state = self._payload('a', utilization=30.0)
        for message in pub.messages(state):
            self.assertTrue(self.cache.update(message))
        record = self.cache.host_record('a')
        self.assertEqual((0.3, 0.3), record.utilization)
        # the next interval: metrics only; the record refers to the facts
        state = self._payload('a', 101.0, utilization=60.0)
        (metrics,) = pub.messages(state)
        self.assertTrue(self.cache.update(metrics))
        newer = self.cache.host_record('a')
        self.assertEqual((0.6, 0.6), newer.utilization)
        self.assertIs(record.facts, newer.facts)
        self.assertEqual(60.0, self.cache.get('a')['gpus'][0]['metrics'][
            'utilization_pct'])
        # a reordered (older) metrics message changes nothing
        self.assertFalse(self.cache.update(metrics))

    def test_metrics_without_facts_ask_that_host(self):
        pub = agent_payload.Publisher()
        facts, metrics = pub.messages(self._payload('a'))
        self.assertFalse(self.cache.update(metrics))
        self.assertEqual(['a'], self.asked)
        self.assertFalse(self.cache.update(dict(metrics, seq=3)))
        self.assertEqual(['a'], self.asked)       # not every message
        self.clock.now += state_cache.RESEND_INTERVAL
        self.assertFalse(self.cache.update(dict(metrics, seq=4)))
        self.assertEqual(['a', 'a'], self.asked)
        self.assertTrue(self.cache.update(facts))
        self.assertTrue(self.cache.update(dict(metrics, seq=5)))
        self.assertIsNotNone(self.cache.host_record('a'))

    def test_agent_restart_starts_a_new_sequence(self):
        for message in agent_payload.Publisher().messages(
                self._payload('a')):
            self.cache.update(dict(message, seq=message['seq'] + 100))
        restarted = agent_payload.Publisher()
        for message in restarted.messages(self._payload('a', health=(
                'unhealthy'))):
            self.assertTrue(self.cache.update(message))
        self.assertEqual((2, 2), self.cache.host_record('a').health_rank)

    def test_precomputed_lookups(self):
        gpus = [no.gpu_state('a', 0, available=2, max_instances=8),
                no.gpu_state('a', 1, health='unhealthy'),
                no.gpu_state('a', 2, mode='passthrough', assigned=True),
                no.gpu_state('a', 3, mode='passthrough')]
        self.assertTrue(self.send(no.payload('a', gpus)))
        record = self.cache.host_record('a')
        self.assertEqual((0.25, 0.0, 0.0, 1.0), record.free)
        self.assertEqual(1.25, record.free_units)
        self.assertEqual(1, record.idle_gpus)
        self.assertEqual([no.rp_uuid('a', no.pci(3))],
                         [g.provider_uuids[0]
                          for g in record.passthrough_unknown])
        self.assertEqual({0: 3, 2: 1}, {rank: len(rps) for rank, rps
                                        in record.groups(
                                            records.FAMILY_HEALTH).items()})
        ranks, best = record.order('spread')
        self.assertEqual(no.rp_uuid('a', no.pci(3)), best[0])
        self.assertEqual(no.rp_uuid('a', no.pci(1)), best[-1])
        # pack: the least free capacity left (the assigned GPU has no
        # candidates: Placement offers none)
        self.assertEqual(no.rp_uuid('a', no.pci(2)),
                         record.order('pack')[1][0])
        self.assertEqual(float('inf'), ranks[no.rp_uuid('a')])

    def test_update_never_raises(self):
        # issue 16.4: 10**400 is a valid JSON integer
        payload = self._payload('a')
        payload['gpus'][0]['metrics']['power_limit_w'] = 10 ** 400
        self.assertFalse(self.send(payload))
        self.assertEqual(1, len(self.warnings('power_limit_w')))
        self.assertNotIn('Traceback', self.log.output)
        # and whatever a bug raises while ingesting
        self.useFixture(fixtures.MonkeyPatch(
            'gpu_nova_ext.state.records.host_record',
            lambda *a, **k: 1 / 0))
        self.assertFalse(self.send(self._payload('b')))
        self.assertEqual(1, len(self.warnings('ZeroDivisionError')))

    def test_rejections_are_logged_once_per_host_per_ttl(self):
        warnings = self.useFixture(fixtures.FakeLogger(
            name='gpu_nova_ext.state', level=logging.WARNING))
        bad = self._payload('a')
        bad['gpus'][0]['health']['state'] = 'sick'
        for _ in range(3):
            self.assertFalse(self.send(bad))
        self.assertEqual(1, warnings.output.count(
            'Rejected GPU state message from a: data.gpus[0].health.state'))
        self.clock.now += self.cache.ttl
        self.send(bad)
        self.assertEqual(2, warnings.output.count(
            'Rejected GPU state message from a'))


class TestIdentity(CacheTestCase):
    """Issue 16.2: a message updates only the host it names."""

    def test_a_host_cannot_take_another_hosts_names(self):
        self.assertTrue(self.send(self._payload('b')))
        hostile = self._payload('a', nodename='b')
        hostile['root_provider_uuid'] = no.rp_uuid('b')
        self.assertFalse(self.send(hostile))
        (line,) = self.warnings('which host b holds')
        self.assertIn('from a', line)
        self.assertEqual('b', self.cache.get('b')['host'])
        self.assertEqual('b', self.cache.get(no.rp_uuid('b'))['host'])
        # A corrected: both live, B keeps its state and its names
        self.assertTrue(self.send(self._payload('a')))
        self.assertTrue(self.send(self._payload('b', 101.0)))
        self.assertEqual(['a', 'b'], self.cache.hosts())
        self.assertEqual('b', self.cache.get(no.rp_uuid('b'))['host'])

    def test_gpu_providers_of_another_host(self):
        self.assertTrue(self.send(self._payload('b')))
        # host a's GPUs carry b's provider UUIDs
        hostile = no.payload('a', [no.gpu_state('b', 0)])
        self.assertFalse(self.send(hostile))
        self.assertEqual(1, len(self.warnings('GPU provider')))
        self.assertIsNone(self.cache.get('a'))

    def test_names_of_a_host_without_live_state_can_move(self):
        self.assertTrue(self.send(self._payload('b')))
        self.clock.now += self.cache.ttl + 1
        moved = self._payload('a', nodename='b')
        self.assertTrue(self.send(moved))
        self.assertEqual('a', self.cache.get('b')['host'])


class TestOrdering(CacheTestCase):
    """Issue 16.3: ordering survives clock skew (sequence numbers)."""

    def test_the_agents_clock_does_not_order(self):
        # the agent's clock was far ahead, then NTP fixed it: its later
        # messages, a GPU turning unhealthy among them, still count
        self.assertTrue(self.send(self._payload('a', 100.0 + 3600)))
        self.assertTrue(self.send(self._payload('a', 101.0,
                                                health='unhealthy')))
        self.assertEqual((2, 2), self.cache.host_record('a').health_rank)
        self.assertTrue(self.send(self._payload('a', 102.0)))
        self.assertEqual((0, 0), self.cache.host_record('a').health_rank)

    def test_older_message_never_makes_health_better(self):
        pub = agent_payload.Publisher()
        healthy = pub.messages(self._payload('a', 80.0))
        for message in healthy:
            self.assertTrue(self.cache.update(message))
        (unhealthy,) = pub.messages(self._payload('a', 90.0,
                                                  health='unhealthy'))
        (late,) = pub.messages(self._payload('a', 91.0))
        (newest,) = pub.messages(self._payload('a', 92.0,
                                               health='unhealthy'))
        self.assertTrue(self.cache.update(newest))
        # ordered by the sequence number, not the agent's clock: a late
        # message with an earlier sequence number changes nothing
        self.assertFalse(self.cache.update(late))
        self.assertFalse(self.cache.update(healthy[-1]))
        self.assertEqual((2, 2), self.cache.host_record('a').health_rank)
        # nor does a later-generated one numbered before the held one
        self.assertFalse(self.cache.update(dict(
            late, generated_at=200.0)))
        self.assertEqual((2, 2), self.cache.host_record('a').health_rank)
        # a newer one always wins, better health included
        (recovered,) = pub.messages(self._payload('a', 93.0))
        self.assertTrue(self.cache.update(recovered))
        self.assertEqual((0, 0), self.cache.host_record('a').health_rank)
        self.assertFalse(self.cache.update(unhealthy))
        self.assertEqual((0, 0), self.cache.host_record('a').health_rank)


class TestWaitForState(testtools.TestCase):

    def test_counts_what_arrives(self):
        cache = state_cache.GpuStateCache()
        started = threading.Event()

        def agents():
            started.wait()
            for i in range(3):
                state = no.payload('h%d' % i, [no.gpu_state('h%d' % i, 0)])
                for message in agent_payload.Publisher().messages(state):
                    cache.update(message)

        thread = threading.Thread(target=agents)
        thread.start()
        started.set()
        count = cache.listener.wait(30.0, quiet=5.0)
        thread.join()
        self.assertEqual(6, count)      # facts and metrics of each

    def test_nothing_arrives(self):
        # issue 15.2: no agent answers, the wait ends after quiet
        cache = state_cache.GpuStateCache()
        self.assertEqual(0, cache.listener.wait(30.0, quiet=0.01))


class TestSingletonAndListener(testtools.TestCase):

    def setUp(self):
        super().setUp()
        state_cache.reset_cache()
        self.addCleanup(state_cache.reset_cache)
        # the root logger too: the expected ERROR must not reach stderr
        self.useFixture(fixtures.FakeLogger(name='', level=logging.ERROR))
        self.log = self.useFixture(fixtures.FakeLogger(
            name='gpu_nova_ext', level=logging.INFO))

    def _conf(self, transport_url=None, **overrides):
        from oslo_messaging import opts as messaging_opts

        conf = cfg.ConfigOpts()
        gconf.register_nova_opts(conf)
        for group, opts in messaging_opts.list_opts():
            if group is None:
                conf.register_opts(opts)
        conf([], project='test')
        self.useFixture(config_fixture.Config(conf))
        for key, value in overrides.items():
            conf.set_override(key, value, 'gpu_scheduler')
        if transport_url:
            conf.set_override('transport_url', transport_url)
        return conf

    def test_singleton(self):
        cache = state_cache.get_cache()
        self.assertIs(cache, state_cache.get_cache())
        state_cache.reset_cache()
        self.assertIsNot(cache, state_cache.get_cache())

    def test_ensure_started_respects_state_listener(self):
        cache = state_cache.get_cache()
        cache.ensure_started(self._conf(state_listener=False,
                                        state_ttl=42))
        self.assertFalse(cache.listener.running)
        self.assertEqual(42, cache.ttl)

    def test_ensure_started_never_raises_and_logs_once(self):
        conf = self._conf(transport_url='nosuchdriver://')
        cache = state_cache.get_cache()
        self.assertFalse(cache.ensure_started(conf))
        self.assertFalse(cache.ensure_started(conf))
        self.assertFalse(cache.listener.running)
        self.assertEqual(1, self.log.output.count(
            'GPU state listener could not start'))

    def test_start_stop_on_fake_transport(self):
        conf = self._conf(transport_url='fake:/')
        cache = state_cache.get_cache()
        self.assertTrue(cache.ensure_started(conf))
        self.assertTrue(cache.listener.running)
        self.assertFalse(cache.ensure_started(conf))
        state_cache.reset_cache()
        self.assertFalse(cache.listener.running)
        cache.stop()

    def test_listener_stops_with_the_plugins(self):
        # issue 15.2: nova-scheduler's filters and weighers go with its
        # HostManager; the listener they started goes with them
        from gpu_nova_ext.scheduler.filters import facts
        from gpu_nova_ext.scheduler.weighers import capacity
        conf = self._conf(transport_url='fake:/')
        cache = state_cache.get_cache()
        plugins = [facts.GpuModelFilter(), capacity.GpuPackingWeigher()]
        self.assertTrue(cache.ensure_started(conf))
        del plugins[0]
        gc.collect()
        self.assertTrue(cache.listener.running)
        del plugins[0]
        gc.collect()
        self.assertFalse(cache.listener.running)

    def test_explicit_start_is_stopped_explicitly(self):
        from gpu_nova_ext.scheduler.filters import facts
        conf = self._conf(transport_url='fake:/')
        cache = state_cache.get_cache()
        plugin = facts.GpuModelFilter()
        cache.start(conf)
        del plugin
        gc.collect()
        self.assertTrue(cache.listener.running)
        cache.stop()
        self.assertFalse(cache.listener.running)


class TestSwappedMessages(CacheTestCase):

    def test_metrics_before_their_facts_are_applied_with_them(self):
        # the RPC server's workers may hand over an agent's first metrics
        # before its facts
        facts, metrics = agent_payload.Publisher().messages(
            self._payload('a', utilization=40.0))
        self.assertFalse(self.cache.update(metrics))
        self.assertIsNone(self.cache.host_record('a'))
        self.assertTrue(self.cache.update(facts))
        self.assertEqual((0.4, 0.4), self.cache.host_record('a').utilization)

    def test_facts_are_built_per_changed_gpu(self):
        import json

        def wire(message):       # decoded from JSON, as the RPC layer does
            return json.loads(json.dumps(message))

        pub = agent_payload.Publisher()
        state = self._payload('a')
        for message in pub.messages(state):
            self.assertTrue(self.cache.update(wire(message)))
        held = self.cache.host_record('a').facts
        # one GPU's facts change (a vGPU was created)
        state['gpus'][1]['vgpu_types'][0]['available'] = 7
        facts, _metrics = pub.messages(state)
        self.assertEqual('facts', facts['kind'])
        self.assertTrue(self.cache.update(wire(facts)))
        new = self.cache._facts['a']
        self.assertIs(held.gpus[0], new.gpus[0])
        self.assertIsNot(held.gpus[1], new.gpus[1])
        self.assertEqual(7.0 / 8, new.gpus[1].capacity)
        # a changed GPU is validated: refused, the held facts stay
        state['gpus'][1]['memory_mib'] = 10 ** 400
        bad, _metrics = pub.messages(state)
        self.assertFalse(self.cache.update(wire(bad)))
        self.assertIs(new, self.cache._facts['a'])
        self.assertEqual(1, len(self.warnings('data.gpus[1].memory_mib')))
