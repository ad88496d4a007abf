"""The state payload schema (design doc: State protocol)."""
import copy
import decimal
import json
import random

import testtools

from gpu_nova_ext import exception
from gpu_nova_ext.state import payload as schema
from gpu_nova_ext.tests.unit.scheduler import nova_objects as no


def _good():
    return no.payload('cmp-1', [no.gpu_state('cmp-1', i) for i in range(2)])


class TestValidate(testtools.TestCase):

    def _reject(self, payload, text, max_bytes=1048576, max_gpus=64):
        exc = self.assertRaises(exception.InvalidStatePayload,
                                schema.validate, payload, max_bytes,
                                max_gpus)
        self.assertIn(text, str(exc))
        return exc

    def test_good_payload(self):
        schema.validate(_good(), 1048576, 64)

    def test_nvml_fields_may_be_null(self):
        payload = _good()
        for gpu in payload['gpus']:
            for key in ('vendor', 'model', 'memory_mib', 'uuid',
                        'driver_version', 'cuda_cc', 'numa_node'):
                gpu[key] = None
            gpu['metrics'] = {'utilization_pct': None}
            gpu['mig'] = None
        payload['nodename'] = None
        schema.validate(payload, 1048576, 64)

    def test_agent_payload_builder_is_accepted(self):
        from gpu_nova_ext.inventory import base as inv

        gpu = inv.Gpu(pci_address='0000:3b:00.0', vendor='nvidia',
                      model='A100_80GB_PCIE', memory_mib=81920,
                      mode='vgpu', provider_uuids=['x'],
                      mdev_types=[inv.MdevType(id='nvidia-471', available=8,
                                               max=8)])
        from gpu_nova_ext.agent import payload as agent_payload

        payload = agent_payload.build_payload(
            inv.HostInventory(host='cmp-1', gpus=[gpu]), host='cmp-1',
            nodename=None, root_provider_uuid=None, mode='annotate')
        schema.validate(payload, 1048576, 64)

    def test_not_a_dict(self):
        self._reject(['x'], 'must be an object')
        self._reject(None, 'must be an object')

    def test_version(self):
        payload = dict(_good(), version='2.0')
        exc = self._reject(payload, "schema version '2.0'")
        self.assertIn('cmp-1', str(exc))
        payload = _good()
        del payload['version']
        self._reject(payload, 'schema version None')

    def test_required_fields(self):
        for key, text in (('host', 'host is missing'),
                          ('generated_at', 'generated_at is missing'),
                          ('gpus', 'gpus must be a list')):
            payload = _good()
            del payload[key]
            self._reject(payload, text)
        payload = _good()
        del payload['gpus'][1]['pci_address']
        self._reject(payload, 'gpus[1].pci_address is missing')
        payload = _good()
        del payload['gpus'][0]['provider_uuids']
        self._reject(payload, 'gpus[0].provider_uuids is missing')
        payload = _good()
        del payload['gpus'][0]['health']
        self._reject(payload, 'gpus[0].health is missing')

    def test_types(self):
        cases = [
            (lambda p: p.update(generated_at='now'), 'must be a number'),
            (lambda p: p.update(host=7), 'host must be a string'),
            (lambda p: p['gpus'][0].update(memory_mib=1.5),
             'memory_mib must be an integer'),
            (lambda p: p['gpus'][0].update(memory_mib=True),
             'memory_mib must be a number'),
            (lambda p: p['gpus'][0].update(provider_uuids='abc'),
             'provider_uuids must be a list'),
            (lambda p: p['gpus'][0]['vgpu_types'][0].update(available='8'),
             'available must be a number'),
            (lambda p: p['gpus'][0].update(metrics={'power_w': 'hot'}),
             'metrics.power_w must be a number'),
            (lambda p: p['gpus'][0]['mig'].update(enabled='yes'),
             'mig.enabled must be a boolean'),
            (lambda p: p['gpus'][0].update(driver_version='r550'),
             'dotted version'),
            (lambda p: p['gpus'][0].update(cuda_cc='8'),
             'cuda_cc must look like 8.0'),
            (lambda p: p.update(agent_mode='both'), 'agent_mode must be'),
        ]
        for mutate, text in cases:
            payload = copy.deepcopy(_good())
            mutate(payload)
            self._reject(payload, text)

    def test_ranges(self):
        for metrics, text in (({'utilization_pct': 101}, '<= 100'),
                              ({'utilization_pct': -1}, '>= 0'),
                              ({'temperature_c': float('nan')}, 'finite'),
                              ({'power_w': -5}, '>= 0')):
            payload = _good()
            payload['gpus'][0]['metrics'] = metrics
            self._reject(payload, text)
        payload = _good()
        payload['gpus'][0]['health']['state'] = 'sick'
        self._reject(payload, 'healthy, degraded, unhealthy')
        payload = _good()
        payload['generated_at'] = -1
        self._reject(payload, 'generated_at must be >= 0')

    def test_sizes(self):
        payload = _good()
        self._reject(payload, 'max_gpus_per_host (1)', max_gpus=1)
        self._reject(payload, 'max_payload_bytes (1024)', max_bytes=1024)
        payload['gpus'][0]['health']['reasons'] = ['x' * 300]
        self._reject(payload, 'longer than 255')

    def test_duplicate_gpu(self):
        payload = _good()
        payload['gpus'][1]['pci_address'] = payload['gpus'][0]['pci_address']
        self._reject(payload, 'listed twice')

    def test_not_json(self):
        payload = _good()
        payload['gpus'][0]['metrics'] = {'x': object()}
        self._reject(payload, 'not JSON-serialisable')


