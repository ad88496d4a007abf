# SPDX-License-Identifier: Apache-2.0

"""--compare's curve: allocation at arrived loads, the spread of seeds."""
import csv
import io

import testtools

from gpu_nova_ext import exception
from gpu_nova_ext.simulate import metrics
from gpu_nova_ext.simulate import output
from gpu_nova_ext.simulate import result as runner
from gpu_nova_ext.simulate import scenario as scn
from gpu_nova_ext.simulate import steps


def _scenario(workload=None):
    return scn.Scenario(path='/s.yaml', description='', nova_conf={},
                        hosts=[], flavors={}, steps=[], workload=workload)


def _result(policy, curve, first=None, multi=(1, 2)):
    r = runner.Result(scenario=_scenario(), policy=policy)
    r.servers = [runner.ServerResult(server='s-%d' % i, flavor='f',
                                     host='h', arrived_pct=a)
                 for i, (a, _, _) in enumerate(curve)]
    r.curve = list(curve)
    r.summary = {
        'servers_placed': len(curve), 'servers_misplaced': 0,
        'servers_failed': 0, 'gpu_allocation_pct': curve[-1][1],
        'gpu_allocation_pct_without_misplaced': curve[-1][1],
        'arrived_pct': curve[-1][0], 'first_gpu_failure': first,
        'allocation_at': metrics.allocation_at(curve),
        'fragmentation_pct': 0.0, 'fully_free_gpu_hosts': 0,
        'multi_gpu_servers': multi[0], 'multi_gpu_arrived': multi[1],
        'multi_gpu_not_in_one_link_domain': 0,
        'multi_gpu_across_numa_nodes': 0, 'hosts_missing_state': 0,
        'usage_by_model': {}}
    return r


# arrived %, allocation %, allocation without misplaced %
CURVE = [(45.0, 45.0, 45.0), (55.0, 55.0, 55.0), (75.0, 74.0, 74.0),
         (101.0, 96.0, 96.0), (131.0, 97.0, 97.0)]


class TestCurve(testtools.TestCase):

    def test_allocation_once_the_load_reached_each_mark(self):
        points = {p['arrived_pct']: p['gpu_allocation_pct']
                  for p in metrics.allocation_at(CURVE)}
        self.assertEqual(list(range(50, 131, 10)), list(points))
        # 50: after the boot that brought it to 55; 70 and 80 wait for
        # 75 and 101; 130 for the last boot
        self.assertEqual({50: 55.0, 60: 74.0, 70: 74.0, 80: 96.0, 90: 96.0,
                          100: 96.0, 110: 97.0, 120: 97.0, 130: 97.0},
                         points)

    def test_a_mark_never_reached_is_none(self):
        points = metrics.allocation_at(CURVE[:2])
        self.assertEqual(55.0, points[0]['gpu_allocation_pct'])
        self.assertIsNone(points[-1]['gpu_allocation_pct'])

    def test_compare_table_has_the_curve_and_multi_gpu_servers(self):
        table = '\n'.join(output.compare_table([
            _result('pack', CURVE, multi=(1, 3)),
            _result('frag', CURVE[:4], multi=(3, 3))]))
        line = next(x for x in table.splitlines()
                    if x.startswith('GPU allocation at 100% arrived'))
        self.assertEqual(['96.0%', '96.0%'], line.split()[-2:])
        line = next(x for x in table.splitlines()
                    if x.startswith('GPU allocation at 130% arrived'))
        self.assertEqual(['97.0%', '-'], line.split()[-2:])
        self.assertIn('1 of 3', table)
        self.assertIn('3 of 3', table)

    def test_csv_has_the_allocation_after_each_boot(self):
        text = output.to_csv([_result('pack', CURVE)])
        rows = list(csv.DictReader(io.StringIO(text)))
        self.assertEqual(['45.00', '55.00', '74.00', '96.00', '97.00'],
                         [r['gpu_allocation_pct'] for r in rows])
        self.assertEqual('101.00', rows[3]['arrived_pct'])

    def test_spread_over_seeds(self):
        first = {'arrived_pct': 80.0, 'gpu_allocation_pct': 79.0,
                 'server': 's', 'flavor': 'f', 'fragmentation_pct': 0.0}
        runs = {
            1: [_result('frag', CURVE, first=first, multi=(2, 2))],
            2: [_result('frag', [(a, y - 2, z) for a, y, z in CURVE],
                        multi=(1, 2))],
            3: [_result('frag', [(a, y + 1, z) for a, y, z in CURVE],
                        first=dict(first, arrived_pct=90.0), multi=(2, 3))],
        }
        figures = output.spread(runs)['frag']
        self.assertEqual({'min': 94.0, 'median': 96.0, 'max': 97.0},
                         figures['gpu_allocation_at_100'])
        # no failure: the whole arrived load (131 %) was placed
        self.assertEqual({'min': 80.0, 'median': 90.0, 'max': 131.0},
                         figures['first_gpu_failure_arrived'])
        self.assertEqual({'min': 1, 'median': 2, 'max': 2},
                         figures['multi_gpu_placed'])
        table = '\n'.join(output.spread_table(runs))
        self.assertIn('3 seeds (1, 2, 3): min / median / max', table)
        self.assertIn('94.0 / 96.0 / 97.0', table)

    def test_with_seed(self):
        work = steps.Workload(flavors={'f': 1.0}, seed=42)
        seeded = scn.with_seed(_scenario(work), 7)
        self.assertEqual(7, seeded.workload.seed)
        self.assertEqual(42, work.seed)
        exc = self.assertRaises(exception.ConfigError, scn.with_seed,
                                _scenario(), 7)
        self.assertIn('has none', str(exc))

    def test_seeds_listing(self):
        runs = {1: [_result('pack', CURVE), _result('frag', CURVE)],
                2: [_result('pack', CURVE[:3]), _result('frag', CURVE)]}
        listing = output.seeds_listing(runs)
        self.assertEqual('seed', listing.columns[0])
        self.assertEqual([1] * 10 + [2] * 8, [r[0] for r in listing.rows])
        self.assertEqual({'1', '2'}, set(listing.document['seeds']))
        self.assertEqual(['pack', 'frag'], list(listing.document['spread']))
        report = listing.report()
        self.assertIn('== seed 2 ==', report)
        self.assertIn('2 seeds (1, 2)', report)
