# SPDX-License-Identifier: Apache-2.0

"""The state channel in one process over a real RabbitMQ.

The real GpuStateCache (validation included) behind the real RPC server,
fed by the agent's AgentStateClient and by raw casts: 1 000 fuzzed
malformed protocol 1.1 messages among valid updates, odd RPC messages,
staleness, ordering, resend fanout.
"""
import copy
import random
import threading
import time

import testtools

from gpu_nova_ext.agent import payload as agent_payload
from gpu_nova_ext.agent import state_client
from gpu_nova_ext import messaging as bus
from gpu_nova_ext.state import cache as state_cache
from gpu_nova_ext.state import rpc
from gpu_nova_ext.tests import deadline
from gpu_nova_ext.tests.functional.state import support

VICTIMS = ('cmp-a', 'cmp-b', 'cmp-c')
FUZZ_COUNT = 1000


class CountingSink:
    """The cache behind the server, recording each ingestion's verdict."""

    def __init__(self, cache):
        self.cache = cache
        self.lock = threading.Lock()
        self.accepted = []
        self.refused = []

    def update(self, payload):
        ok = self.cache.update(payload)
        with self.lock:
            (self.accepted if ok else self.refused).append(payload)
        return ok

    @property
    def rejected(self):
        return len(self.refused)

    def seen(self):
        with self.lock:
            return len(self.accepted) + self.rejected


def view(state):
    """What the cache gives back of an agent's whole state."""
    return {k: v for k, v in state.items() if k != 'version'}


def _set(path):
    def mutate(p, value):
        target = p
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    mutate.path = path
    return mutate


def _delete(path):
    def mutate(p, _value):
        target = p
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]
    mutate.path = path
    return mutate


HUGE = 'x' * (1024 * 1024 + 1)
G = ('gpus', 0)

# (what, mutation, values): each value applied to a valid message (the
# facts or the metrics one, whichever has the key) makes it malformed.
MUTATIONS = [
    ('unknown version', _set(('version',)),
     ['2.0', '1.0', '0.9', '', None, 1.1, 1, 'v1', '1.1 ', ['1.1']]),
    ('unknown kind', _set(('kind',)), ['payload', None, 'FACTS']),
    ('wrong type', _set(('seq',)), [-1, 'one', 2 ** 63, None]),
    ('wrong type', _set(('digest',)), ['', 'XYZXYZXYZ', None, 7]),
    ('missing key', _delete(('version',)), [None]),
    ('missing key', _delete(('host',)), [None]),
    ('missing key', _delete(('generated_at',)), [None]),
    ('missing key', _delete(('gpus',)), [None]),
    ('missing key', _delete(G + ('pci_address',)), [None]),
    ('missing key', _delete(G + ('provider_uuids',)), [None]),
    ('missing key', _delete(G + ('health',)), [None]),
    ('missing key', _delete(G + ('health', 'state')), [None]),
    ('wrong type', _set(('host',)), [123, None, [], {}, True, 1.5, '']),
    ('wrong type', _set(('generated_at',)),
     ['now', None, [], {}, True, '1764430000.0']),
    ('wrong type', _set(('gpus',)), [{}, 'gpus', None, 7, True]),
    ('wrong type', _set(('nodename',)), [5, [], {}]),
    ('wrong type', _set(('root_provider_uuid',)), [5, ['x']]),
    ('wrong type', _set(('agent_mode',)), ['sideways', 3, []]),
    ('wrong type', _set(G), ['gpu', 5, None, [], True]),
    ('wrong type', _set(G + ('pci_address',)), [5, None, [], '']),
    ('wrong type', _set(G + ('provider_uuids',)),
     ['abc', [1], None, {}, [None]]),
    ('wrong type', _set(G + ('vfs',)), ['0000:3b:00.1', [7]]),
    ('wrong type', _set(G + ('memory_mib',)),
     ['80GB', 1.5, True, [], {}]),
    ('wrong type', _set(G + ('numa_node',)), ['0', 0.5, False]),
    ('wrong type', _set(G + ('model',)), [7, ['A100'], {}]),
    ('wrong type', _set(G + ('vgpu_types',)), [{}, ['x'], 'nvidia-471']),
    ('wrong type', _set(G + ('vgpu_types', 0, 'id')), [None, 471, '']),
    ('wrong type', _set(G + ('vgpu_types', 0, 'available')),
     ['8', 2.5, True]),
    ('wrong type', _set(G + ('mig',)), ['yes', [], 1]),
    ('wrong type', _set(G + ('mig', 'capable')), ['yes', 1]),
    ('wrong type', _set(G + ('health',)), ['ok', None, [], 0]),
    ('wrong type', _set(G + ('health', 'state')),
     ['on fire', 'HEALTHY', None, 0, '']),
    ('wrong type', _set(G + ('health', 'reasons')), ['x', [1], {}]),
    ('wrong type', _set(G + ('metrics',)), [[], 'hot', 3]),
    ('wrong type', _set(G + ('metrics', 'temperature_c')),
     ['hot', [], True]),
    ('wrong type', _set(G + ('driver_version',)), ['abc', '550.x', 550]),
    ('wrong type', _set(G + ('cuda_cc',)), ['eight', '8', 8.0, '8.0.1']),
    ('wrong type', _set(G + ('assigned',)), ['no', 1]),
    ('negative number', _set(('generated_at',)), [-1, -1764430000.0]),
    ('negative number', _set(G + ('memory_mib',)), [-1, -81920]),
    ('negative number', _set(G + ('numa_node',)), [-2, -100]),
    ('negative number', _set(G + ('vgpu_types', 0, 'available')), [-1]),
    ('negative number', _set(G + ('vgpu_types', 0, 'max')), [-8]),
    ('negative number', _set(G + ('vgpu_types', 0, 'framebuffer_mib')),
     [-10240]),
    ('out of range', _set(G + ('metrics', 'utilization_pct')),
     [-5, 100.5, 1e9]),
    ('negative number', _set(G + ('metrics', 'memory_used_mib')), [-1]),
    ('negative number', _set(G + ('metrics', 'power_w')), [-72.4]),
    ('out of range', _set(G + ('metrics', 'temperature_c')), [-273, 5000]),
    ('not finite', _set(('generated_at',)),
     [float('nan'), float('inf')]),
    ('not finite', _set(G + ('metrics', 'power_w')), [float('inf')]),
    ('huge string', _set(('host',)), [HUGE, 'h' * 256]),
    ('huge string', _set(G + ('model',)), [HUGE, 'M' * 1000]),
    ('huge string', _set(G + ('health', 'reasons')),
     [[HUGE], ['r' * 300]]),
    ('huge string', _set(G + ('vgpu_types', 0, 'name')), ['n' * 256]),
    ('too many', _set(G + ('health', 'reasons')), [['r'] * 65]),
    ('too many', _set(G + ('provider_uuids',)), [['p'] * 257]),
]


