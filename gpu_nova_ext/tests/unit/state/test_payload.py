"""The state payload schema (DESIGN section 5)."""
import copy

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
