# SPDX-License-Identifier: Apache-2.0

"""A scenario's ``placement_conf:``: the embedded Placement's options."""
import copy

import testtools

from gpu_nova_ext import exception
from gpu_nova_ext.operator import scale_settings
from gpu_nova_ext.simulate import conf_keys
from gpu_nova_ext.simulate import embedded
from gpu_nova_ext.simulate import nova_config
from gpu_nova_ext.simulate import scenario as scn
from gpu_nova_ext.simulate import schema
from gpu_nova_ext.tests.unit.simulate import test_scenario

PATH = test_scenario.PATH


def _load(placement_conf=None, absent=False):
    data = copy.deepcopy(test_scenario.BASE)
    if not absent:
        data['placement_conf'] = placement_conf
    return scn.from_dict(data, PATH)


class TestPlacementConf(testtools.TestCase):

    def test_absent_is_what_we_recommend(self):
        s = _load(absent=True)
        self.assertTrue(s.recommended)
        self.assertEqual(dict(scale_settings.PLACEMENT),
                         s.placement_conf)
        # the base scenario is small: Nova's stock limit is the cap
        self.assertEqual(1000, s.placement_conf[
            ('placement', 'max_allocation_candidates')])
        self.assertEqual(
            'breadth-first', s.placement_conf[
                ('placement', 'allocation_candidates_generation_strategy')])

    def test_cap_is_at_least_the_host_count(self):
        src = schema.Source(PATH)
        for hosts, cap in ((10, 1000), (1000, 1000), (2000, 2000)):
            options, _ = conf_keys.placement_conf(src, None, hosts)
            self.assertEqual(cap, options[
                ('placement', 'max_allocation_candidates')])

    def test_stock_is_one_key_away(self):
        s = _load('stock')
        self.assertFalse(s.recommended)
        self.assertEqual({}, s.placement_conf)

    def test_values_override_the_recommended_ones(self):
        s = _load({'placement': {'max_allocation_candidates': 500}})
        self.assertEqual(500, s.placement_conf[
            ('placement', 'max_allocation_candidates')])
        self.assertTrue(s.placement_conf[
            ('workarounds', 'optimize_for_wide_provider_trees')])

    def test_values_reach_the_embedded_placement(self):
        s = _load({'placement': {
            'allocation_candidates_generation_strategy': 'depth-first'}})
        placement = embedded.EmbeddedPlacement(options=s.placement_conf)
        self.addCleanup(placement.close)
        conf = placement.conf
        self.assertEqual(
            ('depth-first', scale_settings.CANDIDATES, True),
            (conf.placement.allocation_candidates_generation_strategy,
             conf.placement.max_allocation_candidates,
             conf.workarounds.optimize_for_wide_provider_trees))

    def test_nova_limit_follows(self):
        for value, limit in ((None, scale_settings.CANDIDATES),
                             ('stock', 1000)):
            novaconf = nova_config.NovaConfig(_load(value))
            novaconf.apply()
            try:
                self.assertEqual(
                    limit, novaconf.conf.scheduler.max_placement_results)
            finally:
                novaconf.restore()

    def test_errors_name_the_entry(self):
        for value, entry, word in (
                ('fast', 'placement_conf', "'stock' or a mapping"),
                ({'api': {'auth_strategy': 'keystone'}}, 'placement_conf',
                 "'api'"),
                ({'placement': {'max_candidates': 5}},
                 'placement_conf.placement', 'max_allocation_candidates'),
                ({'placement': {
                    'allocation_candidates_generation_strategy': 'random'}},
                 'placement_conf.placement.'
                 'allocation_candidates_generation_strategy', "'random'"),
                ({'workarounds': {
                    'optimize_for_wide_provider_trees': 'maybe'}},
                 'placement_conf.workarounds.'
                 'optimize_for_wide_provider_trees', "'maybe'"),
                ({'placement': {'max_allocation_candidates': 'many'}},
                 'placement_conf.placement.max_allocation_candidates',
                 "'many'")):
            exc = self.assertRaises(exception.ScenarioError, _load, value)
            self.assertIn(PATH, str(exc))
            self.assertIn(entry + ':', str(exc))
            self.assertIn(word, str(exc))
