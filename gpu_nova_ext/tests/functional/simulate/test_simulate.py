"""``gpu-nova-ext simulate`` end to end on real parts.

Embedded openstack-placement, libvirt's test driver, the agent's cycle,
the state channel over fake://, Nova's scheduler code with our plugins.
"""
import contextlib
import io
import json
import os
import tempfile

import testtools
import yaml

from gpu_nova_ext.cmd import cli
from gpu_nova_ext.simulate import output
from gpu_nova_ext.simulate import runner
from gpu_nova_ext.simulate import scenario as scn

UNHEALTHY_GPU = ('cmp-a100', '0000:3b:00.0')


def _cli(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(argv)
    return rc, out.getvalue(), err.getvalue()


class TestDefaultScenario(testtools.TestCase):

    def test_default_scenario_json(self):
        rc, out, err = _cli(['simulate', '--format', 'json'])
        self.assertEqual(0, rc, err)
        data = json.loads(out)       # stdout holds the JSON and nothing else
        self.assertEqual(['occupancy', 'placements'], sorted(data))
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
                              'health'}, set(o))
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
        # any 4 GiB vGPU: the fullest host (binpack) and its fullest GPU
        self.assertEqual(('cmp-a100', ['0000:3b:00.0']),
                         where('vgpu.small-1'))
        self.assertEqual(('cmp-a100', ['0000:86:00.0']),
                         where('vgpu.small-2'))
        self.assertIn('GpuPackingWeigher', by_name['vgpu.small-2']['weights'])
        # passthrough through PCI in Placement
        self.assertEqual(('cmp-h100', ['0000:1b:00.0']), where('pt.h100-1'))
        self.assertEqual(('cmp-h100', ['0000:9c:00.0']), where('pt.h100-2'))
        self.assertIn('No valid host', by_name['pt.h100-3']['error'])
        # after the event the unhealthy A100 is never chosen, though its
        # pGPU still had room in Placement before vgpu.small-1
        names = [p['server'] for p in placements]
        after_event = names[names.index('pt.h100-1') + 1:]
        for server in after_event:
            p = by_name[server]
            self.assertNotIn('0000:3b:00.0', p.get('gpus', []), server)
        self.assertEqual(('cmp-a100', ['0000:86:00.0']), where('vgpu.a100-4'))
        self.assertEqual(('cmp-a100', ['0000:86:00.0']), where('vgpu.a100-5'))
        # no GPU asked: no GPU given
        self.assertEqual([], by_name['m1.large-1']['gpus'])

        occupancy = {(o['host'], o['gpu']): o for o in data['occupancy']}
        self.assertEqual(7, len(occupancy))
        bad = occupancy[UNHEALTHY_GPU]
        self.assertEqual(('unhealthy', 4, 4, 'A100_80GB_PCIE'),
                         (bad['health'], bad['used'], bad['total'],
                          bad['model']))

        def usage(host, gpu):
            o = occupancy[host, gpu]
            return o['used'], o['total']

        self.assertEqual((3, 4), usage('cmp-a100', '0000:86:00.0'))
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
        avoided after its event.
        """
        lines = []
        result = runner.run(os.path.join(scn.SCENARIO_DIR, 'example.yaml'),
                            lines.append)
        got = [(s.server, s.host, s.gpus, s.error is None)
               for s in result.servers]
        self.assertEqual([
            ('train-1', 'cmp-1', ['0000:86:00.0'], True),   # coolest GPU
            ('train-2', 'cmp-1', ['0000:86:00.0'], True),
            ('pt.a10-1', 'cmp-2', ['0000:41:00.0'], True),
            ('vgpu.a100-1', 'cmp-1', ['0000:3b:00.0'], True),  # degraded 86
            ('pt.a10-2', None, [], False),
            ('m1.small-1', 'cmp-1', [], True),
            ('m1.small-2', 'cmp-1', [], True),
        ], got)
        table = output.to_table(result)
        self.assertIn('health -> degraded', table)
        self.assertIn('ERROR: No valid host', table)
        self.assertIn('GpuHostAvoidance', table)
        degraded = [o for o in result.occupancy if o.gpu == '0000:86:00.0']
        self.assertEqual(('degraded', 2, 8), (degraded[0].health,
                                              degraded[0].used,
                                              degraded[0].total))

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
