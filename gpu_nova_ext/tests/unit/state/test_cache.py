"""The scheduler-side GPU state cache."""
import copy
import dataclasses
import json
import logging
import os
import random
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
        self.assertEqual(0, gpu0.index)
        self.assertEqual(87 - 40, record.thermal_headroom[gpu0.index])
        self.assertAlmostEqual((300 - 70) / 300,
                               record.power_headroom[gpu0.index])
        self.assertAlmostEqual(0.1, record.utilization[gpu0.index])
        # health facts grouped: one group per distinct rank
        self.assertEqual({0, 2}, set(record.groups['health']))
        self.assertEqual(
            0, record.order('pack')[0][no.rp_uuid('a', no.pci(2))])

    def test_payloads_of_one_shape_share_records_and_verdicts(self):
        self.assertTrue(self.cache.update(self._payload('a', 100.0)))
        first = self.cache.host_record('a')
        first.verdicts['some filter'] = True
        payload = self._payload('a', 101.0, utilization=55.0)
        self.assertTrue(self.cache.update(payload))
        second = self.cache.host_record('a')
        self.assertTrue(first.replaced)
        # only the metrics changed: the GPU records, lookups and filter
        # verdicts are the first payload's; the metrics are the new ones
        self.assertIs(first.gpus, second.gpus)
        self.assertIs(first.by_provider, second.by_provider)
        self.assertIs(first.verdicts, second.verdicts)
        self.assertEqual((0.55, 0.55), second.utilization)
        self.assertEqual((0.1, 0.1), first.utilization)
        # the payload is not kept (its containers would burden the
        # garbage collector), but rebuilt: equal, and a copy
        got = self.cache.get('a')
        self.assertEqual(payload, got)
        self.assertIsNot(payload, got)
        self.assertIsNone(second.kept)
        got['gpus'][0]['metrics']['utilization_pct'] = 1.0
        self.assertEqual(payload, self.cache.get('a'))
        rp = no.rp_uuid('a', no.pci(0))
        self.assertIs(second.by_provider[rp], self.cache.gpu_for_provider(rp))
        # the coolest order follows each record's own metrics
        hot = self._payload('a', 102.0)
        hot['gpus'][0]['metrics']['temperature_c'] = 80
        self.assertTrue(self.cache.update(hot))
        third = self.cache.host_record('a')
        self.assertIs(first.gpus, third.gpus)
        self.assertEqual(no.rp_uuid('a', no.pci(1)),
                         third.order('coolest')[1][0])
        self.assertEqual(rp, second.order('coolest')[1][0])
        # another health: another shape, other records, no verdicts yet
        self.assertTrue(self.cache.update(self._payload('a', 103.0,
                                                        health='degraded')))
        fourth = self.cache.host_record('a')
        self.assertIsNot(first.gpus, fourth.gpus)
        self.assertEqual({}, fourth.verdicts)
        self.assertIs(fourth.by_provider[rp],
                      self.cache.gpu_for_provider(rp))
        self.assertEqual(1, fourth.gpus[0].health_rank)

    def test_host_state_follows_new_payloads(self):
        host_state = no.host_state('a')
        oldest = self.cache.oldest_live()
        self.assertIsNone(self.cache.lookup(host_state, oldest))
        self.assertTrue(self.cache.update(self._payload('a', 100.0)))
        first = self.cache.lookup(host_state, oldest)
        self.assertEqual(100.0, first.generated_at)
        self.assertTrue(self.cache.update(self._payload('a', 101.0)))
        # the HostState holds the host's slot: no new resolution, and the
        # replaced record no longer holds its payload
        self.assertEqual(101.0,
                         self.cache.lookup(host_state, oldest).generated_at)
        self.assertIsNone(first.payload())
        self.assertEqual(101.0, self.cache.get('a')['generated_at'])
        self.cache.remove('a')
        self.assertIsNone(self.cache.lookup(host_state, oldest))
        self.assertTrue(self.cache.update(self._payload('a', 102.0)))
        self.assertEqual(102.0,
                         self.cache.lookup(host_state, oldest).generated_at)
        # stale state counts as missing
        self.clock.now += self.cache.ttl + 1
        self.assertIsNone(self.cache.lookup(host_state,
                                            self.cache.oldest_live()))

    def test_get_follows_a_record_replaced_meanwhile(self):
        self.assertTrue(self.cache.update(self._payload('a', 100.0)))
        first = self.cache.host_record('a')
        self.assertTrue(self.cache.update(self._payload('a', 101.0)))
        self.assertIsNone(first.payload())
        # get() looked the host up just before the newer payload came
        real = self.cache.host_record
        looked_up = [first]
        self.useFixture(fixtures.MockPatchObject(
            self.cache, 'host_record',
            side_effect=lambda name, now=None: (
                looked_up.pop() if looked_up else real(name, now))))
        self.assertEqual(101.0, self.cache.get('a')['generated_at'])
        self.assertEqual([], looked_up)

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

    def test_far_future_generated_at_is_rejected(self):
        # it would keep every later (older) payload of the host out
        wall = Clock(1764430000.0)
        self.conf.set_override('state_ttl', 30, 'gpu_scheduler')
        cache = state_cache.GpuStateCache(self.conf, clock=self.clock,
                                          wall_clock=wall)
        self.assertFalse(cache.update(self._payload('a', wall.now + 31)))
        self.assertIsNone(cache.get('a'))
        lines = [line for line in self.log.output.splitlines()
                 if 'ahead of this scheduler' in line]
        self.assertEqual(1, len(lines))
        self.assertIn('from a', lines[0])
        self.assertIn('state_ttl (30', lines[0])
        # the next normal payload gets in; skew within state_ttl is fine
        self.assertTrue(cache.update(self._payload('a', wall.now + 1)))
        self.assertTrue(cache.update(self._payload('a', wall.now + 29)))
        wall.now += 100
        self.assertTrue(cache.update(self._payload('a', wall.now + 30)))
        self.assertEqual(1, self.log.output.count('ahead of this scheduler'))

    def _records_equal(self, expected, got):
        skip = {'received_at', 'memo', 'replaced', 'orders', 'shape',
                'verdicts', 'kept', 'top', 'metrics'}
        # kept whole or rebuilt: the same payload
        self.assertEqual(expected.payload(), got.payload())
        for field in dataclasses.fields(state_cache.HostRecord):
            if field.name in skip:
                continue
            want = getattr(expected, field.name)
            have = getattr(got, field.name)
            if field.name in ('gpus', 'passthrough_unknown'):
                self.assertEqual(len(want), len(have))
                for g1, g2 in zip(want, have):
                    self.assertEqual(dataclasses.astuple(g1),
                                     dataclasses.astuple(g2))
            elif field.name == 'by_provider':
                self.assertEqual(
                    {rp: g.pci_address for rp, g in want.items()},
                    {rp: g.pci_address for rp, g in have.items()})
                for rp, gpu in have.items():
                    self.assertIn(gpu, got.gpus)
            else:
                self.assertEqual(want, have, field.name)
        for policy in state_cache.INTRA_HOST_POLICIES:
            self.assertEqual(expected.order(policy), got.order(policy))
        self.assertRaises(KeyError, got.order, 'sideways')

    def test_known_shape_builds_the_same_records(self):
        # payloads whose GPUs changed only their metrics reuse the host's
        # shape: their records must be what a full build gives
        rng = random.Random(3)
        gpus = [no.gpu_state('a', 0, available=2, max_instances=8),
                no.gpu_state('a', 1, mode='passthrough'),
                no.gpu_state('a', 2, mode='passthrough', assigned=False),
                no.gpu_state('a', 3, health='degraded'),
                no.gpu_state('a', 4, health='unhealthy')]
        calls = []
        real_check = state_cache.schema.check
        self.useFixture(fixtures.MonkeyPatch(
            'gpu_nova_ext.state.payload.check',
            lambda *a: calls.append(1) or real_check(*a)))
        for i in range(30):
            payload = copy.deepcopy(no.payload('a', gpus,
                                               generated_at=100.0 + i))
            for gpu in payload['gpus']:
                metrics = gpu['metrics']
                for name in ('utilization_pct', 'temperature_c',
                             'power_w', 'power_limit_w',
                             'slowdown_temperature_c'):
                    metrics[name] = rng.choice(
                        [None, 0, rng.uniform(0, 100),
                         rng.randrange(0, 100)])
                if rng.random() < 0.1:
                    gpu['metrics'] = None
                elif rng.random() < 0.1:
                    del gpu['metrics']
            self.assertTrue(self.cache.update(payload))
            self._records_equal(
                state_cache.build_host_record(copy.deepcopy(payload), 0.0),
                self.cache.host_record('a'))
            self.assertEqual(payload, self.cache.get('a'))
        # one full check: the first payload; the rest took the quick path
        self.assertEqual(1, len(calls))

    def test_known_shape_keeps_every_check(self):
        self.assertTrue(self.cache.update(self._payload('a', 100.0)))
        at = [100.0]

        def bad(mutate):
            at[0] += 1
            payload = self._payload('a', at[0])
            mutate(payload)
            return payload

        gpu = lambda p: p['gpus'][0]     # noqa: E731
        for mutate in (
                lambda p: gpu(p)['mig'].update(capable=1),
                lambda p: gpu(p).update(numa_node=False),
                lambda p: gpu(p).update(memory_mib=81920.0),
                lambda p: gpu(p)['vgpu_types'][0].update(available=True),
                lambda p: gpu(p).update(assigned=0),
                lambda p: gpu(p)['metrics'].update(temperature_c=True),
                lambda p: gpu(p)['metrics'].update(utilization_pct=100.5),
                lambda p: gpu(p)['metrics'].update(power_w=float('inf')),
                lambda p: gpu(p)['metrics'].update(power_w=float('nan')),
                lambda p: gpu(p)['metrics'].update(x='1'),
                lambda p: gpu(p).update(metrics=[]),
                lambda p: p.update(generated_at=True),
                lambda p: p.update(version='1.1'),
                lambda p: p.update(host='a' * 256),
                lambda p: p.update(agent_mode='both'),
                lambda p: p['gpus'].append(copy.deepcopy(gpu(p)))):
            self.assertFalse(self.cache.update(bad(mutate)))
        self.assertEqual(100.0, self.cache.get('a')['generated_at'])
        # the limits apply to known shapes too
        payload = self._payload('a', 200.0)
        size = len(json.dumps(payload, separators=(',', ':')))
        self.conf.set_override('max_payload_bytes', size - 1,
                               'gpu_scheduler')
        self.cache.configure(self.conf)
        self.assertFalse(self.cache.update(payload))
        self.conf.set_override('max_payload_bytes', size, 'gpu_scheduler')
        self.cache.configure(self.conf)
        self.assertTrue(self.cache.update(payload))
        self.conf.set_override('max_gpus_per_host', 1, 'gpu_scheduler')
        self.cache.configure(self.conf)
        self.assertFalse(self.cache.update(self._payload('a', 300.0)))
        self.assertEqual(200.0, self.cache.get('a')['generated_at'])


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
