# SPDX-License-Identifier: Apache-2.0

"""MIG layouts and power profiles in the simulator, end to end.

The host kinds' ``mig:`` lay out their A100s; the embedded Placement then
holds one provider per GPU instance in its profile's resource class, and
Nova's scheduler places flavors asking for those classes.  ``--compare``
runs the scenario's ``mig_variants:`` side by side.  ``power:`` gives the
GPUs of a host kind a profile that GpuPowerProfileFilter (in the
simulator's filter chain) holds ``gpu:power_profile`` flavors to.
"""
import os
import tempfile

import yaml

from gpu_nova_ext.simulate import scenario as scn
from gpu_nova_ext.tests.functional.simulate import test_cloud
from gpu_nova_ext.tests.functional.simulate import test_simulate

RC_1G = 'CUSTOM_VGPU_MIG_1G_10GB'
RC_2G = 'CUSTOM_VGPU_MIG_2G_20GB'


def _host(name, count=1, **extra):
    return dict({'name': name, 'count': count, 'vcpus': 128,
                 'memory_mb': 1048576, 'cpu_allocation_ratio': 1.0,
                 'gpus': [{'model': 'A100_80GB_PCIE', 'count': 1}]},
                **extra)


def _flavor(name, specs):
    return {'name': name, 'vcpus': 4, 'ram_mb': 8192, 'extra_specs': specs}


LAYOUTS = {
    'hosts': [_host('a100', mig='A100_80GB_PCIE:1g.10gb=7')],
    'mig_variants': {
        'sevens': {'a100': 'A100_80GB_PCIE:1g.10gb=7'},
        'mixed': {'a100': 'A100_80GB_PCIE:2g.20gb=3,1g.10gb=1'}},
    'flavors': [_flavor('g1', {'resources:%s' % RC_1G: 1}),
                _flavor('g2', {'resources:%s' % RC_2G: 1})],
    'boots': [{'flavor': 'g2', 'name': 'two', 'count': 4},
              {'flavor': 'g1', 'name': 'one', 'count': 2}],
}


class TestMigLayouts(test_cloud.CloudTestCase):

    def test_each_layout_places_what_its_instances_hold(self):
        data, _ = self.simulate(LAYOUTS, '--compare', 'sevens', 'mixed')
        runs = {run['policy']: run for run in data['policies']}
        self.assertEqual({'sevens', 'mixed'}, set(runs))
        placed = {name: sorted(s['server'] for s in run['placements']
                               if 'error' not in s)
                  for name, run in runs.items()}
        # seven 1g.10gb: no 2g.20gb instance, both 1g servers fit
        self.assertEqual(['one-1', 'one-2'], placed['sevens'])
        # three 2g.20gb and one 1g.10gb: three of four 2g, one of two 1g
        self.assertEqual(['one-1', 'two-1', 'two-2', 'two-3'],
                         placed['mixed'])
        failed = [s for s in runs['mixed']['placements'] if 'error' in s]
        self.assertEqual(['one-2', 'two-4'],
                         sorted(s['server'] for s in failed))
        self.assertIn(RC_1G, failed[0]['error'] + failed[1]['error'])
        # the GPU's providers in Placement: one per instance, per class
        occ = {name: run['occupancy'] for name, run in runs.items()}
        self.assertEqual(1, len(occ['mixed']))
        self.assertEqual('2g.20gb=3,1g.10gb=1', occ['mixed'][0]['mig_layout'])
        self.assertEqual({RC_1G: {'used': 1, 'total': 1},
                          RC_2G: {'used': 3, 'total': 3}},
                         occ['mixed'][0]['by_class'])
        self.assertEqual({RC_1G: {'used': 2, 'total': 7}},
                         occ['sevens'][0]['by_class'])
        # allocation rate in compute slices: 2 of 7, and 7 of 7
        self.assertEqual(28.57,
                         runs['sevens']['summary']['gpu_allocation_pct'])
        self.assertEqual(100.0,
                         runs['mixed']['summary']['gpu_allocation_pct'])
        self.assertEqual({'a100-0001': {
            'A100_80GB_PCIE': '2g.20gb=3,1g.10gb=1'}},
            runs['mixed']['mig_layouts'])

    def test_power_profile_flavors_only_where_the_profile_is(self):
        scenario = {
            'hosts': [
                _host('eff', mig='A100_80GB_PCIE:1g.10gb=7',
                      power='A100_80GB_PCIE:efficiency'),
                _host('perf', mig='A100_80GB_PCIE:1g.10gb=7',
                      power='*:max-performance')],
            'flavors': [
                _flavor('green', {'resources:%s' % RC_1G: 1,
                                  'gpu:power_profile': 'efficiency'}),
                _flavor('any', {'resources:%s' % RC_1G: 1})],
            'boots': [{'flavor': 'green', 'name': 'green', 'count': 8},
                      {'flavor': 'any', 'name': 'any', 'count': 2}],
        }
        data, _ = self.simulate(scenario)
        hosts = {s['server']: s.get('host') for s in data['placements']}
        # the efficiency host's seven instances, then no host allows it
        self.assertEqual(['eff-0001'] * 7,
                         [hosts['green-%d' % i] for i in range(1, 8)])
        self.assertIsNone(hosts['green-8'])
        # a flavor without the key goes where there is room
        self.assertEqual(['perf-0001'] * 2, [hosts['any-1'], hosts['any-2']])
        profiles = {o['host']: o['power_profile'] for o in data['occupancy']}
        self.assertEqual({'eff-0001': 'efficiency',
                          'perf-0001': 'max-performance'}, profiles)

    def test_without_our_filters_a_power_flavor_is_misplaced(self):
        scenario = {
            'hosts': [
                _host('eff', mig='A100_80GB_PCIE:1g.10gb=7',
                      power='A100_80GB_PCIE:efficiency'),
                _host('perf', mig='A100_80GB_PCIE:1g.10gb=7')],
            'flavors': [_flavor('green', {'resources:%s' % RC_1G: 1,
                                          'gpu:power_profile': 'efficiency'})],
            'boots': [{'flavor': 'green', 'name': 'green', 'count': 6}],
        }
        data, err = self.simulate(scenario, '--compare', 'pack', 'nova')
        runs = {run['policy']: run for run in data['policies']}
        for server in runs['pack']['placements']:
            self.assertEqual('eff-0001', server['host'])
            self.assertNotIn('misplaced', server)
        # Nova's own filters cannot read gpu:power_profile
        on_perf = [s for s in runs['nova']['placements']
                   if s['host'] == 'perf-0001']
        self.assertTrue(on_perf)
        for server in runs['nova']['placements']:
            if server['host'] == 'perf-0001':
                self.assertIn('does not meet power profile efficiency',
                              server['misplaced'])
            else:
                self.assertNotIn('misplaced', server)
        self.assertEqual(len(on_perf),
                         runs['nova']['summary']['servers_misplaced'])


