# SPDX-License-Identifier: Apache-2.0

"""Remediation and the agent's health judge in ``gpu-nova-ext simulate``.

Real parts as in :mod:`.test_simulate` (embedded Placement, the agents'
cycles, Nova's scheduling code and our plugins), in a child process.
"""
import copy
import csv
import io
import json
import os
import tempfile

import testtools
import yaml

from gpu_nova_ext.simulate import scenario as scn
from gpu_nova_ext.tests.functional.simulate import test_simulate

REMEDIATION = os.path.join(scn.SCENARIO_DIR, 'remediation.yaml')
HOT_A100 = ('cmp-a100-1', '0000:3b:00.0')


def _run(argv):
    rc, out, err = test_simulate._command(argv)
    if rc != 0:
        raise AssertionError('simulate exited %d: %s' % (rc, err[-2000:]))
    return out, err


def _write(data):
    """A scenario file with the shipped host XML at absolute paths."""
    for host in data['hosts']:
        if 'libvirt_xml' in host:
            host['libvirt_xml'] = os.path.join(scn.SCENARIO_DIR,
                                               host['libvirt_xml'])
    with tempfile.NamedTemporaryFile('w', suffix='.yaml',
                                     delete=False) as f:
        yaml.safe_dump(data, f)
    return f.name


def _variant(boots=None, **remediation):
    with open(REMEDIATION) as f:
        data = yaml.safe_load(f)
    data['remediation'].update(remediation)
    for index, step in (boots or {}).items():
        data['boots'][index] = step
    return _write(data)


def _moves(path):
    out, _ = _run(['simulate', path, '--format', 'json'])
    data = json.loads(out)
    return {m['server']: m for m in data['remediation']}, data


class TestRemediation(testtools.TestCase):

    def _variant(self, boots=None, **remediation):
        path = _variant(boots, **remediation)
        self.addCleanup(os.unlink, path)
        return path

    def test_unhealthy_a100_servers_move_opted_out_stays_h100_stuck(self):
        moves, data = _moves(REMEDIATION)
        self.assertEqual({'train-1', 'train-2', 'pinned-1', 'big-1'},
                         set(moves))
        for name in ('train-1', 'train-2'):
            m = moves[name]
            self.assertEqual(
                ('moved', 'live-migrate', 'cmp-a100-1', ['0000:3b:00.0'],
                 'cmp-a100-2', ['0000:3b:00.0']),
                (m['outcome'], m['action'], m['from_host'],
                 m['from_gpus'], m['to_host'], m['to_gpus']), name)
        # max_concurrent_per_host 1: one move from cmp-a100-1 per step
        self.assertEqual(moves['train-1']['step'] + 1,
                         moves['train-2']['step'])
        pinned = moves['pinned-1']
        self.assertEqual(('skipped', None),
                         (pinned['outcome'], pinned['to_host']))
        self.assertIn('gpu_nova_ext:remediation=never', pinned['reason'])
        stuck = moves['big-1']
        self.assertEqual(('failed', 'cold-migrate', None),
                         (stuck['outcome'], stuck['action'],
                          stuck['to_host']))
        self.assertIn('No valid host', stuck['reason'])
        self.assertIn('CUSTOM_GPU_H100=1', stuck['reason'])
        # Placement as the moves left it: the migration consumers' source
        # allocations are gone, the failed move's are the server's again
        occ = {(o['host'], o['gpu']): o for o in data['occupancy']}
        self.assertEqual((1, 'unhealthy'), (occ[HOT_A100]['used'],
                                            occ[HOT_A100]['health']))
        self.assertEqual('healthy',
                         occ['cmp-a100-1', '0000:86:00.0']['health'])
        self.assertEqual(2, occ['cmp-a100-2', '0000:3b:00.0']['used'])
        self.assertEqual((1, 'unhealthy'),
                         (occ['cmp-h100', '0000:1b:00.0']['used'],
                          occ['cmp-h100', '0000:1b:00.0']['health']))
        # where the servers were booted stays in the placements
        boots = {p['server']: p['host'] for p in data['placements']}
        self.assertEqual('cmp-a100-1', boots['train-1'])

    def test_table_and_csv(self):
        out, err = _run(['simulate', REMEDIATION])
        lines = out.splitlines()
        header = next(i for i, line in enumerate(lines)
                      if line.startswith('MOVED SERVER'))
        body = lines[header + 1:]
        body = body[:body.index('')] if '' in body else body
        rows = {line.split()[0]: line for line in body}
        self.assertEqual({'pinned-1', 'train-1', 'train-2', 'big-1'},
                         set(rows))
        self.assertEqual(['cmp-a100-1', '0000:3b:00.0', 'cmp-a100-2',
                          '0000:3b:00.0', 'live-migrate'],
                         rows['train-1'].split()[1:])
        self.assertIn('SKIPPED: metadata gpu_nova_ext:remediation=never',
                      rows['pinned-1'])
        self.assertIn('FAILED: No valid host', rows['big-1'])
        self.assertIn('health -> unhealthy (agent: temperature at or above '
                      'shutdown threshold (92 C))', out)
        self.assertIn('health -> unhealthy (agent: XID 79: GPU has fallen '
                      'off the bus)', out)
        self.assertIn('remediation: train-1 live-migrate from cmp-a100-1',
                      err)
        out, _ = _run(['simulate', REMEDIATION, '--format', 'csv'])
        rows = list(csv.DictReader(io.StringIO(out)))
        moves = {r['server']: r for r in rows if r['record'] == 'move'}
        self.assertEqual(('cmp-a100-2', 'moved', 'cmp-a100-1'), (
            moves['train-2']['host'], moves['train-2']['outcome'],
            moves['train-2']['from_host']))
        self.assertEqual(5, sum(1 for r in rows if r['record'] == 'boot'))

    def test_a_health_event_triggers_too(self):
        """An event's ``health: unhealthy`` (not the judge) moves them."""
        moves, data = _moves(self._variant(boots={3: {'event': {
            'host': 'cmp-a100-1', 'gpu': '0000:3b:00.0',
            'health': 'unhealthy', 'reasons': ['XID 48']}}}))
        self.assertEqual(('moved', 'cmp-a100-2'),
                         (moves['train-1']['outcome'],
                          moves['train-1']['to_host']))
        self.assertEqual('skipped', moves['pinned-1']['outcome'])
        occ = {(o['host'], o['gpu']): o for o in data['occupancy']}
        self.assertEqual((1, 'unhealthy'), (occ[HOT_A100]['used'],
                                            occ[HOT_A100]['health']))

    def test_per_host_limit_two_moves_in_one_step(self):
        moves, _ = _moves(self._variant(max_concurrent_per_host=2))
        self.assertEqual(moves['train-1']['step'], moves['train-2']['step'])
        self.assertEqual('moved', moves['train-2']['outcome'])

    def test_notify_and_dry_run_move_nothing(self):
        moves, data = _moves(self._variant(policy='notify'))
        self.assertEqual({'train-1': 'notified', 'train-2': 'notified',
                          'pinned-1': 'skipped', 'big-1': 'notified'},
                         {k: m['outcome'] for k, m in moves.items()})
        occ = {(o['host'], o['gpu']): o for o in data['occupancy']}
        self.assertEqual(3, occ[HOT_A100]['used'])
        moves, _ = _moves(self._variant(enabled=False))
        self.assertEqual('would-live-migrate', moves['train-1']['outcome'])
        self.assertIsNone(moves['train-1']['to_host'])