# the keys of a GPU that a metrics message carries
_DYNAMIC = ('health', 'metrics', 'assigned')


def _messages(state):
    """The agent's facts and metrics messages of a whole state."""
    return agent_payload.Publisher().messages(state)


def fuzz_payloads(count: int, seed: int = 6):
    """``count`` malformed messages, each claiming a victim host's name."""
    rng = random.Random(seed)
    flat = [(what, mutate, value) for what, mutate, values in MUTATIONS
            for value in values]
    not_dicts = [[], 'state', 42, None, True, 3.5, [{'host': 'cmp-a'}]]
    huge_left = 8   # payloads over 1 MiB cost broker time: a few suffice
    out = []
    while len(out) < count:
        roll = rng.random()
        base = support.payload(rng.choice(VICTIMS), gpus=rng.choice([1, 8]),
                               generated_at=time.time() + 1)
        if roll < 0.05:
            out.append(('not an object', rng.choice(not_dicts)))
            continue
        if roll < 0.08:
            base['gpus'] = [support.gpu(i) for i in range(65)]
            message = _messages(base)[rng.randrange(2)]
            out.append(('more than max_gpus_per_host GPUs',
                        dict(message, fuzz='65 GPUs')))
            continue
        if roll < 0.10:
            base['gpus'].append(copy.deepcopy(base['gpus'][0]))
            out.append(('duplicate pci_address',
                        dict(_messages(base)[0], fuzz='duplicate')))
            continue
        what, mutate, value = flat[rng.randrange(len(flat))]
        if value is HUGE or value == [HUGE]:
            if not huge_left:
                continue
            huge_left -= 1
        facts, metrics = _messages(base)
        path = mutate.path
        if len(path) > 2 and path[2] in _DYNAMIC:
            base = metrics
        elif path[0] in facts and path[0] not in metrics or len(path) > 2:
            base = facts
        else:
            base = (facts, metrics)[rng.randrange(2)]
        mutate(base, copy.deepcopy(value))
        # Unknown fields are allowed: tag it to name it in a failure.
        if isinstance(base, dict):
            base['fuzz'] = '%s: %r' % (what, value)[:200]
        out.append((what, base))
    return out