def _variants():
    """Valid payloads of many forms, and malformed ones, for TestQuick."""
    rng = random.Random(7)
    good = []
    p = _good()
    good.append(p)
    p = _good()
    p['gpus'][0]['metrics'] = None
    del p['gpus'][1]['metrics']
    good.append(p)
    p = _good()
    p['gpus'][0]['metrics']['fan_speed_pct'] = 40
    p['gpus'][0]['metrics']['\u00e9nergie'] = 1e300
    p['gpus'][1]['model'] = 'A100 \u2014 \U0001f600 "80GB"\\\n'
    p['gpus'][1]['health'] = {'state': 'degraded', 'reasons': ['\x01' * 255]}
    p['nodename'] = '\u00e9' * 255
    good.append(p)
    p = _good()
    p['gpus'][0]['future_field'] = {'x': [1, 2]}     # unknown: exact path
    p['extension'] = 'x'
    good.append(p)
    p = _good()
    p['generated_at'] = 1764430000            # an int
    p['gpus'][0]['metrics']['power_w'] = 10 ** 20
    p['gpus'][1]['memory_mib'] = 10 ** 17
    good.append(p)
    p = _good()
    for gpu in p['gpus']:
        for key in ('vendor', 'model', 'memory_mib', 'uuid', 'mode',
                    'driver_version', 'cuda_cc', 'numa_node', 'vfs',
                    'vgpu_types', 'mig', 'assigned', 'offered_vgpu_type'):
            gpu[key] = None
    p['agent_mode'] = None
    p['root_provider_uuid'] = None
    good.append(p)
    mutations = [
        ('version', '1.0 '), ('version', 1.0), ('host', ''),
        ('host', 'h' * 256), ('generated_at', True),
        ('generated_at', float('inf')), ('generated_at', -0.5),
        ('nodename', 5), ('agent_mode', 'both'), ('gpus', {}),
        (('gpus', 0, 'numa_node'), False), (('gpus', 0, 'numa_node'), -2),
        (('gpus', 0, 'memory_mib'), 81920.0),
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
        (('gpus', 0, 'metrics', 'utilization_pct'), 100.5),
        (('gpus', 0, 'metrics', 'temperature_c'), True),
        (('gpus', 0, 'metrics', 'temperature_c'), float('nan')),
        (('gpus', 0, 'metrics', 'power_w'), float('inf')),
        (('gpus', 0, 'metrics', 'power_w'), '72'),
        (('gpus', 0, 'metrics'), [1]),
        (('gpus', 1, 'pci_address'), no.pci(0)),
        (('gpus', 1, 'metrics', 'odd'), {1, 2}),
    ]
    bad = []
    for path, value in mutations:
        p = _good()
        if isinstance(path, str):
            path = (path,)
        target = p
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        bad.append(p)
    for _ in range(40):
        p = copy.deepcopy(rng.choice(good))
        path, value = rng.choice(mutations)
        if isinstance(path, str):
            path = (path,)
        target = p
        try:
            for key in path[:-1]:
                target = target[key]
        except (KeyError, TypeError):
            continue       # that variant has no such field
        target[path[-1]] = value
        bad.append(p)
    return good, bad


