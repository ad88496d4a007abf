# SPDX-License-Identifier: Apache-2.0

"""The scenario schema: a valid JSON Schema whose values come from the
code, and errors that name the file, the entry path and the fix."""
import copy
import importlib.resources
import os

import jsonschema
import testtools

from gpu_nova_ext.conf import remediation as remediation_conf
from gpu_nova_ext import exception
from gpu_nova_ext.inventory import simulated
from gpu_nova_ext import safe_yaml
from gpu_nova_ext.simulate import hostgen
from gpu_nova_ext.simulate import policies
from gpu_nova_ext.simulate import scenario as scn
from gpu_nova_ext.simulate import schema
from gpu_nova_ext.tests.unit.simulate import test_scenario

PATH = test_scenario.PATH
DOC = os.path.join(os.path.dirname(__file__), '..', '..', '..', '..',
                   'doc', 'source', 'tuning.rst')


def _walk(node):
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


class TestSchemaFile(testtools.TestCase):

    def test_is_a_valid_json_schema(self):
        # checked here rather than on every run (it costs a run ~70 ms)
        cls = jsonschema.validators.validator_for(schema.schema())
        cls.check_schema(schema.schema())

    def test_is_package_data_without_duplicate_keys(self):
        text = importlib.resources.files('gpu_nova_ext.simulate').joinpath(
            schema.SCHEMA_FILE).read_text(encoding='utf-8')
        # safe_yaml refuses a key given twice, which plain YAML keeps one of
        self.assertEqual('object', safe_yaml.load(text)['type'])

    def test_every_injection_is_filled_from_the_code(self):
        injected = [node for node in _walk(schema.schema())
                    if any(k.startswith('x-') for k in node)]
        self.assertGreater(len(injected), 10)
        for node in injected:
            for keyword in schema.INJECTED:
                if 'x-%s-from' % keyword in node:
                    self.assertIn(keyword, node)
        self.assertEqual(list(simulated.HEALTH_STATES),
                         schema.definition('health_state')['enum'])
        host = schema.definition('host')['properties']
        self.assertEqual(scn.MAX_HOSTS, host['count']['maximum'])
        self.assertEqual(list(hostgen.PCI_ID_OF_MODEL), schema.definition(
            'gpu_kind')['properties']['model']['enum'])
        self.assertEqual(list(remediation_conf.POLICIES), schema.definition(
            'remediation')['properties']['policy']['enum'])

    def test_no_value_list_is_copied_into_the_file(self):
        text = importlib.resources.files('gpu_nova_ext.simulate').joinpath(
            schema.SCHEMA_FILE).read_text(encoding='utf-8')
        for value in ('unhealthy', 'vgpu-vfio', 'evacuate', 'annotate'):
            self.assertNotIn(value, text)

    def test_the_docs_include_the_file(self):
        with open(DOC, encoding='utf-8') as f:
            text = f.read()
        self.assertIn('.. literalinclude:: '
                      '../../gpu_nova_ext/simulate/scenario_schema.yaml',
                      text)


class TestErrors(testtools.TestCase):

    def refused(self, data):
        exc = self.assertRaises(exception.ScenarioError, scn.from_dict,
                                data, PATH)
        message = str(exc)
        self.assertNotIn('\n', message)
        self.assertTrue(message.startswith('Scenario %s, ' % PATH))
        return message

    def _data(self):
        data = copy.deepcopy(test_scenario.BASE)
        del data['hosts'][0]['libvirt_xml_inline']
        for key in ('enabled_mdev_types', 'nova_gpu_mode', 'gpus'):
            del data['hosts'][0][key]
        data['hosts'][0]['gpus'] = [
            {'model': 'A100_80GB_PCIE', 'count': 1, 'mode': 'vgpu',
             'vgpu_type': 'nvidia-471', 'vgpu_name': 'A100D-10C'},
            {'model': 'A100_80GB_PCIE', 'count': 1, 'mode': 'vgpu',
             'vgpu_type': 'nvidia-471', 'vgpu_name': 'A100D-10C'}]
        data['boots'] = data['boots'][:1]
        return data

    def test_entry_is_a_path(self):
        data = self._data()
        data['hosts'][0]['gpus'][1]['modle'] = 'A100'
        self.assertIn("hosts[0].gpus[1]: unknown key 'modle'. Allowed "
                      'keys: model, count, mode', self.refused(data))
        data = self._data()
        data['hosts'][0]['gpus'][1]['count'] = '2'
        self.assertIn("hosts[0].gpus[1].count: expected an integer, got "
                      "str '2'", self.refused(data))

    def test_enum_names_the_allowed_values(self):
        data = self._data()
        data['hosts'][0]['gpus'][0]['health'] = 'sick'
        self.assertIn("hosts[0].gpus[0].health: 'sick' is not one of "
                      'healthy, degraded, unhealthy', self.refused(data))

    def test_a_fraction_is_not_an_integer(self):
        data = self._data()
        data['flavors'][0]['vcpus'] = 8.0
        self.assertIn('flavors[0].vcpus: expected an integer, got float 8.0',
                      self.refused(data))

    def test_nan_refused_in_nested_options(self):
        data = self._data()
        data['nova_conf'] = {'g': {'o': [1, {'x': float('nan')}]}}
        msg = self.refused(data)
        self.assertIn('nova_conf.g.o[1].x:', msg)
        self.assertIn('a finite number', msg)

    def test_format_uses_the_projects_parser(self):
        data = self._data()
        data['reservations'] = [{'project': 'two words', 'host': 'cmp-1'}]
        msg = self.refused(data)
        self.assertIn('reservations[0].project:', msg)
        self.assertIn('openstack project list', msg)

    def test_derived_key_with_gpu_kinds(self):
        data = self._data()
        data['hosts'][0]['nova_gpu_mode'] = 'pci'
        self.assertIn('hosts[0].nova_gpu_mode: follows from gpus: as a '
                      'list of GPU kinds', self.refused(data))

    def test_policy_overrides_are_validated(self):
        s = scn.from_dict(self._data(), PATH)
        exc = self.assertRaises(
            exception.ScenarioError, policies.apply, s,
            {'gpu_weights': {'packing_weight_multiplier': float('inf')}},
            True)
        self.assertIn('nova_conf.gpu_weights.packing_weight_multiplier:',
                      str(exc))

    def test_policy_names_follow_the_name_rule(self):
        self.assertRaises(policies.PolicyError, policies.parse, 'a b=x.y=1')
        self.assertRaises(policies.PolicyError, policies.parse, 'p\n=x.y=1')
        self.assertEqual('ok-1', policies.parse('ok-1=g.o=1')[0])

    def test_workload_lifetime_order(self):
        data = self._data()
        data['workload'] = {'flavors': {'vgpu.a100': 1},
                            'lifetime': {'min': 5, 'max': 2}}
        self.assertIn('workload.lifetime.max: must be at least min (5), '
                      'got 2', self.refused(data))