class TestStateChannel(testtools.TestCase):
    """Real cache, real server, real casts, one process."""

    def setUp(self):
        super().setUp()
        # the shared hold first: the broker restart test (another stestr
        # worker) may have the broker stopped until it lets go
        self.useFixture(support.BrokerInUse())
        support.require_broker(self)
        self.topics = support.topics()

    def _conf(self, **gpu_scheduler):
        return support.make_conf(**self.topics, **gpu_scheduler)

    def _server(self, conf, sink):
        server = rpc.SchedulerStateServer(conf, sink)
        server.start()
        self.addCleanup(server.stop)
        self.assertTrue(server.running)
        return server

    def _agent(self, conf, on_resend=lambda: None):
        agent = state_client.AgentStateClient(conf, on_resend)
        agent.start()
        self.addCleanup(agent.stop)
        return agent

    def _raw(self, conf):
        """A client that casts any message, as a broken agent could."""
        transport = bus.get_transport(conf)
        self.addCleanup(transport.cleanup)
        return rpc.messaging.get_rpc_client(
            transport, rpc.messaging.Target(
                topic=self.topics['state_topic'], version='1.1'))

    def test_fuzzed_payloads_rejected_valid_updates_flow(self):
        conf = self._conf()
        cache = state_cache.GpuStateCache(conf)
        sink = CountingSink(cache)
        self._server(conf, sink)
        agent = self._agent(conf)
        raw = self._raw(conf)
        fuzz = fuzz_payloads(FUZZ_COUNT)
        self.assertEqual(FUZZ_COUNT, len(fuzz))
        latest = {}
        valid_sent = 0
        for i, (_what, bad) in enumerate(fuzz):
            if i % 25 == 0:
                # Valid updates keep flowing among the garbage: new
                # facts (new provider UUIDs) and metrics each time
                for host in VICTIMS:
                    good = support.payload(host)
                    latest[host] = good
                    self.assertTrue(agent.cast_state(good))
                    valid_sent += 2
            self.assertTrue(bus.cast(raw, 'update_gpu_state', state=bad))
        for host in VICTIMS:
            good = support.payload(host)
            latest[host] = good
            self.assertTrue(agent.cast_state(good))
            valid_sent += 2
        total = FUZZ_COUNT + valid_sent
        deadline.wait_for(lambda: sink.seen() >= total)
        holes = [p.get('fuzz') for p in sink.accepted
                 if isinstance(p, dict) and 'fuzz' in p]
        self.assertEqual([], holes, 'malformed messages were accepted')
        self.assertEqual(total, sink.seen())
        fuzz_refused = [p for p in sink.refused
                        if not isinstance(p, dict) or 'fuzz' in p]
        self.assertEqual(FUZZ_COUNT, len(fuzz_refused))
        # Only the victims have state, each its last valid one.
        self.assertEqual(sorted(VICTIMS), cache.hosts())
        for host in VICTIMS:
            self.assertTrue(deadline.wait_for(
                lambda: view(latest[host]) == cache.get(host)))

    def test_odd_rpc_messages_do_not_break_the_server(self):
        conf = self._conf()
        cache = state_cache.GpuStateCache(conf)
        sink = CountingSink(cache)
        self._server(conf, sink)
        agent = self._agent(conf)
        raw = self._raw(conf).prepare(fanout=True)
        raw.cast({}, 'update_gpu_state')                       # no state
        raw.cast({}, 'update_gpu_state', state=None, extra=1)  # 1.x extra
        raw.cast({}, 'no_such_method', state={})
        raw.prepare(version='2.0').cast({}, 'update_gpu_state',
                                        state=support.payload('cmp-x'))
        good = support.payload('cmp-a')
        self.assertTrue(agent.cast_state(good))
        self.assertTrue(deadline.wait_for(lambda: cache.get('cmp-a')))
        self.assertEqual(view(good), cache.get('cmp-a'))
        # The two update_gpu_state casts without state were rejected; the
        # unknown method and the 2.0 message never reached the cache.
        self.assertEqual([None, None],
                         [p for p in sink.refused if p is None])
        self.assertEqual(sink.refused, [p for p in sink.refused
                                        if p is None or p['host'] == 'cmp-a'])
        self.assertIsNone(cache.get('cmp-x'))

    def test_stale_state_counts_as_missing(self):
        conf = self._conf(state_ttl=1.0)
        cache = state_cache.GpuStateCache(conf)
        self._server(conf, cache)
        agent = self._agent(conf)
        # the cache's clock (receive time + state_ttl) is time.monotonic:
        # the state cannot be gone before state_ttl after the cast
        cast = time.monotonic()
        self.assertTrue(agent.cast_state(support.payload('cmp-a')))
        self.assertEqual(['cmp-a'], deadline.wait_for(lambda: cache.hosts()))
        gone = deadline.wait_for(lambda: cache.get('cmp-a') is None)
        self.assertTrue(gone, 'state outlived state_ttl')
        self.assertGreaterEqual(time.monotonic() - cast, 1.0)
        self.assertEqual([], cache.hosts())
        # A new cast makes the host live again.
        self.assertTrue(agent.cast_state(support.payload('cmp-a')))
        self.assertTrue(deadline.wait_for(lambda: cache.hosts()))

    def test_older_sequence_never_replaces_newer(self):
        conf = self._conf()
        cache = state_cache.GpuStateCache(conf)
        sink = CountingSink(cache)
        self._server(conf, sink)
        raw = self._raw(conf)
        publisher = agent_payload.Publisher()
        state = support.payload('cmp-a')
        facts, older = publisher.messages(state)
        newer_state = dict(state, generated_at=state['generated_at'] - 10)
        newer_state['gpus'] = copy.deepcopy(state['gpus'])
        newer_state['gpus'][0]['health'] = {'state': 'unhealthy',
                                            'reasons': ['xid 79']}
        (newer,) = publisher.messages(newer_state)
        self.assertTrue(bus.cast(raw, 'update_gpu_state', state=facts))
        self.assertTrue(deadline.wait_for(lambda: sink.seen() == 1))
        # the agent's sequence orders, not its clock
        self.assertTrue(bus.cast(raw, 'update_gpu_state', state=newer))
        self.assertTrue(deadline.wait_for(lambda: sink.seen() == 2))
        self.assertTrue(bus.cast(raw, 'update_gpu_state', state=older))
        self.assertTrue(deadline.wait_for(lambda: sink.seen() == 3))
        self.assertEqual(view(newer_state), cache.get('cmp-a'))

    def test_resend_request_reaches_every_agent(self):
        conf = self._conf()
        asked = [threading.Event() for _ in range(3)]
        for event in asked:
            self._agent(conf, event.set)
        cache = state_cache.GpuStateCache(conf)
        self._server(conf, cache)
        for event in asked:
            self.assertTrue(event.wait(deadline.WAIT_S))