def _size(payload):
    try:
        return len(json.dumps(payload, separators=(',', ':')))
    except (TypeError, ValueError):
        return 1048576


class TestQuick(testtools.TestCase):
    """The quick checks never accept what the exact checks reject."""

    def _verdict(self, func, payload, max_bytes, max_gpus=64):
        try:
            func(payload, max_bytes, max_gpus)
        except exception.InvalidStatePayload as exc:
            return str(exc)
        return None

    def test_same_verdicts_as_the_exact_checks(self):
        good, bad = _variants()
        for payload in good + bad:
            for max_bytes in (1048576, _size(payload), _size(payload) - 1,
                              300):
                self.assertEqual(
                    self._verdict(schema._validate, payload, max_bytes),
                    self._verdict(schema.validate, payload, max_bytes),
                    payload)
            self.assertEqual(
                self._verdict(schema._validate, payload, 1048576, 1),
                self._verdict(schema.validate, payload, 1048576, 1))
        for payload in good:
            self.assertIsNone(self._verdict(schema.validate, payload,
                                            1048576))

    def test_quick_valid_after_a_valid_static_part(self):
        # what the cache does: check() once, then quick_valid() for later
        # payloads with the same static part (key)
        good, bad = _variants()
        checked = 0
        for payload in good:
            key, _metrics = schema.static_part(payload)
            size = schema.static_size(payload)
            if size >= 0:
                # an upper bound of the GPU objects' size without metrics
                stripped = [{k: v for k, v in g.items() if k != 'metrics'}
                            for g in payload['gpus']]
                self.assertGreaterEqual(size, _size(stripped))
            for other in [payload] + bad:
                part = schema.static_part(other)
                if part is None or part[0] != key:
                    continue
                for max_bytes in (1048576, _size(other), _size(other) - 1):
                    checked += 1
                    if schema.quick_valid(other, part[1], size, max_bytes,
                                          64):
                        self.assertIsNone(self._verdict(
                            schema._validate, other, max_bytes), other)
        self.assertGreater(checked, 40)
        payload = good[0]
        self.assertTrue(schema.quick_valid(
            payload, schema.static_part(payload)[1],
            schema.static_size(payload), 1048576, 64))

    def test_static_part_is_type_exact_and_leaves_the_payload(self):
        payload = _good()
        before = copy.deepcopy(payload)
        orders = [list(g) for g in payload['gpus']]
        key, metrics = schema.static_part(payload)
        self.assertEqual(before, payload)
        self.assertEqual(orders, [list(g) for g in payload['gpus']])
        self.assertEqual([g['metrics'] for g in payload['gpus']], metrics)
        other = copy.deepcopy(payload)
        other['gpus'][0]['metrics']['utilization_pct'] = 99.0
        self.assertEqual(key, schema.static_part(other)[0])
        for path, value in ((('mig', 'capable'), 1), (('numa_node',), False),
                            (('numa_node',), 0.0),
                            (('memory_mib',), 81920.0)):
            other = copy.deepcopy(payload)
            target = other['gpus'][0]
            for part in path[:-1]:
                target = target[part]
            self.assertEqual(target[path[-1]], value)    # equal, but...
            target[path[-1]] = value
            self.assertNotEqual(key, schema.static_part(other)[0], path)
        # metrics not last: made from copies, the payload left as it was
        payload['gpus'][1]['assigned'] = None
        orders = [list(g) for g in payload['gpus']]
        key2, _metrics = schema.static_part(payload)
        self.assertEqual(orders, [list(g) for g in payload['gpus']])
        self.assertNotEqual(key, key2)
        self.assertIsNone(schema.static_part({'gpus': [object()]}))
        self.assertIsNone(schema.static_part({'gpus': [{'x': object()}]}))

    def test_static_part_key_same_wherever_metrics_are(self):
        # metrics last (the agent's order), elsewhere, or absent: the key
        # of the rest is the same, and every object is left as it was
        payload = _good()
        key = schema.static_part(copy.deepcopy(payload))[0]
        first = copy.deepcopy(payload)
        gpu = first['gpus'][1]
        items = list(gpu.items())
        gpu.clear()
        gpu.update([items[-1]] + items[:-1])     # metrics first
        # (held twice, an object is marked in the key: let go of it)
        del gpu, items
        # (a snapshot holding the values would mark them too)
        before = json.dumps(first['gpus'])
        self.assertEqual(key, schema.static_part(first)[0])
        self.assertEqual(before, json.dumps(first['gpus']))
        absent = copy.deepcopy(payload)
        del absent['gpus'][0]['metrics']
        got, metrics = schema.static_part(absent)
        self.assertEqual(key, got)
        self.assertIs(schema.ABSENT, metrics[0])
        self.assertNotIn('metrics', absent['gpus'][0])
        self.assertEqual(payload['gpus'][1]['metrics'], metrics[1])
        # a GPU object that is not a dict after some whose metrics were
        # taken: None, and those metrics are back
        broken = copy.deepcopy(payload)
        broken['gpus'].append(['not', 'a', 'dict'])
        self.assertIsNone(schema.static_part(broken))
        self.assertEqual(payload['gpus'], broken['gpus'][:-1])

    def test_metrics_fast_check_bounds_and_delegates(self):
        # the one-lookup check of the common metrics gives a coarser size
        # bound than the exact one, and hands nulls, unknown metrics and
        # odd types to it
        good, _bad = _variants()
        for payload in good:
            metrics = schema.static_part(payload)[1]
            exact = schema._quick_metrics_exact(metrics)
            if exact < 0:       # unsure of big numbers: both leave them
                self.assertEqual(-1, schema._quick_metrics(metrics))
            else:
                self.assertGreaterEqual(schema._quick_metrics(metrics),
                                        exact)
        payload = _good()
        metrics = schema.static_part(payload)[1]
        stripped = copy.deepcopy(payload)
        for gpu in stripped['gpus']:
            del gpu['metrics']
        self.assertGreaterEqual(
            schema._quick_metrics(metrics),
            _size(payload) - _size(stripped))
        for value in (True, False, float('nan'), float('-inf'), '5', [5],
                      -1, 1e16, decimal.Decimal(5), _Float(5.0)):
            payload = _good()
            payload['gpus'][1]['metrics']['power_w'] = value
            metrics = schema.static_part(payload)[1]
            self.assertEqual(-1, schema._quick_metrics(metrics), value)
            self.assertFalse(schema.quick_valid(
                payload, metrics, schema.static_size(payload), 1048576, 64))
        payload = _good()
        payload['gpus'][1]['metrics']['power_w'] = None
        payload['gpus'][1]['metrics']['fan_pct'] = 3
        metrics = schema.static_part(payload)[1]
        self.assertEqual(schema._quick_metrics_exact(metrics),
                         schema._quick_metrics(metrics))
        self.assertGreater(schema._quick_metrics(metrics), 0)


class _Float(float):
    pass
