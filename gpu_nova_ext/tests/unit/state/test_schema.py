# SPDX-License-Identifier: Apache-2.0

"""The state wire format (design doc: State protocol)."""
import copy
import json

import testtools

from gpu_nova_ext.agent import payload as agent_payload
from gpu_nova_ext.state import cache
from gpu_nova_ext.state import schema
from gpu_nova_ext.tests.unit.scheduler import nova_objects as no


def _good():
    return no.payload('cmp-1', [no.gpu_state('cmp-1', i) for i in range(2)])


def _messages():
    """The agent's facts and metrics messages of :func:`_good`."""
    return agent_payload.Publisher().messages(_good())


def _set(message, path, value):
    if isinstance(path, str):
        path = (path,)
    target = message
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value


# (path, value) that make a valid message invalid, in either kind
COMMON = [
    ('version', '1.0'), ('version', 1.1), ('host', ''),
    ('host', 'h' * 256), ('generated_at', True),
    ('generated_at', float('inf')), ('generated_at', -0.5),
    ('generated_at', 10 ** 400), ('generated_at', float('nan')),
    ('seq', -1), ('seq', 2 ** 63), ('seq', True), ('digest', 'ABCDEF0123'),
    ('digest', 'abc'), ('gpus', {}), ('extension', {'nested': 'values'}),
    ('extension', 0.5),
]
# ... of the facts message
FACTS = COMMON + [
    ('nodename', 5), ('agent_mode', 'both'),
    (('gpus', 0, 'numa_node'), False), (('gpus', 0, 'numa_node'), -2),
    (('gpus', 0, 'memory_mib'), 10 ** 400),
    (('gpus', 0, 'future_field'), {'x': [1, 2]}),
    (('gpus', 0, 'mig', 'capable'), 1),
    (('gpus', 0, 'vgpu_types', 0, 'available'), True),
    (('gpus', 0, 'vgpu_types', 0, 'max'), -1),
    (('gpus', 0, 'vgpu_types', 0, 'id'), ''),
    (('gpus', 0, 'provider_uuids'), ['p'] * 257),
    (('gpus', 0, 'provider_uuids'), ['']),
    (('gpus', 0, 'vfs'), [7]),
    (('gpus', 0, 'driver_version'), '550.x'),
    (('gpus', 0, 'cuda_cc'), '8.0.1'),
    (('gpus', 0, 'power_profile'), 'turbo'),
    (('gpus', 0, 'power_profile'), '1' * 300 + 'W'),
    (('gpus', 1, 'pci_address'), no.pci(0)),
    (('gpus', 0, 'reserved_for'), ''),
    (('gpus', 0, 'reserved_for'), 'p' * 65),
    (('gpus', 0, 'reserved_for'), 'two words'),
    (('gpus', 0, 'reserved_for'), 7),
    (('gpus', 0, 'health'), {'state': 'healthy'}),
]
# ... of the metrics message
METRICS = COMMON + [
    (('gpus', 0, 'assigned'), 0),
    (('gpus', 0, 'health', 'state'), 'HEALTHY'),
    (('gpus', 0, 'health', 'reasons'), ['r' * 256]),
    (('gpus', 0, 'health', 'reasons'), ['r'] * 65),
    (('gpus', 0, 'health', 'since'), 1),
    (('gpus', 0, 'metrics', 'utilization_pct'), 100.5),
    (('gpus', 0, 'metrics', 'temperature_c'), True),
    (('gpus', 0, 'metrics', 'temperature_c'), float('nan')),
    (('gpus', 0, 'metrics', 'power_w'), float('inf')),
    (('gpus', 0, 'metrics', 'power_limit_w'), 10 ** 400),
    (('gpus', 0, 'metrics', 'fan_speed_pct'), 10),
    (('gpus', 0, 'metrics', 'power_w'), '72'),
    (('gpus', 0, 'metrics'), [1]),
    (('gpus', 0, 'vendor'), 'nvidia'),
]


