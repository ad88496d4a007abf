# SPDX-License-Identifier: Apache-2.0

"""The agent's health judge on the simulated clock."""
import types

from oslo_config import cfg
import testtools

from gpu_nova_ext import conf as gconf
from gpu_nova_ext.inventory import base
from gpu_nova_ext.simulate import agent_health
from gpu_nova_ext.simulate import clock

GPU = '0000:3b:00.0'
OTHER = '0000:86:00.0'


def _facts(temperature):
    return {'name': 'NVIDIA A100 80GB PCIe', 'slowdown_temperature_c': 87,
            'shutdown_temperature_c': 92,
            'metrics': {'temperature_c': temperature}}


class TestHostHealth(testtools.TestCase):

    def setUp(self):
        super().setUp()
        conf = cfg.ConfigOpts()
        gconf.register_agent_opts(conf)
        conf([], default_config_files=[], default_config_dirs=[])
        self.recovery = conf.health.recovery_period
        self.clock = clock.SimClock(start=0.0)
        # what HostHealth reads of a SimulatedHost: its options and facts
        self.host = types.SimpleNamespace(
            conf=conf, facts={GPU: _facts(50), OTHER: _facts(40)})
        self.health = agent_health.HostHealth(self.host,
                                              self.clock.monotonic)

    def _state(self, address=GPU):
        inventory = base.HostInventory(host='cmp-1', gpus=[
            base.Gpu(pci_address=address)])
        self.health.apply(inventory)
        return inventory.gpus[0].health.state

    def _at(self, seconds):
        self.clock.advance(seconds - self.clock.now)
        return self.health.sample(self.clock.now)

    def test_cool_gpus_need_no_samples(self):
        self.assertEqual([], self._at(0))
        self.assertFalse(self.health.active())
        self.assertEqual('healthy', self._state())

    def test_degrades_at_once_recovers_after_recovery_period(self):
        self._at(0)
        self.host.facts[GPU]['metrics']['temperature_c'] = 89
        self.health.dirty = True
        changed = self._at(60)
        self.assertEqual([(GPU, 'degraded')],
                         [(v.key, v.state) for v in changed])
        self.assertIn('slowdown threshold', changed[0].reasons[0])
        self.assertEqual('degraded', self._state())
        self.assertEqual('healthy', self._state(OTHER))
        # cool again at 120 s: held until 120 + recovery_period
        self._at(120)
        self.host.facts[GPU]['metrics']['temperature_c'] = 50
        self.health.dirty = True
        self.assertEqual([], self._at(120))
        self.assertTrue(self.health.active())
        self.assertEqual([], self._at(120 + self.recovery - 1))
        self.assertEqual('degraded', self._state())
        changed = self._at(120 + self.recovery)
        self.assertEqual([(GPU, 'healthy', [])],
                         [(v.key, v.state, v.reasons) for v in changed])
        self.assertFalse(self.health.active())
        self.assertEqual('healthy', self._state())

    def test_shutdown_threshold_is_unhealthy(self):
        self.host.facts[GPU]['metrics']['temperature_c'] = 95
        changed = self._at(10)
        self.assertEqual('unhealthy', changed[0].state)
        self.assertIn('shutdown threshold (92 C)', changed[0].reasons[0])

    def test_health_set_by_the_scenario_is_not_judged(self):
        self.host.facts[GPU]['metrics']['temperature_c'] = 95
        self.host.facts[GPU]['health'] = 'healthy'
        self.assertEqual([], self._at(10))
        inventory = base.HostInventory(host='cmp-1', gpus=[
            base.Gpu(pci_address=GPU, health=base.Health('degraded', ['x']))])
        self.health.apply(inventory)
        # the inventory keeps what the simulated source read
        self.assertEqual('degraded', inventory.gpus[0].health.state)

    def test_due_every_metrics_interval(self):
        interval = self.host.conf.agent.metrics_interval
        self._at(0)
        self.assertFalse(self.health.due(interval / 2))
        self.assertTrue(self.health.due(interval))
        self.health.dirty = True
        self.assertTrue(self.health.due(interval / 2))

    def test_fatal_xid_held_quiet_period_then_recovery_period(self):
        quiet = self.host.conf.health.xid_quiet_period
        self._at(0)
        self.health.xid(GPU, [79])
        self.assertTrue(self.health.due(1))
        changed = self._at(10)
        self.assertEqual([(GPU, 'unhealthy')],
                         [(v.key, v.state) for v in changed])
        self.assertEqual('XID 79: GPU has fallen off the bus',
                         changed[0].reasons[0])
        # seen once; held for the quiet period plus the recovery period
        self.assertEqual([], self._at(10 + quiet + self.recovery - 1))
        self.assertEqual('unhealthy', self._state())
        changed = self._at(10 + quiet + self.recovery)
        self.assertEqual('healthy', changed[0].state)
