"""The scheduler-side GPU state cache."""
import logging
import os
import threading
import time

import fixtures
from oslo_config import cfg
from oslo_config import fixture as config_fixture
import testtools

from gpu_nova_ext import conf as gconf
from gpu_nova_ext.state import cache as state_cache
from gpu_nova_ext.tests.unit.scheduler import nova_objects as no


class Clock:
    def __init__(self, now=1000.0):
        self.now = now

    def __call__(self):
        return self.now


class TestCache(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.conf = cfg.ConfigOpts()
        gconf.register_nova_opts(self.conf)
        self.conf([], project='test')
        # OptGroup objects share their options between ConfigOpts: the
        # fixture undoes the overrides
        self.useFixture(config_fixture.Config(self.conf))
        self.clock = Clock()
        self.cache = state_cache.GpuStateCache(self.conf, clock=self.clock)
        self.log = self.useFixture(fixtures.FakeLogger(
            name='gpu_nova_ext', level=logging.DEBUG))

    def _payload(self, host, generated_at=100.0, **gpu_kwargs):
        return no.payload(host, [no.gpu_state(host, i, **gpu_kwargs)
                                 for i in range(2)],
                          generated_at=generated_at)

    def test_update_get_hosts(self):
        self.assertTrue(self.cache.update(self._payload('b')))
        self.assertTrue(self.cache.update(self._payload('a')))
        self.assertEqual(['a', 'b'], self.cache.hosts())
        self.assertEqual('a', self.cache.get('a')['host'])
        self.assertIsNone(self.cache.get('c'))
        # by root provider UUID too
        self.assertEqual('a', self.cache.get(no.rp_uuid('a'))['host'])

    def test_staleness_with_injected_clock(self):
        self.conf.set_override('state_ttl', 30, 'gpu_scheduler')
        self.cache.configure(self.conf)
        self.cache.update(self._payload('a'))
        self.clock.now += 30
        self.assertIsNotNone(self.cache.get('a'))
        self.clock.now += 0.5
        self.assertIsNone(self.cache.get('a'))
        self.assertEqual([], self.cache.hosts())
        self.assertIsNone(self.cache.gpu_for_provider(
            no.rp_uuid('a', no.pci(0))))
        # a new payload makes it live again
        self.assertTrue(self.cache.update(self._payload('a', 101.0)))
        self.assertEqual(['a'], self.cache.hosts())

    def test_older_generated_at_is_ignored(self):
        self.assertTrue(self.cache.update(self._payload('a', 200.0,
                                                        utilization=50)))
        self.assertFalse(self.cache.update(self._payload('a', 150.0,
                                                         utilization=5)))
        self.assertEqual(50, self.cache.get('a')['gpus'][0]['metrics'][
            'utilization_pct'])
        self.assertTrue(self.cache.update(self._payload('a', 250.0,
                                                        utilization=5)))
        self.assertEqual(5, self.cache.get('a')['gpus'][0]['metrics'][
            'utilization_pct'])

    def test_rejected_payload_leaves_other_hosts_intact(self):
        self.cache.update(self._payload('a'))
        self.cache.update(self._payload('b'))
        bad = self._payload('a', 300.0)
        bad['gpus'][0]['health']['state'] = 'on fire'
        self.assertFalse(self.cache.update(bad))
        self.assertFalse(self.cache.update('garbage'))
        self.assertEqual(['a', 'b'], self.cache.hosts())
        self.assertEqual(100.0, self.cache.get('a')['generated_at'])
        lines = [line for line in self.log.output.splitlines()
                 if 'Rejected GPU state payload' in line]
        self.assertEqual(2, len(lines))
        self.assertIn('from a', lines[0])

    def test_size_limits_from_conf(self):
        self.conf.set_override('max_gpus_per_host', 1, 'gpu_scheduler')
        self.cache.configure(self.conf)
        self.assertFalse(self.cache.update(self._payload('a')))
        self.assertIn('max_gpus_per_host', self.log.output)

    def test_precomputed_lookups(self):
        payload = no.payload('a', [
            no.gpu_state('a', 0, available=2, max_instances=8,
                         framebuffer_mib=10240),
            no.gpu_state('a', 1, mode='passthrough', memory_mib=40960),
            no.gpu_state('a', 2, mode='passthrough', assigned=True),
            no.gpu_state('a', 3, health='unhealthy')])
        self.cache.update(payload)
        record = self.cache.host_record('a')
        gpu0 = self.cache.gpu_for_provider(no.rp_uuid('a', no.pci(0)))
        self.assertEqual(10240, gpu0.effective_memory_mib)
        self.assertEqual(81920, gpu0.memory_mib)
        self.assertEqual(0.25, gpu0.free_units)
        self.assertEqual((550, 54, 15), gpu0.driver)
        self.assertEqual((8, 0), gpu0.cuda_cc)
        self.assertEqual(frozenset(['nvidia-471', 'A100D-10C']),
                         gpu0.vgpu_type_keys)
        gpu1 = record.by_provider[no.rp_uuid('a', no.pci(1))]
        self.assertEqual(40960, gpu1.effective_memory_mib)
        self.assertEqual(1.0, gpu1.free_units)
        # usable: 0.25 + 1 + 0 (assigned); the unhealthy GPU counts nothing
        self.assertEqual((1.25, 3.0), self.cache.free_capacity('a'))
        self.assertEqual(1, record.idle_gpus)
        self.assertEqual(2, record.gpus[3].health_rank)
        self.assertEqual(87 - 40, gpu0.thermal_headroom)
        self.assertAlmostEqual((300 - 70) / 300, gpu0.power_headroom)
        # health facts grouped: one group per distinct rank
        self.assertEqual({0, 2}, set(record.groups['health']))
        self.assertEqual(0, record.order['pack'][no.rp_uuid('a', no.pci(2))])

    def test_new_payload_replaces_provider_index(self):
        self.cache.update(self._payload('a'))
        old_rp = no.rp_uuid('a', no.pci(1))
        self.assertTrue(self.cache.is_gpu_provider(old_rp))
        self.cache.update(no.payload('a', [no.gpu_state('a', 0)],
                                     generated_at=200.0))
        self.assertFalse(self.cache.is_gpu_provider(old_rp))
        self.cache.remove('a')
        self.assertEqual([], self.cache.hosts())
        self.assertFalse(self.cache.is_gpu_provider(
            no.rp_uuid('a', no.pci(0))))


class TestWaitForState(testtools.TestCase):

    def test_returns_when_payloads_stop_arriving(self):
        cache = state_cache.GpuStateCache()

        def agents():
            for i in range(3):
                time.sleep(0.05)
                cache.update(no.payload('h%d' % i, [no.gpu_state('h', 0)]))

        thread = threading.Thread(target=agents)
        start = time.monotonic()
        thread.start()
        count = cache.wait_for_state(5.0, quiet=0.2)
        elapsed = time.monotonic() - start
        thread.join()
        self.assertEqual(3, count)
        self.assertLess(elapsed, 2.0)
        self.assertGreaterEqual(elapsed, 0.3)

    def test_times_out_without_payloads(self):
        cache = state_cache.GpuStateCache()
        start = time.monotonic()
        self.assertEqual(0, cache.wait_for_state(0.2))
        self.assertGreaterEqual(time.monotonic() - start, 0.2)


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
        self.assertFalse(cache.started)
        self.assertEqual(42, cache.ttl)

    def test_ensure_started_never_raises_and_logs_once(self):
        # a transport driver that does not exist: the RPC layer fails
        conf = self._conf(transport_url='nosuchdriver://')
        cache = state_cache.get_cache()
        self.assertFalse(cache.ensure_started(conf))
        self.assertFalse(cache.ensure_started(conf))
        self.assertFalse(cache.started)
        self.assertEqual(1, self.log.output.count(
            'GPU state listener could not start'))

    def test_start_stop_on_fake_transport(self):
        conf = self._conf(transport_url='fake:/')
        cache = state_cache.get_cache()
        self.assertTrue(cache.ensure_started(conf))
        self.assertTrue(cache.started)
        server = cache._server
        self.assertFalse(cache.ensure_started(conf))
        self.assertIs(server, cache._server)
        # another process (after fork) would start its own
        cache._server_pid = os.getpid() + 1
        self.assertFalse(cache.started)
        cache._server_pid = os.getpid()
        state_cache.reset_cache()
        self.assertFalse(cache.started)
        cache.stop()
