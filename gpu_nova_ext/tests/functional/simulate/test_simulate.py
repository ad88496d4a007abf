# SPDX-License-Identifier: Apache-2.0

"""``gpu-nova-ext simulate`` end to end on real parts.

Embedded openstack-placement, libvirt's test driver, the agent's cycle,
the state channel over fake://, Nova's scheduler code with our plugins.

The simulations run in a child process, as an operator runs the command:
a test process of this suite may have been monkey-patched by eventlet
(Nova's functional harness does it at import), and a real HTTP server
thread started there cannot serve.
"""
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile

import testtools
import yaml

from gpu_nova_ext.cmd import cli
from gpu_nova_ext.simulate import scenario as scn
from gpu_nova_ext.tests import deadline

UNHEALTHY_GPU = ('cmp-a100', '0000:3b:00.0')
TIMEOUT = deadline.WAIT_S


def _cli(argv):
    """In process: for runs that stop before any service starts."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(argv)
    return rc, out.getvalue(), err.getvalue()


def _command(argv):
    """``gpu-nova-ext ARGV`` in a child process (no eventlet there)."""
    proc = subprocess.run(
        [sys.executable, '-m', 'gpu_nova_ext.cmd.cli'] + argv,
        capture_output=True, text=True, timeout=TIMEOUT)
    return proc.returncode, proc.stdout, proc.stderr


class TestDefaultScenario(testtools.TestCase):

    def test_default_scenario_json(self):
        rc, out, err = _command(['simulate', '--format', 'json'])
        self.assertEqual(0, rc, err)
        data = json.loads(out)       # stdout holds the JSON and nothing else
        self.assertEqual(['missing_state', 'occupancy', 'placements',
                          'summary'], sorted(data))
        self.assertEqual([], data['missing_state'])
        placements = data['placements']
        self.assertEqual(13, len(placements))
        for p in placements:
            if 'error' in p:
                self.assertEqual({'server', 'flavor', 'error'}, set(p))
            else:
                self.assertEqual({'server', 'flavor', 'host', 'gpus',
                                  'weights'}, set(p))
                for name, value in p['weights'].items():
                    self.assertIsInstance(value, float, name)
        for o in data['occupancy']:
            self.assertEqual({'host', 'gpu', 'model', 'used', 'total',
                              'health', 'state'}, set(o))
            self.assertEqual('live', o['state'])
        by_name = {p['server']: p for p in placements}

        def where(server):
            p = by_name[server]
            return p.get('host'), p.get('gpus')

        # binpack: the first A100 GPU is filled before the second one
        for i in (1, 2, 3):
            self.assertEqual(('cmp-a100', ['0000:3b:00.0']),
                             where('vgpu.a100-%d' % i))
        # gpu:model=L4 keeps the T4 (same host, same VGPU class) out, and
        # pack keeps both on one L4
        for i in (1, 2):
            self.assertEqual(('cmp-l4t4', ['0000:17:00.0']),
                             where('vgpu.l4-%d' % i))
        # passthrough through PCI in Placement
        self.assertEqual(('cmp-h100', ['0000:1b:00.0']), where('pt.h100-1'))
        # after the event the unhealthy A100 is never chosen, though its
        # pGPU still has a free vGPU in Placement (3 of 4 used, below)
        names = [p['server'] for p in placements]
        after_event = names[names.index('pt.h100-1') + 1:]
        self.assertEqual(['vgpu.a100-4', 'vgpu.a100-5', 'vgpu.small-1',
                          'vgpu.small-2', 'pt.h100-2', 'pt.h100-3',
                          'm1.large-1'], after_event)
        for server in after_event:
            p = by_name[server]
            self.assertNotIn('0000:3b:00.0', p.get('gpus', []), server)
        self.assertEqual(('cmp-a100', ['0000:86:00.0']), where('vgpu.a100-4'))
        self.assertEqual(('cmp-a100', ['0000:86:00.0']), where('vgpu.a100-5'))
        # any 4 GiB vGPU: binpack takes the fullest host and GPU that is
        # healthy, over the emptier L4/T4 host
        self.assertEqual(('cmp-a100', ['0000:86:00.0']),
                         where('vgpu.small-1'))
        self.assertEqual(('cmp-a100', ['0000:86:00.0']),
                         where('vgpu.small-2'))
        packing = by_name['vgpu.small-1']['weights']['GpuPackingWeigher']
        self.assertEqual(0.0, packing)    # least free capacity: 0 x -10
        self.assertEqual(('cmp-h100', ['0000:9c:00.0']), where('pt.h100-2'))
        self.assertIn('No valid host', by_name['pt.h100-3']['error'])
        # no GPU asked: no GPU given, on the host whose GPUs are all in
        # use (the agent marks both H100s "assigned"), not next to idle ones
        self.assertEqual(('cmp-h100', []), where('m1.large-1'))

        occupancy = {(o['host'], o['gpu']): o for o in data['occupancy']}
        self.assertEqual(7, len(occupancy))
        bad = occupancy[UNHEALTHY_GPU]
        self.assertEqual(('unhealthy', 3, 4, 'A100_80GB_PCIE'),
                         (bad['health'], bad['used'], bad['total'],
                          bad['model']))

        def usage(host, gpu):
            o = occupancy[host, gpu]
            return o['used'], o['total']

        self.assertEqual((4, 4), usage('cmp-a100', '0000:86:00.0'))
        self.assertEqual((2, 4), usage('cmp-l4t4', '0000:17:00.0'))
        self.assertEqual((0, 4), usage('cmp-l4t4', '0000:ca:00.0'))
        self.assertEqual('TESLA_T4',
                         occupancy['cmp-l4t4', '0000:ca:00.0']['model'])
        self.assertEqual((1, 1), usage('cmp-h100', '0000:9c:00.0'))
        # progress went to stderr, a line per phase
        for phase in ('placement:', 'host cmp-a100:', 'event: cmp-a100',
                      'boot vgpu.a100-1', 'done:'):
            self.assertIn(phase, err)


class TestScenarios(testtools.TestCase):

    def test_example_spread_coolest(self):
        """nova_conf overrides reach the plugins.

        The example spreads and picks the coolest GPU; a degraded GPU is
        avoided after its event.  Table output.
        """
        rc, out, err = _command(
            ['simulate', os.path.join(scn.SCENARIO_DIR, 'example.yaml')])
        self.assertEqual(0, rc, err)
        rows = {}
        for line in out.splitlines():
            cells = line.split()
            if len(cells) >= 4 and cells[0] != 'SERVER':
                rows.setdefault(cells[0], cells[1:])
        self.assertEqual(['vgpu.a100', 'cmp-1', '0000:86:00.0'],
                         rows['train-1'][:3])       # the coolest GPU
        self.assertEqual(['vgpu.a100', 'cmp-1', '0000:86:00.0'],
                         rows['train-2'][:3])
        self.assertEqual(['pt.a10', 'cmp-2', '0000:41:00.0'],
                         rows['pt.a10-1'][:3])
        # 0000:86:00.0 turned degraded and hot: the next goes elsewhere
        self.assertEqual(['vgpu.a100', 'cmp-1', '0000:3b:00.0'],
                         rows['vgpu.a100-1'][:3])
        self.assertIn('GpuHealth excluded 0000:86:00.0',
                      ' '.join(rows['vgpu.a100-1']))
        self.assertIn('ERROR: No valid host', out)
        self.assertIn('health -> degraded', out)
        # cmp-2's only GPU is allocated (pt.a10-1) and the agent says so
        # ("assigned"): no host has an idle GPU left, so avoidance weighs
        # nothing and CPU/RAM decide
        self.assertEqual(['m1.small', 'cmp-1', '-'], rows['m1.small-1'][:3])
        self.assertNotIn('GpuHostAvoidance', ' '.join(rows['m1.small-1']))
        occupancy = [line.split() for line in out.splitlines()
                     if line.startswith('cmp-1  0000:86:00.0')]
        self.assertEqual(['2/8', 'degraded'], occupancy[0][-2:])

    def test_bad_scenario_exits_2_naming_file_and_entry(self):
        with open(os.path.join(scn.SCENARIO_DIR, 'default.yaml')) as f:
            data = yaml.safe_load(f)
        data['boots'].append({'flavor': 'vgpu.b200', 'count': 1})
        data['hosts'] = [dict(h, libvirt_xml=os.path.join(
            scn.SCENARIO_DIR, h['libvirt_xml'])) for h in data['hosts']]
        with tempfile.NamedTemporaryFile('w', suffix='.yaml',
                                         delete=False) as f:
            yaml.safe_dump(data, f)
        self.addCleanup(os.unlink, f.name)
        rc, out, err = _cli(['simulate', f.name])
        self.assertEqual(2, rc)
        self.assertEqual('', out)
        self.assertIn(f.name, err)
        self.assertIn("boots[8].flavor: unknown flavor 'vgpu.b200'", err)
        self.assertNotIn('Traceback', err)
        self.assertNotIn('boot ', err)
