# SPDX-License-Identifier: Apache-2.0

"""What needs Nova is checked before any boot too: extra specs through
nova-api's validators, nova_conf options, PCI aliases."""
import copy

import testtools

from gpu_nova_ext import exception
from gpu_nova_ext.simulate import nova_config
from gpu_nova_ext.simulate import nova_flavors
from gpu_nova_ext.simulate import nova_host_states
from gpu_nova_ext.simulate import runner
from gpu_nova_ext.simulate import scenario as scn
from gpu_nova_ext.tests.unit.simulate import test_scenario

PATH = '/tmp/nova-checks.yaml'


def _scenario(**changes):
    data = copy.deepcopy(test_scenario.BASE)
    data.update(changes)
    return scn.from_dict(data, PATH)


class TestFlavorChecks(testtools.TestCase):

    def _flavor_error(self, extra_specs):
        s = _scenario(flavors=[{'name': 'f1', 'vcpus': 1, 'ram_mb': 512,
                                'extra_specs': extra_specs}],
                      boots=[{'flavor': 'f1'}])
        return str(self.assertRaises(exception.ScenarioError,
                                     nova_flavors.check_flavors, s))

    def test_bad_gpu_value_rejected_as_nova_api_would(self):
        msg = self._flavor_error({'resources:VGPU': '1',
                                  'gpu:memory_min': 'lots'})
        self.assertIn(PATH, msg)
        self.assertIn('flavors (f1).extra_specs[gpu:memory_min]', msg)
        self.assertIn('lots', msg)

    def test_unknown_gpu_key_rejected(self):
        msg = self._flavor_error({'gpu:modle': 'A100'})
        self.assertIn('gpu:modle', msg)

    def test_bad_nova_extra_spec_rejected(self):
        msg = self._flavor_error({'hw:cpu_policy': 'sometimes'})
        self.assertIn('hw:cpu_policy', msg)

    def test_undefined_alias(self):
        msg = self._flavor_error({'pci_passthrough:alias': 'h200:1'})
        self.assertIn('h200', msg)
        self.assertIn('alias', msg)

    def test_shipped_flavors_pass(self):
        for path in (None, scn.SCENARIO_DIR + '/example.yaml'):
            s = scn.load(path)
            config = nova_config.NovaConfig(s)
            self.addCleanup(config.restore)
            config.apply()      # defines the PCI aliases
            nova_flavors.check_flavors(s)
            config.restore()


class TestNovaConf(testtools.TestCase):

    def _apply(self, nova_conf):
        config = nova_config.NovaConfig(_scenario(nova_conf=nova_conf))
        self.addCleanup(config.restore)
        config.apply()
        return config

    def test_defaults_and_overrides_then_restore(self):
        config = self._apply({'gpu_weights': {
            'packing_weight_multiplier': 3.5}})
        conf = config.conf
        self.assertEqual(3.5, conf.gpu_weights.packing_weight_multiplier)
        self.assertIn('GpuHealthFilter',
                      conf.filter_scheduler.enabled_filters)
        self.assertIn('ComputeFilter', conf.filter_scheduler.enabled_filters)
        self.assertTrue(conf.filter_scheduler.pci_in_placement)
        config.restore()
        self.assertNotEqual(3.5, conf.gpu_weights.packing_weight_multiplier)
        self.assertNotIn('GpuHealthFilter',
                         conf.filter_scheduler.enabled_filters)

    def test_alias_mapping_becomes_json(self):
        config = self._apply({'pci': {'alias': [
            {'name': 'h100', 'resource_class': 'CUSTOM_GPU_H100'}]}})
        self.assertEqual(
            ['{"name": "h100", "resource_class": "CUSTOM_GPU_H100"}'],
            config.conf.pci.alias)

    def test_unknown_option(self):
        exc = self.assertRaises(exception.ScenarioError, self._apply,
                                {'gpu_weights': {'packing': -1}})
        self.assertIn('nova_conf.gpu_weights.packing', str(exc))
        self.assertIn('no option', str(exc))

    def test_unknown_group(self):
        exc = self.assertRaises(exception.ScenarioError, self._apply,
                                {'gpu_weight': {'packing': -1}})
        self.assertIn('nova_conf.gpu_weight.packing', str(exc))

    def test_bad_value(self):
        exc = self.assertRaises(
            exception.ScenarioError, self._apply,
            {'gpu_scheduler': {'intra_host_policy': 'sideways'}})
        self.assertIn('nova_conf.gpu_scheduler.intra_host_policy', str(exc))
        self.assertIn('sideways', str(exc))