class TestProtocol11(testtools.TestCase):
    """Facts once, metrics every time, and a resend for unknown facts."""

    def setUp(self):
        super().setUp()
        self.useFixture(support.BrokerInUse())
        support.require_broker(self)
        self.topics = support.topics()

    def _scheduler(self):
        conf = support.make_conf(**self.topics)
        cache = state_cache.GpuStateCache(conf)
        server = rpc.SchedulerStateServer(conf, cache)
        # as the cache's listener wires it in nova-scheduler
        cache.ask_resend = server.ask_resend
        server.start()
        self.addCleanup(server.stop)
        return cache

    def test_scheduler_without_the_facts_asks_that_host(self):
        first = self._scheduler()
        asked = []
        conf = support.make_conf(host='cmp-a', **self.topics)
        agent = state_client.AgentStateClient(
            conf, lambda: asked.append(1),
            publisher=agent_payload.Publisher())
        agent.start()
        self.addCleanup(agent.stop)
        state = support.payload('cmp-a')
        self.assertTrue(agent.cast_state(state))
        self.assertTrue(deadline.wait_for(lambda: first.get('cmp-a')))
        # a second scheduler starts: its resend request reaches the agent,
        # which (here) does not answer, so the facts are not sent again
        second = self._scheduler()
        self.assertTrue(deadline.wait_for(lambda: asked))
        agent.take_resend()
        state['generated_at'] = time.time()
        state['gpus'][0]['metrics']['utilization_pct'] = 77.0
        self.assertTrue(agent.cast_state(state))
        self.assertTrue(deadline.wait_for(
            lambda: first.get('cmp-a')['gpus'][0]['metrics'][
                'utilization_pct'] == 77.0))
        # the second got metrics for facts it does not hold: it asked
        # cmp-a's agent alone (resend_gpu_state(host='cmp-a'))
        self.assertTrue(deadline.wait_for(lambda: len(asked) >= 2),
                        asked)
        self.assertIsNone(second.get('cmp-a'))
        state['generated_at'] = time.time()
        self.assertTrue(agent.cast_state(state))
        got = deadline.wait_for(lambda: second.get('cmp-a'))
        self.assertEqual(77.0, got['gpus'][0]['metrics']['utilization_pct'])
        # an agent of another host is not asked
        other = state_client.AgentStateClient(
            support.make_conf(host='cmp-b', **self.topics),
            lambda: asked.append('b'))
        other.start()
        self.addCleanup(other.stop)
        second.remove('cmp-a')
        second._asked.clear()
        self.assertTrue(agent.cast_state(dict(state,
                                              generated_at=time.time())))
        self.assertTrue(deadline.wait_for(lambda: len(asked) >= 3),
                        asked)
        self.assertNotIn('b', asked)