HYSTERESIS = {
    'step_seconds': 60,
    'nova_conf': {'gpu_weights': {'packing_weight_multiplier': -10.0},
                  'gpu_scheduler': {'intra_host_policy': 'pack'}},
    'hosts': [{
        'name': 'cmp-1', 'libvirt_xml': 'hosts/cmp-a100.xml',
        'nova_gpu_mode': 'vgpu', 'enabled_mdev_types': ['nvidia-472'],
        'gpus': {address: {
            'name': 'NVIDIA A100 80GB PCIe', 'memory_mib': 81920,
            'slowdown_temperature_c': 87, 'shutdown_temperature_c': 92,
            'metrics': {'temperature_c': 50}}
            for address in ('0000:3b:00.0', '0000:86:00.0')}}],
    'flavors': [{'name': 'vgpu.a100', 'vcpus': 8, 'ram_mb': 32768,
                 'extra_specs': {'resources:VGPU': '1'}}],
    'boots': (
        [{'flavor': 'vgpu.a100', 'name': 's0'},
         {'event': {'host': 'cmp-1', 'gpu': '0000:3b:00.0',
                    'metrics': {'temperature_c': 89}}},      # t=120 s
         {'flavor': 'vgpu.a100', 'name': 's2'},
         {'event': {'host': 'cmp-1', 'gpu': '0000:3b:00.0',
                    'metrics': {'temperature_c': 50}}}] +    # t=240 s
        [{'flavor': 'vgpu.a100', 'name': 's%d' % i} for i in range(4, 10)]),
}


class TestHealthHysteresis(testtools.TestCase):

    def test_metrics_go_through_the_agents_judge_on_simulated_time(self):
        """Hot: degraded at once; cool: healthy recovery_period later.

        ``[health] recovery_period`` is 300 s and a step 60 s: the GPU
        cooled at the step of t=240 s recovers at the step of t=540 s, the
        boot of s8; until then GpuHealthFilter keeps servers off it.
        """
        path = _write(HYSTERESIS)
        self.addCleanup(os.unlink, path)
        out, _ = _run(['simulate', path])
        rows = [line.split(None, 4) for line in out.splitlines()
                if line.startswith(('s', '**'))]
        trail = [(r[0], r[-1] if r[0] == '**' else '%s %s' % (r[2], r[3]))
                 for r in rows if r[0] != 'SERVER']
        self.assertEqual([
            ('s0-1', 'cmp-1 0000:3b:00.0'),
            ('**', 'temperature_c -> 89.0'),
            ('**', 'health -> degraded (agent: temperature at or above '
                   'slowdown threshold (87 C))'),
            ('s2-1', 'cmp-1 0000:86:00.0'),
            ('**', 'temperature_c -> 50.0'),
            ('s4-1', 'cmp-1 0000:86:00.0'),
            ('s5-1', 'cmp-1 0000:86:00.0'),
            ('s6-1', 'cmp-1 0000:86:00.0'),
            ('s7-1', '- -'),
            ('**', 'health -> healthy (agent: no cause left)'),
            ('s8-1', 'cmp-1 0000:3b:00.0'),
            ('s9-1', 'cmp-1 0000:3b:00.0')], trail)
        s7 = next(line for line in out.splitlines()
                  if line.startswith('s7-1'))
        self.assertIn('GpuHealthFilter removed cmp-1', s7)

    def test_agent_conf_sets_the_judges_recovery_period(self):
        data = dict(HYSTERESIS,
                    agent_conf={'health': {'recovery_period': 120}})
        path = _write(copy.deepcopy(data))
        self.addCleanup(os.unlink, path)
        out, _ = _run(['simulate', path])
        order = [line.split()[0] + (' healthy' if 'health -> healthy' in
                                    line else '')
                 for line in out.splitlines()
                 if line.startswith(('s', '** event'))]
        # cooled at t=240 s: healthy at t=360 s, the step of s5 (with
        # the default 300 s, of s8)
        self.assertEqual(order.index('** healthy') + 1, order.index('s5-1'))