class TestRunStopsBeforeBoots(testtools.TestCase):

    def test_unknown_filter_stops_the_run(self):
        s = _scenario(nova_conf={'filter_scheduler': {
            'enabled_filters': ['ComputeFilter', 'GpuModleFilter']}})
        lines = []
        exc = self.assertRaises(exception.ScenarioError,
                                runner.Simulation(s, lines.append).run)
        self.assertIn('nova_conf.filter_scheduler.enabled_filters', str(exc))
        self.assertIn('GpuModleFilter', str(exc))
        self.assertEqual([], lines)

    def test_unknown_weigher_module_stops_the_run(self):
        s = _scenario(nova_conf={'filter_scheduler': {
            'weight_classes': ['nova.scheduler.weights.no_such_weigher']}})
        exc = self.assertRaises(exception.ScenarioError,
                                runner.Simulation(s).run)
        self.assertIn('no_such_weigher', str(exc))

    def test_bad_extra_spec_stops_the_run(self):
        s = _scenario(flavors=[{'name': 'f1', 'vcpus': 1, 'ram_mb': 512,
                                'extra_specs': {'gpu:health': 'great'}}],
                      boots=[{'flavor': 'f1'}])
        lines = []
        self.assertRaises(exception.ScenarioError,
                          runner.Simulation(s, lines.append).run)
        # nothing started: no Placement, no host, no boot
        self.assertEqual([], lines)


class TestAggregates(testtools.TestCase):

    def test_metadata_reaches_weigher_multipliers(self):
        data = copy.deepcopy(test_scenario.BASE)
        second = copy.deepcopy(data['hosts'][0])
        second['name'] = 'cmp-2'
        data['hosts'].append(second)
        data['hosts'][0]['aggregates'] = {
            'inference': {'packing_weight_multiplier': 10}}
        second['aggregates'] = {'inference': {}, 'rack-7': {'x': 'y'}}
        s = scn.from_dict(data, PATH)
        aggs = nova_host_states.aggregates(s)
        self.assertEqual(['inference'], [a.name for a in aggs['cmp-1']])
        self.assertEqual(['inference', 'rack-7'],
                         [a.name for a in aggs['cmp-2']])
        self.assertIs(aggs['cmp-1'][0], aggs['cmp-2'][0])
        self.assertEqual(['cmp-1', 'cmp-2'], aggs['cmp-1'][0].hosts)

        from nova.scheduler import utils
        compute = nova_host_states.compute_node(s.hosts[0], 'rp', {}, [])
        state = nova_host_states.host_state(compute, [], aggs['cmp-1'])
        self.assertEqual(10.0, utils.get_weight_multiplier(
            state, 'packing_weight_multiplier', -1.0))
        plain = nova_host_states.host_state(compute, [])
        self.assertEqual(-1.0, utils.get_weight_multiplier(
            plain, 'packing_weight_multiplier', -1.0))

    def test_bad_metadata(self):
        data = copy.deepcopy(test_scenario.BASE)
        data['hosts'][0]['aggregates'] = {'a': {'k': [1]}}
        exc = self.assertRaises(exception.ScenarioError, scn.from_dict,
                                data, PATH)
        self.assertIn('hosts[0].aggregates.a.k:', str(exc))
