# SPDX-License-Identifier: Apache-2.0

"""``simulate --nova-conf FILE``: the schedulers' own nova.conf, read as
nova-scheduler reads it, decides the simulation's placement options."""
import copy
import json
import os
import tempfile

import testtools

from gpu_nova_ext import exception
from gpu_nova_ext.simulate import nova_conf_file
from gpu_nova_ext.simulate import nova_config
from gpu_nova_ext.simulate import scenario as scn
from gpu_nova_ext.tests.unit.simulate import test_cloud_format
from gpu_nova_ext.tests.unit.simulate import test_scenario

PATH = test_scenario.PATH

# as an operator's nova.conf has them: a multi-valued option given twice,
# service options, a typo, a group the simulator does not take
NOVA_CONF = """
[DEFAULT]
debug = True
allow_resize_to_same_host = True
[scheduler]
workers = 4
max_placement_results = 50
[filter_scheduler]
available_filters = nova.scheduler.filters.all_filters
available_filters = gpu_nova_ext.scheduler.filters.all_filters
enabled_filters = ComputeFilter,PciPassthroughFilter,GpuModelFilter
weight_classes = nova.scheduler.weights.all_weighers,\
gpu_nova_ext.scheduler.weighers.all_weighers
host_subset_szie = 3
[gpu_weights]
packing_weight_multiplier = -5
[gpu_scheduler]
state_topic = gpu-state-eu1
intra_host_policy = spread
[pci]
alias = {"name": "l4", "vendor_id": "10de", "product_id": "27b8"}
alias = {"name": "t4", "vendor_id": "10de", "product_id": "1eb8"}
device_spec = {"vendor_id": "10de"}
[database]
connection = mysql+pymysql://nova:secret@db/nova
"""


def conf_file(testcase, text):
    """A nova.conf holding ``text``, removed after ``testcase``."""
    with tempfile.NamedTemporaryFile('w', suffix='.conf',
                                     delete=False) as f:
        f.write(text)
    testcase.addCleanup(os.unlink, f.name)
    return f.name


