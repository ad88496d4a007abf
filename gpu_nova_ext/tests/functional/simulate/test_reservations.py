# SPDX-License-Identifier: Apache-2.0

"""The scenario key ``reservations:`` end to end (issue 20.3): the real
reserve code writes the trait into the embedded Placement, the agent's
cycle reads it, the scheduler's filters and weighers act on it."""
import json

import testtools

from gpu_nova_ext.tests.functional.simulate import cli

SCENARIO = {
    'description': 'one A100 of cmp-1 kept for team-a, cmp-2 for team-b',
    'hosts': [{'name': name, 'gpus': [
        {'model': 'A100_80GB_PCIE', 'count': 2, 'mode': 'vgpu',
         'vgpu_type': 'nvidia-471', 'vgpu_name': 'A100D-10C'}]}
        for name in ('cmp-1', 'cmp-2')],
    'flavors': [{'name': 'vgpu', 'vcpus': 4, 'ram_mb': 8192,
                 'extra_specs': {'resources:VGPU': '1'}}],
    'reservations': [
        {'project': 'team-a', 'host': 'cmp-1', 'gpu': '0000:12:00.0'},
        {'project': 'team-b', 'host': 'cmp-2'}],
    'boots': [{'flavor': 'vgpu', 'count': 2, 'project': 'team-c',
               'name': 'c'},
              {'flavor': 'vgpu', 'count': 2, 'project': 'team-a',
               'name': 'a'},
              {'flavor': 'vgpu', 'count': 1, 'project': 'team-b',
               'name': 'b'}],
}


class TestReservations(testtools.TestCase):

    def test_reserved_gpu_and_host_go_to_their_projects(self):
        rc, out, err = cli.simulate(SCENARIO, '--format', 'json')
        self.assertEqual(0, rc, err)
        data = json.loads(out)
        where = {p['server']: (p['host'], p['gpus'], p.get('project'))
                 for p in data['placements']}
        # team-c: never on cmp-1's reserved GPU nor on team-b's host
        for name in ('c-1', 'c-2'):
            self.assertEqual(('cmp-1', ['0000:10:00.0'], 'team-c'),
                             where[name])
        # team-a: its GPU first, though binpacking prefers 10:00.0 now
        for name in ('a-1', 'a-2'):
            self.assertEqual(('cmp-1', ['0000:12:00.0'], 'team-a'),
                             where[name])
        self.assertEqual('cmp-2', where['b-1'][0])
        rows = {(r['host'], r['gpu']): r for r in data['reservations']}
        gpu = rows[('cmp-1', '0000:12:00.0')]
        self.assertEqual((['a-1', 'a-2'], [], ['c-1', 'c-2']),
                         (gpu['servers'], gpu['other_projects_servers'],
                          gpu['kept_off']))
        host = rows[('cmp-2', '(whole host)')]
        self.assertEqual((['b-1'], []),
                         (host['servers'], host['other_projects_servers']))

    def test_table_shows_who_got_it(self):
        rc, out, err = cli.simulate(SCENARIO)
        self.assertEqual(0, rc, err)
        self.assertIn('RESERVATIONS', out)
        self.assertIn('cmp-1 0000:12:00.0 for team-a: its servers there: '
                      'a-1, a-2; other projects\' servers there: none; kept '
                      'off by GpuReservationFilter on that host: c-1, c-2',
                      out)

    def test_operator_filters_without_isolation_said(self):
        scenario = dict(SCENARIO, nova_conf={'filter_scheduler': {
            'enabled_filters': ['ComputeFilter', 'GpuReservationFilter']}})
        rc, out, err = cli.simulate(scenario)
        self.assertEqual(0, rc, err)
        self.assertIn('NOT ENFORCED: AggregateMultiTenancyIsolation is not '
                      'in nova_conf enabled_filters', out)

    def test_bad_reservations_stop_before_any_boot(self):
        for entry, says in (
                ({'project': 'team-a', 'host': 'nosuch'},
                 "unknown host 'nosuch'"),
                ({'project': 'team-a', 'host': 'cmp-1',
                  'gpu': '0000:3b:00.0'},
                 'host cmp-1 has no GPU 0000:3b:00.0 (GPUs: 0000:10:00.0, '
                 '0000:12:00.0)'),
                ({'project': 'two words', 'host': 'cmp-1'},
                 'reservations[0].project'),
                ({'project': 'team-a', 'host': 'cmp-1', 'rack': 7},
                 'rack')):
            rc, out, err = cli.simulate(dict(SCENARIO, reservations=[entry]))
            self.assertEqual(2, rc, entry)
            self.assertIn(says, err)
            self.assertEqual(1, len(err.strip().splitlines()), err)


MOVES = {
    'description': 'remediation moves keep to the reservations',
    'remediation': {'policy': 'migrate'},
    'hosts': [{'name': name, 'gpus': [
        {'model': 'A100_80GB_PCIE', 'count': 2, 'mode': 'vgpu',
         'vgpu_type': 'nvidia-471', 'vgpu_instances': 1}]}
        for name in ('cmp-1', 'cmp-2')],
    'flavors': [{'name': 'vgpu', 'vcpus': 4, 'ram_mb': 8192,
                 'extra_specs': {'resources:VGPU': '1'}}],
    'reservations': [
        {'project': 'team-a', 'host': 'cmp-2', 'gpu': '0000:10:00.0'},
        {'project': 'team-b', 'host': 'cmp-2', 'gpu': '0000:12:00.0'}],
    'boots': [{'flavor': 'vgpu', 'count': 2, 'project': 'team-a',
               'name': 'a'},
              {'flavor': 'vgpu', 'count': 1, 'project': 'team-c',
               'name': 'c'},
              {'delete': 'a-1'},
              {'event': {'host': 'cmp-1', 'gpu': '0000:10:00.0',
                         'health': 'unhealthy'}},
              {'event': {'host': 'cmp-1', 'gpu': '0000:12:00.0',
                         'health': 'unhealthy'}}],
}


class TestReservedMoves(testtools.TestCase):

    def test_a_move_keeps_the_servers_project(self):
        rc, out, err = cli.simulate(MOVES, '--format', 'json')
        self.assertEqual(0, rc, err)
        data = json.loads(out)
        where = {p['server']: p['host'] for p in data['placements']}
        # team-a's first server takes its reserved GPU, the second the
        # shared host; team-c only fits on the shared host
        self.assertEqual({'a-1': 'cmp-2', 'a-2': 'cmp-1', 'c-1': 'cmp-1'},
                         {k: where[k] for k in ('a-1', 'a-2', 'c-1')})
        moves = {m['server']: m for m in data['remediation']}
        # a-2 moves onto team-a's GPU that a-1 left: the move is asked
        # for the server's own project, as Nova's RequestSpec carries it
        self.assertEqual(('moved', 'cmp-2', ['0000:10:00.0']),
                         (moves['a-2']['outcome'], moves['a-2']['to_host'],
                          moves['a-2']['to_gpus']))
        # team-c may take neither reserved GPU: nowhere to go, said
        self.assertEqual('failed', moves['c-1']['outcome'])
        self.assertIn('GpuReservationFilter removed cmp-2',
                      moves['c-1']['reason'])
        # the reservation rows count a moved server where it went
        rows = {(r['host'], r['gpu']): r for r in data['reservations']}
        team_a = rows[('cmp-2', '0000:10:00.0')]
        self.assertEqual((['a-1', 'a-2'], []),
                         (team_a['servers'], team_a['own_servers_elsewhere']))
