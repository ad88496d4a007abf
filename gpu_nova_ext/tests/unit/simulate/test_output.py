# SPDX-License-Identifier: Apache-2.0

"""Rendering of simulation results."""
import json

import testtools

from gpu_nova_ext.simulate import output
from gpu_nova_ext.simulate import result as runner
from gpu_nova_ext.simulate import scenario as scn


def _result():
    s = scn.Scenario(path='/s.yaml', description='demo', nova_conf={},
                     hosts=[], flavors={}, steps=[])
    r = runner.Result(scenario=s)
    r.servers = [
        runner.ServerResult(
            server='a-1', flavor='a', host='h1', gpus=['0000:3b:00.0'],
            weights={'GpuPackingWeigher': 0.0, 'RAMWeigher': 1.0},
            runner_up='h2',
            runner_up_weights={'GpuPackingWeigher': -10.0,
                               'RAMWeigher': 0.0}, step=0),
        runner.ServerResult(server='a-2', flavor='a', host='h1',
                            gpus=['0000:3b:00.0'], step=0,
                            excluded={'GpuHealthFilter': ['0000:86:00.0']}),
        runner.ServerResult(server='b-1', flavor='b', error='No valid host',
                            step=2),
    ]
    r.events = [runner.EventResult(host='h1', gpu='0000:3b:00.0',
                                   health='unhealthy', metrics={}, step=1)]
    r.occupancy = [runner.Occupancy(host='h1', gpu='0000:3b:00.0',
                                    model='A100_80GB_PCIE', used=2, total=4,
                                    health='unhealthy', mode='vgpu')]
    return r


class TestOutput(testtools.TestCase):

    def test_json_is_the_design_shape(self):
        data = json.loads(output.to_json([_result()]))
        self.assertEqual({
            'placements': [
                {'server': 'a-1', 'flavor': 'a', 'host': 'h1',
                 'gpus': ['0000:3b:00.0'],
                 'weights': {'GpuPackingWeigher': 0.0, 'RAMWeigher': 1.0}},
                {'server': 'a-2', 'flavor': 'a', 'host': 'h1',
                 'gpus': ['0000:3b:00.0'], 'weights': {}},
                {'server': 'b-1', 'flavor': 'b', 'error': 'No valid host'}],
            'occupancy': [
                {'host': 'h1', 'gpu': '0000:3b:00.0',
                 'model': 'A100_80GB_PCIE', 'used': 2, 'total': 4,
                 'health': 'unhealthy', 'state': 'live'}],
            'missing_state': [], 'summary': {}}, data)

    def test_table_explains_and_orders_events(self):
        lines = output.to_table([_result()]).splitlines()
        a1 = next(line for line in lines if line.startswith('a-1'))
        # the packing weigher decided (+10 over h2), RAM less so (+1)
        self.assertIn('vs h2: GpuPacking +10.00, RAM +1.00', a1)
        a2 = next(line for line in lines if line.startswith('a-2'))
        self.assertIn('only host', a2)
        self.assertIn('GpuHealth excluded 0000:86:00.0', a2)
        order = [line.split()[0] for line in lines
                 if line.startswith(('a-', 'b-', '**'))]
        self.assertEqual(['a-1', 'a-2', '**', 'b-1'], order)
        self.assertIn('ERROR: No valid host', '\n'.join(lines))
        occupancy = next(line for line in lines if 'A100_80GB_PCIE' in line)
        self.assertIn('2/4', occupancy)
        self.assertIn('unhealthy', occupancy)

    def test_missing_state_is_in_the_table_and_json(self):
        r = _result()
        r.missing_state = {'h2': 4}
        r.occupancy[0].state = 'missing'
        text = output.to_table([r])
        self.assertIn('WARNING: 1 host(s) had no live GPU state', text)
        self.assertIn('missing_state_policy', text)
        self.assertIn('have no live GPU state at the end (agent down): h1',
                      text)
        data = json.loads(output.to_json([r]))
        self.assertEqual([{'host': 'h2', 'since_step': 4}],
                         data['missing_state'])
        self.assertEqual('missing', data['occupancy'][0]['state'])

    def test_json_is_strict(self):
        r = _result()
        r.summary = {'gpu_allocation_pct': float('nan')}
        self.assertRaises(ValueError, output.to_json, [r])
