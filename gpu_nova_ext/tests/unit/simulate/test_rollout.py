# SPDX-License-Identifier: Apache-2.0

"""The ``rollout:`` step: its checks, and small roll-outs played on the
simulator's real parts (embedded Placement, the agents' cycles, Nova's
scheduling and migration code, ``openstack gpu rollout plan``'s batching).
"""
import copy
import csv
import io
import json
import os

import testtools

from gpu_nova_ext import exception
from gpu_nova_ext.simulate import output
from gpu_nova_ext.simulate import runner
from gpu_nova_ext.simulate import scenario as scn
from gpu_nova_ext.simulate import steps
from gpu_nova_ext.tests.unit.simulate import test_scenario

PATH = test_scenario.PATH
TARGET = '570.86.10'
PINNED = {'gpu_nova_ext:remediation': 'never'}


def _data(rollout, hosts=None, boots_before=(), boots_after=()):
    data = copy.deepcopy(test_scenario.BASE)
    if hosts is not None:
        data['hosts'] = hosts
    data['boots'] = (list(boots_before) + [{'rollout': rollout}] +
                     list(boots_after))
    return data


def _kind(name, count, gpus, mode, **more):
    gpu = {'model': 'A100_80GB_PCIE' if mode == 'vgpu' else
           'H100_80GB_HBM3', 'count': gpus, 'mode': mode,
           'driver_version': '550.54.15'}
    gpu.update(more)
    return {'name': name, 'count': count, 'vcpus': 128,
            'memory_mb': 1048576, 'gpus': [gpu]}


A100 = _kind('a100', 4, 1, 'vgpu', vgpu_type='nvidia-472',
             vgpu_name='A100D-20C')         # 4 vGPUs a host
H100 = _kind('h100', 2, 1, 'passthrough')
FLAVORS = [
    {'name': 'vgpu.a100', 'vcpus': 4, 'ram_mb': 16384,
     'extra_specs': {'resources:VGPU': '1', 'gpu:model': 'A100'}},
    {'name': 'pt.h100', 'vcpus': 8, 'ram_mb': 65536,
     'extra_specs': {'pci_passthrough:alias': 'h100:1'}},
]
NOVA_CONF = {
    'gpu_weights': {'packing_weight_multiplier': -10.0},
    'pci': {'alias': [{'name': 'h100',
                       'resource_class': 'CUSTOM_PCI_10DE_2330',
                       'device_type': 'type-PCI'}]},
}


class TestRolloutStep(testtools.TestCase):
    """What the scenario loader makes of a ``rollout:`` entry."""

    def assertError(self, data, entry, *words):
        exc = self.assertRaises(exception.ScenarioError, scn.from_dict,
                                data, PATH)
        message = str(exc)
        self.assertIn(PATH, message)
        self.assertIn(entry + ':', message)
        for word in words:
            self.assertIn(word, message)
        self.assertEqual(1, len(message.splitlines()))

    def test_defaults(self):
        s = scn.from_dict(_data({'driver': TARGET, 'max_unavailable': 25}),
                          PATH)
        self.assertEqual(steps.Rollout(
            driver=TARGET, max_unavailable=25.0, hosts=None, model=None,
            upgrade_steps=steps.DEFAULT_UPGRADE_STEPS, index=0), s.steps[0])

    def test_values(self):
        s = scn.from_dict(_data({'driver': 570, 'max_unavailable': 12.5,
                                 'hosts': 'cmp-, cmp-1', 'model': 'A100',
                                 'upgrade_steps': 5}), PATH)
        self.assertEqual(('570', 12.5, ['cmp-', 'cmp-1'], 'A100', 5), (
            s.steps[0].driver, s.steps[0].max_unavailable,
            s.steps[0].hosts, s.steps[0].model, s.steps[0].upgrade_steps))

    def test_missing_key_is_named(self):
        self.assertError(_data({'driver': TARGET}), 'boots[0].rollout',
                         "'max_unavailable'")

    def test_unknown_key_is_named_with_the_allowed_ones(self):
        self.assertError(_data({'driver': TARGET, 'max_unavailable': 25,
                                'max_unavail': 10}), 'boots[0].rollout',
                         "'max_unavail'", 'upgrade_steps')

    def test_out_of_range_percent(self):
        self.assertError(_data({'driver': TARGET, 'max_unavailable': 120}),
                         'boots[0].rollout.max_unavailable', '100')
        self.assertError(_data({'driver': TARGET, 'max_unavailable': 0}),
                         'boots[0].rollout.max_unavailable', 'above 0')

    def test_bad_driver(self):
        self.assertError(_data({'driver': 'latest', 'max_unavailable': 25}),
                         'boots[0].rollout.driver', "'latest'",
                         '570.86.10')
        # 570.86 unquoted is a YAML float: quote a version
        self.assertError(_data({'driver': 570.86, 'max_unavailable': 25}),
                         'boots[0].rollout.driver', 'quoted')

    def test_zero_upgrade_steps(self):
        self.assertError(_data({'driver': TARGET, 'max_unavailable': 25,
                                'upgrade_steps': 0}),
                         'boots[0].rollout.upgrade_steps', 'at least 1')

    def test_unknown_host_prefix(self):
        self.assertError(_data({'driver': TARGET, 'max_unavailable': 25,
                                'hosts': ['cmp-', 'gpu-']}),
                         'boots[0].rollout.hosts[1]', "'gpu-'", 'cmp-1')

    def test_boot_keys_beside_it(self):
        data = _data({'driver': TARGET, 'max_unavailable': 25})
        data['boots'][0]['flavor'] = 'vgpu.a100'
        self.assertError(data, 'boots[0]', 'holds nothing else')

    def test_shipped_scenario(self):
        s = scn.load(os.path.join(scn.SCENARIO_DIR, 'rollout.yaml'))
        rollouts = [x for x in s.steps if isinstance(x, steps.Rollout)]
        self.assertEqual([(TARGET, 25.0, 3)], [
            (r.driver, r.max_unavailable, r.upgrade_steps)
            for r in rollouts])
        self.assertEqual(24, len(s.hosts))
        self.assertIsNotNone(s.workload)

    def test_one_rollout_a_scenario(self):
        rollout = {'driver': TARGET, 'max_unavailable': 25}
        self.assertError(_data(rollout, boots_after=[{'rollout': rollout}]),
                         'boots[1].rollout', 'at most one')