class TestRead(testtools.TestCase):

    def _file(self, text):
        return conf_file(self, text)

    def test_placement_options_taken_typed_service_ones_left_out(self):
        taken = nova_conf_file.read([self._file(NOVA_CONF)])
        self.assertEqual({
            'DEFAULT': {'allow_resize_to_same_host': True},
            'scheduler': {'max_placement_results': 50},
            'filter_scheduler': {
                'available_filters': [
                    'nova.scheduler.filters.all_filters',
                    'gpu_nova_ext.scheduler.filters.all_filters'],
                'enabled_filters': ['ComputeFilter', 'PciPassthroughFilter',
                                    'GpuModelFilter'],
                'weight_classes': [
                    'nova.scheduler.weights.all_weighers',
                    'gpu_nova_ext.scheduler.weighers.all_weighers']},
            'gpu_weights': {'packing_weight_multiplier': -5.0},
            'gpu_scheduler': {'intra_host_policy': 'spread'},
            'pci': {'alias': [
                '{"name": "l4", "vendor_id": "10de", "product_id": "27b8"}',
                '{"name": "t4", "vendor_id": "10de", '
                '"product_id": "1eb8"}']},
        }, taken.options)
        self.assertEqual(['[scheduler] workers',
                          '[gpu_scheduler] state_topic'], taken.service)
        self.assertEqual(['[filter_scheduler] host_subset_szie'],
                         taken.unknown)

    def test_later_file_wins(self):
        first = self._file('[gpu_weights]\npacking_weight_multiplier = -5\n'
                           'thermal_weight_multiplier = 2\n')
        second = self._file('[gpu_weights]\npacking_weight_multiplier = 7\n')
        taken = nova_conf_file.read([first, second])
        self.assertEqual({'packing_weight_multiplier': 7.0,
                          'thermal_weight_multiplier': 2.0},
                         taken.options['gpu_weights'])

    def _error(self, paths):
        msg = str(self.assertRaises(exception.ConfigError,
                                    nova_conf_file.read, paths))
        self.assertEqual(1, len(msg.splitlines()), msg)
        return msg

    def test_mistakes_are_one_line_naming_file_and_option(self):
        bad = self._file('[gpu_weights]\npacking_weight_multiplier = lots\n')
        msg = self._error([bad])
        self.assertIn(bad, msg)
        self.assertIn('[gpu_weights] packing_weight_multiplier', msg)
        self.assertIn('lots', msg)
        choice = self._file('[gpu_scheduler]\nintra_host_policy = random\n')
        self.assertIn('[gpu_scheduler] intra_host_policy',
                      self._error([choice]))
        garbage = self._file('not an ini file\n')
        msg = self._error([garbage])
        self.assertIn(garbage, msg)
        self.assertIn('not an INI file', msg)
        self.assertIn('/nonexistent', self._error(['/nonexistent']))

    def test_apply_over_the_scenario_says_what_it_replaced(self):
        data = copy.deepcopy(test_scenario.BASE)
        data['nova_conf'] = {'gpu_weights': {
            'packing_weight_multiplier': 10.0,
            'thermal_weight_multiplier': 1.0}}
        scenario = scn.from_dict(data, PATH)
        taken = nova_conf_file.read([self._file(
            '[gpu_weights]\npacking_weight_multiplier = -5\n')])
        out = nova_conf_file.apply(scenario, taken)
        self.assertEqual({'packing_weight_multiplier': -5.0,
                          'thermal_weight_multiplier': 1.0},
                         out.nova_conf['gpu_weights'])
        self.assertEqual(10.0, scenario.nova_conf['gpu_weights'][
            'packing_weight_multiplier'])
        self.assertEqual(['[gpu_weights] packing_weight_multiplier'],
                         taken.replaced)

    def test_quotas_not_played_without_unified_limits(self):
        data = copy.deepcopy(test_scenario.BASE)
        data['quotas'] = [{'model': 'A100', 'limit': 1}]
        scenario = scn.from_dict(data, PATH)
        legacy = nova_conf_file.read([self._file(
            '[quota]\ndriver = nova.quota.DbQuotaDriver\n')])
        out = nova_conf_file.apply(scenario, legacy)
        self.assertEqual([], out.quotas)
        self.assertEqual(1, len(scenario.quotas))
        self.assertIn('DbQuotaDriver', legacy.quotas_off)
        self.assertNotIn('quota', out.nova_conf)
        unified = nova_conf_file.read([self._file(
            '[quota]\ndriver = nova.quota.UnifiedLimitsDriver\n')])
        self.assertEqual(1, len(nova_conf_file.apply(scenario,
                                                     unified).quotas))
        self.assertIsNone(unified.quotas_off)

    def test_compare_nova_drops_our_plugins_the_file_enables(self):
        data = copy.deepcopy(test_scenario.BASE)
        scenario = scn.from_dict(data, PATH)
        scenario = nova_conf_file.apply(scenario, nova_conf_file.read(
            [self._file(NOVA_CONF.replace('alias', '#alias'))]))
        scenario.gpu_plugins = False
        config = nova_config.NovaConfig(scenario)
        self.addCleanup(config.restore)
        config.apply()
        fs = config.conf.filter_scheduler
        self.assertEqual(['ComputeFilter', 'PciPassthroughFilter'],
                         fs.enabled_filters)
        self.assertEqual(['nova.scheduler.weights.all_weighers'],
                         fs.weight_classes)
        config.restore()
        scenario.gpu_plugins = True
        config.apply()
        self.assertIn('GpuModelFilter', fs.enabled_filters)


class TestCommandLine(testtools.TestCase):

    def _cli(self, argv):
        return test_cloud_format.run_cli(argv)

    def _file(self, text):
        return conf_file(self, text)

    def test_the_file_decides_where_servers_land_and_is_said(self):
        # the shipped scenario packs both A100 vGPU servers on one GPU;
        # the schedulers' nova.conf spreads them
        spread = self._file('[gpu_scheduler]\nintra_host_policy = spread\n'
                            '[gpu_weights]\npacking_weight_multiplier = 10\n'
                            '[scheduler]\nworkers = 8\n')
        rc, out, err = self._cli(['simulate', '--nova-conf', spread,
                                  '-f', 'json'])
        self.assertEqual(0, rc, err)
        gpus = {s['server']: s.get('gpus')
                for s in json.loads(out)['placements']}
        self.assertNotEqual(gpus['vgpu.a100-1'], gpus['vgpu.a100-2'])
        self.assertIn('--nova-conf %s: took [gpu_scheduler] '
                      'intra_host_policy, [gpu_weights] '
                      'packing_weight_multiplier' % spread, err)
        self.assertIn("replaced the scenario's nova_conf: [gpu_scheduler] "
                      "intra_host_policy, [gpu_weights] "
                      "packing_weight_multiplier", err)
        self.assertIn('left out (they run the service, not placement): '
                      '[scheduler] workers', err)

    def test_bad_file_is_one_line_exit_2(self):
        bad = self._file('[filter_scheduler]\nenabled_filters = NoSuchFilter'
                         '\n')
        rc, out, err = self._cli(['simulate', '--nova-conf', bad])
        self.assertEqual(2, rc)
        self.assertEqual('', out)
        self.assertIn('NoSuchFilter', err)
        self.assertNotIn('Traceback', err)