class TestMigRefused(test_cloud.CloudTestCase):

    def _refused(self, scenario):
        with tempfile.NamedTemporaryFile('w', suffix='.yaml',
                                         delete=False) as f:
            yaml.safe_dump(scenario, f)
        self.addCleanup(os.unlink, f.name)
        rc, out, err = test_simulate._cli(['simulate', f.name])
        self.assertEqual(2, rc)
        self.assertEqual('', out)
        self.assertNotIn('Traceback', err)
        lines = err.strip().splitlines()
        self.assertEqual(1, len(lines), err)
        return lines[0]

    def test_bad_layout_one_line_naming_kind_model_and_profile(self):
        line = self._refused(dict(LAYOUTS, hosts=[
            _host('a100', mig='A100_80GB_PCIE:1g.5gb=7')]))
        self.assertIn('hosts[0].mig:', line)
        self.assertIn('GPU model A100_80GB_PCIE has no MIG profile '
                      "'1g.5gb'", line)

    def test_too_many_slices_refused(self):
        line = self._refused(dict(LAYOUTS, hosts=[
            _host('a100', mig='A100_80GB_PCIE:3g.40gb=2,1g.10gb=1')]))
        self.assertIn('hosts[0].mig:', line)
        self.assertIn('GPU model A100_80GB_PCIE cannot hold '
                      '3g.40gb=2,1g.10gb=1', line)

    def test_bad_variant_refused_before_any_run(self):
        line = self._refused(dict(LAYOUTS, mig_variants={
            'big': {'a100': 'A100_80GB_PCIE:7g.80gb=2'}}))
        self.assertIn('mig_variants.big.a100:', line)
        self.assertIn('A100_80GB_PCIE holds at most 1 instance(s) of MIG '
                      'profile 7g.80gb', line)

    def test_bad_power_profile_refused(self):
        line = self._refused(dict(LAYOUTS, hosts=[
            _host('a100', mig='A100_80GB_PCIE:1g.10gb=7',
                  power='A100_80GB_PCIE:5000W')]))
        self.assertIn('hosts[0].power:', line)
        self.assertIn("'A100_80GB_PCIE:5000W'", line)
        self.assertIn('a limit in watts must be 10 to 2000', line)

    def test_shipped_comparison_scenario_loads_each_variant(self):
        path = os.path.join(scn.SCENARIO_DIR, 'mig-a100.yaml')
        for variant, kinds in scn.load(path).mig_variants.items():
            scenario = scn.load(path, mig_variant=variant)
            self.assertEqual(kinds['a100'].partition(':')[2],
                             scenario.hosts[0].mig_layouts['A100_80GB_PCIE'])