def _run(data):
    """Play ``data``; the Simulation (its hosts) and the result."""
    sim = runner.Simulation(scn.from_dict(data, PATH))
    return sim, sim.run()


class TestRolloutRun(testtools.TestCase):
    """A100 vGPU hosts, 50 % out at once, a server that may not move."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        data = _data(
            {'driver': TARGET, 'max_unavailable': 50, 'upgrade_steps': 2},
            hosts=[A100],
            boots_before=[
                {'flavor': 'vgpu.a100', 'count': 6, 'name': 'a'},
                # packing puts it beside a-5 and a-6, on a100-0002
                {'flavor': 'vgpu.a100', 'name': 'pinned', 'lifetime': 8,
                 'metadata': PINNED}],
            boots_after=[{'flavor': 'vgpu.a100', 'count': 4,
                          'name': 'during'}])
        data['flavors'] = FLAVORS
        data['nova_conf'] = NOVA_CONF
        cls.sim, cls.result = _run(data)
        cls.rollout = cls.result.rollout

    def test_waves_respect_the_guard(self):
        r = self.rollout
        pool = 'A100_80GB_PCIE vgpu'
        self.assertEqual({pool: 16}, r.totals)
        self.assertEqual({pool: 8}, r.allowed)
        self.assertEqual([['a100-0001', 'a100-0002'],
                          ['a100-0003', 'a100-0004']],
                         [w.hosts for w in r.waves])
        for wave in r.waves:
            self.assertLessEqual(wave.peak_out[pool], r.allowed[pool])
        self.assertEqual({pool: 8}, r.peak_out)
        self.assertLessEqual(r.peak_pct()[pool], 50.0)

    def test_every_host_ends_on_the_new_driver_and_enabled(self):
        r = self.rollout
        self.assertIsNone(r.stopped)
        self.assertEqual(sorted(self.sim.hosts), sorted(r.upgraded))
        for host in self.sim.hosts.values():
            self.assertEqual({TARGET}, {g['driver_version']
                                        for g in host.payload['gpus']},
                             host.name)
        # back in service: wave 2's servers moved to the first wave's
        # hosts
        used = {o.host: o.used for o in self.result.occupancy}
        self.assertEqual({'a100-0001': 4, 'a100-0002': 4, 'a100-0003': 0,
                          'a100-0004': 0}, used)

    def test_boots_while_a_wave_is_out_fail_and_are_counted(self):
        # 16 vGPUs, 8 out with wave 1: a-1..a-6 moved and during-1, -2
        # fill the 8 left
        first = self.rollout.waves[0]
        self.assertEqual(['during-3', 'during-4'], first.failed_boots)
        self.assertEqual(2, self.rollout.failed_boots)
        self.assertEqual({'during-3', 'during-4'}, {
            s.server for s in self.result.servers if s.error})

    def test_server_that_may_not_move_keeps_its_host_in_the_wave(self):
        first = self.rollout.waves[0]
        self.assertEqual(
            {'pinned-1': 'metadata gpu_nova_ext:remediation=never'},
            first.staying)
        placed = {s.server: s.host for s in self.result.servers}
        self.assertEqual('a100-0002', placed['pinned-1'])
        # booted at step 7, deleted 8 steps later: only then a100-0002
        # could be upgraded (2 steps), and the wave end
        self.assertEqual(15 + 2, first.ended)
        self.assertEqual(first.ended, self.rollout.waves[1].started)
        self.assertNotIn('pinned-1', first.moved)
        self.assertEqual(['a-1', 'a-2', 'a-3', 'a-4', 'a-5', 'a-6'],
                         first.moved)

    def test_table_json_and_csv(self):
        table = output.to_table([self.result])
        self.assertIn('ROLL-OUT to driver %s, at most 50%% of each GPU '
                      'pool out' % TARGET, table)
        self.assertIn('stays  pinned-1: metadata '
                      'gpu_nova_ext:remediation=never', table)
        self.assertRegex(table, r'peak out A100_80GB_PCIE vgpu +8 of 16 '
                         r'\(50\.0%\), at most 8')
        self.assertRegex(table, r'failed boots during the roll-out +2')
        doc = json.loads(output.to_json([self.result]))['rollout']
        self.assertEqual({'capacity': 8, 'of': 16, 'pct': 50.0},
                         doc['waves'][0]['peak_out']['A100_80GB_PCIE vgpu'])
        self.assertEqual(2, doc['failed_boots'])
        self.assertEqual(['during-3', 'during-4'],
                         doc['waves'][0]['failed_boots'])
        rows = list(csv.DictReader(io.StringIO(
            output.to_csv([self.result]))))
        waves = [r for r in rows if r['record'] == 'wave']
        self.assertEqual(['1', '2'], [w['wave'] for w in waves])
        self.assertEqual('A100_80GB_PCIE vgpu=50.00',
                         waves[0]['peak_out_pct'])
        self.assertIn('pinned-1: metadata', waves[0]['staying'])
        moves = [r for r in rows if r['record'] == 'move']
        self.assertIn('a-1', [m['server'] for m in moves])


class TestRolloutTakesTheOnlyCapacity(testtools.TestCase):
    """Two one-GPU H100 hosts, one out at a time: boots then fail."""

    def test_failed_boots_are_counted_against_the_wave(self):
        data = _data(
            {'driver': TARGET, 'max_unavailable': 50},
            hosts=[H100],
            boots_before=[{'flavor': 'pt.h100', 'name': 'first'}],
            boots_after=[{'flavor': 'pt.h100', 'count': 2,
                          'name': 'late'}])
        data['flavors'] = FLAVORS
        data['nova_conf'] = NOVA_CONF
        _, result = _run(data)
        r = result.rollout
        self.assertEqual({'H100_80GB_HBM3 passthrough': 1}, r.allowed)
        self.assertEqual(2, len(r.waves))
        self.assertEqual(['late-1', 'late-2'], r.waves[0].failed_boots)
        self.assertEqual([], r.waves[1].failed_boots)
        self.assertEqual(2, r.failed_boots)
        failed = {s.server: s.error for s in result.servers if s.error}
        self.assertEqual({'late-1', 'late-2'}, set(failed))
        self.assertIn('No valid host', failed['late-1'])
        self.assertLessEqual(r.peak_out['H100_80GB_HBM3 passthrough'], 1)
        self.assertEqual(['h100-0001', 'h100-0002'], sorted(r.upgraded))
        self.assertRegex(output.to_table([result]),
                         r'failed boots during the roll-out +2')

    def test_guard_refuses_a_wave_while_other_capacity_is_out(self):
        # h100-0002's only GPU is unhealthy: with h100-0001 out too, half
        # the pool would be out and more
        data = _data(
            {'driver': TARGET, 'max_unavailable': 50},
            hosts=[H100],
            boots_before=[{'event': {'host': 'h100-0002',
                                     'gpu': '0000:10:00.0',
                                     'health': 'unhealthy'}}],
            boots_after=[{'flavor': 'pt.h100', 'name': 'late'}])
        data['flavors'] = FLAVORS
        data['nova_conf'] = NOVA_CONF
        _, result = _run(data)
        r = result.rollout
        self.assertIsNone(r.waves[0].started)
        self.assertIn('wave 1 not started', r.stopped)
        self.assertIn('h100-0002 GPU 0000:10:00.0 (unhealthy)', r.stopped)
        self.assertEqual([], r.upgraded)
        self.assertEqual({}, r.peak_out)
        self.assertEqual(0, r.failed_boots)
        self.assertIn('stopped', output.to_table([result]))