class TestProblem(testtools.TestCase):

    def test_the_agent_messages_are_valid(self):
        facts, metrics = _messages()
        self.assertIsNone(schema.problem(facts, 64))
        self.assertIsNone(schema.problem(metrics, 64))
        # and as the RPC layer decodes them
        self.assertIsNone(schema.problem(json.loads(json.dumps(facts)), 64))

    def test_nulls_and_later_fields(self):
        facts, metrics = _messages()
        for gpu in facts['gpus']:
            for key in ('vendor', 'model', 'memory_mib', 'uuid', 'mode',
                        'driver_version', 'cuda_cc', 'numa_node', 'vfs',
                        'vgpu_types', 'mig', 'offered_vgpu_type',
                        'reserved_for', 'power_profile'):
                gpu[key] = None
        facts['agent_mode'] = facts['root_provider_uuid'] = None
        facts['later_field'] = 'a scalar'     # a later 1.x agent's
        self.assertIsNone(schema.problem(facts, 64))
        facts['gpus'][0]['reserved_for'] = '6f70656e737461636b20342065766572'
        facts['gpus'][1]['power_profile'] = '72.5W'
        self.assertIsNone(schema.problem(facts, 64))
        metrics['gpus'][0]['metrics'] = None
        metrics['gpus'][1]['metrics']['power_w'] = None
        metrics['gpus'][1]['assigned'] = None
        self.assertIsNone(schema.problem(metrics, 64))

    def test_every_mutation_is_refused(self):
        for index, mutations in ((0, FACTS), (1, METRICS)):
            for path, value in mutations:
                message = _messages()[index]
                _set(message, path, value)
                self.assertIsNotNone(schema.problem(message, 64),
                                     (message['kind'], path, value))

    def test_reasons_name_the_field(self):
        facts, metrics = _messages()
        metrics['gpus'][0]['metrics']['power_limit_w'] = 10 ** 400
        self.assertIn('gpus[0].metrics.power_limit_w',
                      schema.problem(metrics, 64))
        self.assertEqual('data.gpus: fails maxItems 1',
                         schema.problem(facts, 1))
        metrics['gpus'][0]['metrics']['power_limit_w'] = 300
        metrics['gpus'][1]['health']['state'] = 'sick'
        self.assertIn('data.gpus[1].health.state: "sick" is not one of',
                      schema.problem(metrics, 64))
        self.assertIn("state protocol '2.0'",
                      schema.problem(dict(facts, version='2.0'), 64))
        self.assertIn("kind 'stats'",
                      schema.problem(dict(facts, kind='stats'), 64))
        self.assertIn('must be an object', schema.problem(['x'], 64))
        facts['gpus'][1]['pci_address'] = no.pci(0)
        self.assertIn('pci_address twice: %s' % no.pci(0),
                      schema.problem(facts, 64))

    def test_constants_come_from_the_schema(self):
        self.assertEqual(('healthy', 'degraded', 'unhealthy'),
                         schema.HEALTH_STATES)
        self.assertIn('utilization_pct', schema.SCHEDULER_METRICS)
        self.assertIn('balanced', schema.POWER_PROFILES)


class TestCacheNeverRaises(testtools.TestCase):

    def test_hostile_messages_change_nothing(self):
        states = cache.GpuStateCache(clock=lambda: 1000.0)
        states.ask_resend = lambda host: None
        facts, metrics = _messages()
        self.assertTrue(states.update(facts))
        self.assertTrue(states.update(metrics))
        before = states.get('cmp-1')
        hostile = [None, [], 'x', {'version': '1.1', 'kind': 'metrics'},
                   {'version': '1.1', 'kind': 'facts', 'host': 'cmp-1'},
                   _good()]
        for good, mutations in ((facts, FACTS), (metrics, METRICS)):
            for path, value in mutations:
                message = copy.deepcopy(good)
                _set(message, path, value)
                hostile.append(message)
        for message in hostile:
            self.assertFalse(states.update(message), message)
            self.assertEqual(before, states.get('cmp-1'))
