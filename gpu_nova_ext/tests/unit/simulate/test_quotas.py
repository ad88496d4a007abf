# SPDX-License-Identifier: Apache-2.0

"""The scenario key ``quotas:`` and the hosts' ``vgpu_resource_class``:
each mistake stops before any boot, naming the entry and the fix."""
import copy

import testtools

from gpu_nova_ext import exception
from gpu_nova_ext.simulate import scenario as scn
from gpu_nova_ext.tests.unit.simulate import test_scenario

PATH = test_scenario.PATH


class TestQuotasKey(testtools.TestCase):

    def _data(self, quotas):
        data = copy.deepcopy(test_scenario.BASE)
        data['quotas'] = quotas
        return data

    def assertError(self, data, entry, *words):
        exc = self.assertRaises(exception.ScenarioError, scn.from_dict,
                                data, PATH)
        self.assertIn(entry + ':', str(exc))
        for word in words:
            self.assertIn(word, str(exc))

    def test_parsed(self):
        scenario = scn.from_dict(self._data([
            {'project': 'team-a', 'model': 'A100', 'limit': 4},
            {'model': 'A100', 'kind': 'vgpu', 'limit': -1}]), PATH)
        self.assertEqual(
            [('team-a', 'A100', None, 4), (None, 'A100', 'vgpu', -1)],
            [(q.project, q.model, q.kind, q.limit)
             for q in scenario.quotas])

    def test_mistakes_name_the_entry(self):
        for quotas, entry, words in (
                ({'model': 'A100'}, 'quotas', ['list']),
                ([{'model': 'A100'}], 'quotas[0]', ['limit']),
                ([{'limit': 4}], 'quotas[0]', ['model']),
                ([{'model': 'A100', 'limit': 0}], 'quotas[0].limit',
                 ['Keystone', '-1 for unlimited']),
                ([{'model': 'A100', 'limit': -2}], 'quotas[0].limit', []),
                ([{'model': 'A100', 'limit': 2 ** 31}], 'quotas[0].limit',
                 []),
                ([{'model': 'A100', 'limit': 1.5}], 'quotas[0].limit', []),
                ([{'model': 'A100', 'limit': 4, 'kind': 'mig'}],
                 'quotas[0].kind', ['vgpu']),
                ([{'project': 'two words', 'model': 'A100', 'limit': 4}],
                 'quotas[0].project', []),
                ([{'model': 'A100', 'limit': 4, 'region': 'r1'}],
                 'quotas[0]', ['region']),
                ([{'model': 'A100', 'limit': 4},
                  {'model': 'a100', 'limit': 2}], 'quotas[1]',
                 ['quotas[0]'])):
            self.assertError(self._data(quotas), entry, *words)

    def test_vgpu_resource_class(self):
        data = copy.deepcopy(test_scenario.BASE)
        data['hosts'][0]['vgpu_resource_class'] = 'custom_vgpu_a100'
        scenario = scn.from_dict(data, PATH)
        self.assertEqual('CUSTOM_VGPU_A100',
                         scenario.hosts[0].vgpu_resource_class)
        data['hosts'][0]['vgpu_resource_class'] = 'PGPU'
        self.assertError(data, 'hosts[0].vgpu_resource_class',
                         'CUSTOM_VGPU_A100_80GB_PCIE')
