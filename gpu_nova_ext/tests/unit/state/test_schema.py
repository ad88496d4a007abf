# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""The state wire format (design doc: State protocol)."""
import copy
import random

import testtools

from gpu_nova_ext.agent import payload as agent_payload
from gpu_nova_ext.state import cache
from gpu_nova_ext.state import schema
from gpu_nova_ext.tests.unit.scheduler import nova_objects as no


def _good():
    return no.payload('cmp-1', [no.gpu_state('cmp-1', i) for i in range(2)])


def _set(message, path, value):
    if isinstance(path, str):
        path = (path,)
    target = message
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value


# (path, value) that make a valid 1.0 payload invalid
MUTATIONS = [
    ('version', '1.0 '), ('version', 1.0), ('host', ''),
    ('host', 'h' * 256), ('generated_at', True),
    ('generated_at', float('inf')), ('generated_at', -0.5),
    ('generated_at', 10 ** 400),
    ('nodename', 5), ('agent_mode', 'both'), ('gpus', {}),
    ('extension', {'nested': 'values'}),
    (('gpus', 0, 'numa_node'), False), (('gpus', 0, 'numa_node'), -2),
    (('gpus', 0, 'memory_mib'), 10 ** 400),
    (('gpus', 0, 'future_field'), {'x': [1, 2]}),
    (('gpus', 0, 'mig', 'capable'), 1),
    (('gpus', 0, 'assigned'), 0),
    (('gpus', 0, 'vgpu_types', 0, 'available'), True),
    (('gpus', 0, 'vgpu_types', 0, 'max'), -1),
    (('gpus', 0, 'vgpu_types', 0, 'id'), ''),
    (('gpus', 0, 'provider_uuids'), ['p'] * 257),
    (('gpus', 0, 'provider_uuids'), ['']),
    (('gpus', 0, 'vfs'), [7]),
    (('gpus', 0, 'driver_version'), '550.x'),
    (('gpus', 0, 'cuda_cc'), '8.0.1'),
    (('gpus', 0, 'health', 'state'), 'HEALTHY'),
    (('gpus', 0, 'health', 'reasons'), ['r' * 256]),
    (('gpus', 0, 'health', 'since'), 1),
    (('gpus', 0, 'metrics', 'utilization_pct'), 100.5),
    (('gpus', 0, 'metrics', 'temperature_c'), True),
    (('gpus', 0, 'metrics', 'temperature_c'), float('nan')),
    (('gpus', 0, 'metrics', 'power_w'), float('inf')),
    (('gpus', 0, 'metrics', 'power_limit_w'), 10 ** 400),
    (('gpus', 0, 'metrics', 'fan_speed_pct'), 10 ** 400),
    (('gpus', 0, 'metrics', 'power_w'), '72'),
    (('gpus', 0, 'metrics'), [1]),
    (('gpus', 1, 'pci_address'), no.pci(0)),
    (('gpus', 1, 'metrics', 'odd'), {1, 2}),
    (('gpus', 0, 'reserved_for'), ''),
    (('gpus', 0, 'reserved_for'), 'p' * 65),
    (('gpus', 0, 'reserved_for'), 'two words'),
    (('gpus', 0, 'reserved_for'), 7),
]


class TestProblem(testtools.TestCase):

    def test_good_payloads(self):
        self.assertIsNone(schema.problem(_good(), 64))
        p = _good()
        for gpu in p['gpus']:
            for key in ('vendor', 'model', 'memory_mib', 'uuid', 'mode',
                        'driver_version', 'cuda_cc', 'numa_node', 'vfs',
                        'vgpu_types', 'mig', 'assigned', 'offered_vgpu_type',
                        'metrics'):
                gpu[key] = None
        p['agent_mode'] = p['root_provider_uuid'] = p['nodename'] = None
        p['later_field'] = 'a scalar'     # a later 1.x agent's
        self.assertIsNone(schema.problem(p, 64))
        p['gpus'][0]['reserved_for'] = '6f70656e737461636b20342065766572'
        p['gpus'][1]['reserved_for'] = None
        self.assertIsNone(schema.problem(p, 64))

    def test_every_mutation_is_refused_with_its_place(self):
        for path, value in MUTATIONS:
            p = _good()
            _set(p, path, value)
            reason = schema.problem(p, 64)
            self.assertIsNotNone(reason, (path, value))

    def test_reasons_name_the_field(self):
        p = _good()
        p['gpus'][0]['metrics']['power_limit_w'] = 10 ** 400
        self.assertIn('gpus[0].metrics.power_limit_w',
                      schema.problem(p, 64))
        self.assertIn('max_gpus_per_host (1)', schema.problem(_good(), 1))
        self.assertIn("version '2.0'",
                      schema.problem(dict(_good(), version='2.0'), 64))
        self.assertIn('must be an object', schema.problem(['x'], 64))

    def test_the_agent_messages_are_valid(self):
        for message in agent_payload.Publisher().messages(_good()):
            self.assertIsNone(schema.problem(message, 64))
            if message['kind'] == schema.METRICS:
                self.assertIsNone(schema.metrics_problem(message, 64))


class TestMetricsLoop(testtools.TestCase):
    """The metrics loop refuses exactly what the schema refuses."""

    def test_same_verdicts_as_the_schema(self):
        rng = random.Random(7)
        facts, metrics = agent_payload.Publisher().messages(_good())
        values = [None, True, 0, -1, 1e300, 10 ** 400, float('nan'),
                  float('inf'), '1', [1], 50, 50.5, 'healthy', 'sick', {}]
        fields = [('gpus', 0, 'metrics', name)
                  for name in schema.SCHEDULER_METRICS] + [
            ('gpus', 0, 'metrics', 'fan_speed_pct'),
            ('gpus', 1, 'assigned'), ('gpus', 0, 'metrics'),
            ('gpus', 1, 'health', 'state'), ('gpus', 1, 'health', 'x'),
            ('gpus', 1, 'health', 'reasons'), ('gpus', 0, 'extra'),
            ('seq',), ('generated_at',), ('digest',), ('host',),
            ('extra',), ('gpus', 1)]
        # _set() follows the path: no value may replace a container on it
        values = [v for v in values if not isinstance(v, (list, dict))]
        for _ in range(400):
            message = copy.deepcopy(metrics)
            for _n in range(rng.choice((1, 2))):
                try:
                    _set(message, rng.choice(fields), rng.choice(values))
                except (TypeError, KeyError, IndexError):
                    continue      # a first change replaced a container
            fast = schema.metrics_problem(message, 64)
            exact = schema.problem(message, 64)
            self.assertEqual(exact is None, fast is None,
                             (message, fast, exact))


class TestCacheNeverRaises(testtools.TestCase):

    def test_hostile_messages_change_nothing(self):
        states = cache.GpuStateCache(clock=lambda: 1000.0,
                                     wall_clock=lambda: 1000.0)
        good = _good()
        self.assertTrue(states.update(good))
        before = states.get('cmp-1')
        hostile = [None, [], 'x', {'version': '1.1', 'kind': 'metrics'},
                   {'version': '1.1', 'kind': 'facts', 'host': 'cmp-1'}]
        for path, value in MUTATIONS:
            p = copy.deepcopy(good)
            _set(p, path, value)
            if p != good:     # not False for 0: see below
                hostile.append(p)
        for message in hostile:
            self.assertFalse(states.update(message), message)
            self.assertEqual(before, states.get('cmp-1'))
        # a value equal to the held fact (False == 0) changes nothing
        p = copy.deepcopy(good)
        p['gpus'][0]['numa_node'] = False
        states.update(p)
        self.assertEqual(before, states.get('cmp-1'))
