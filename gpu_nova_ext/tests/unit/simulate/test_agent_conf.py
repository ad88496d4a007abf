# SPDX-License-Identifier: Apache-2.0

"""A scenario's ``agent_conf:``: the agents' [health] and intervals."""
import copy

import testtools

from gpu_nova_ext import exception
from gpu_nova_ext.simulate import conf_keys
from gpu_nova_ext.simulate import scenario as scn
from gpu_nova_ext.tests.unit.simulate import test_scenario

PATH = test_scenario.PATH


def _load(agent_conf):
    data = copy.deepcopy(test_scenario.BASE)
    data['agent_conf'] = agent_conf
    return scn.from_dict(data, PATH)


class TestAgentConf(testtools.TestCase):

    def test_values_reach_an_agents_options(self):
        s = _load({'health': {'recovery_period': 120, 'fatal_xids': [79]},
                   'agent': {'report_interval': 60}})
        conf = conf_keys._agent_opts()
        conf_keys.apply_agent_conf(conf, s.agent_conf)
        self.assertEqual((120.0, ['79'], 60.0), (
            conf.health.recovery_period, conf.health.fatal_xids,
            conf.agent.report_interval))

    def test_absent_sets_nothing(self):
        self.assertEqual({}, scn.from_dict(
            copy.deepcopy(test_scenario.BASE), PATH).agent_conf)

    def test_errors_name_the_entry(self):
        for agent_conf, entry, word in (
                ('fast', 'agent_conf', 'expected a mapping'),
                ({'nova': {}}, 'agent_conf', "'nova'"),
                ({'agent': {'libvirt_uri': 'x'}}, 'agent_conf.agent',
                 'report_interval, metrics_interval'),
                ({'health': {'recovry_period': 1}}, 'agent_conf.health',
                 'recovery_period'),
                ({'health': {'recovery_period': -1}},
                 'agent_conf.health.recovery_period', 'greater than'),
                ({'agent': {'metrics_interval': 'soon'}},
                 'agent_conf.agent.metrics_interval', "'soon'"),
                ({'agent': {'metrics_interval': float('inf')}},
                 'agent_conf.agent.metrics_interval', 'finite')):
            exc = self.assertRaises(exception.ScenarioError, _load,
                                    agent_conf)
            self.assertIn(PATH, str(exc))
            self.assertIn(entry + ':', str(exc))
            self.assertIn(word, str(exc))
