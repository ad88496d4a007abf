# SPDX-License-Identifier: Apache-2.0

"""A boot's ``host:``, as ``openstack server create --host``: Nova's own
``resources_from_request_spec`` asks Placement in that host's tree, and
every filter still runs (the snapshot's current servers replay where
they run)."""
import copy

import testtools

from gpu_nova_ext import exception
from gpu_nova_ext.simulate import runner
from gpu_nova_ext.simulate import scenario as scn
from gpu_nova_ext.tests.unit.simulate import test_rollout
from gpu_nova_ext.tests.unit.simulate import test_scenario

PATH = test_scenario.PATH


def _data(boots):
    data = copy.deepcopy(test_scenario.BASE)
    data['hosts'] = [test_rollout.A100]      # a100-0001 .. a100-0004
    data['flavors'] = test_rollout.FLAVORS
    data['nova_conf'] = test_rollout.NOVA_CONF
    data['boots'] = boots
    return data


class TestPinnedBoot(testtools.TestCase):

    def test_pinned_servers_land_on_their_host_or_fail_there(self):
        # packing would put both on one host; pinned, each goes to its
        # own, and a third pinned to a full host finds no host
        result = runner.Simulation(scn.from_dict(_data([
            {'flavor': 'vgpu.a100', 'name': 'p3', 'host': 'a100-0003'},
            {'flavor': 'vgpu.a100', 'name': 'p4', 'host': 'a100-0004',
             'count': 4},
            {'flavor': 'vgpu.a100', 'name': 'over', 'host': 'a100-0004'},
            {'flavor': 'vgpu.a100', 'name': 'free'},
        ]), PATH)).run()
        where = {s.server: (s.host, s.error) for s in result.servers}
        self.assertEqual(('a100-0003', None), where['p3-1'])
        self.assertEqual({('a100-0004', None)},
                         {where['p4-%d' % n] for n in range(1, 5)})
        host, error = where['over-1']
        self.assertIsNone(host)
        self.assertIn('No valid host', error)
        self.assertIn('on a100-0004 (the boot asks for it)', error)
        # unpinned, packing fills the host p3 started
        self.assertEqual(('a100-0003', None), where['free-1'])

    def test_unknown_host_names_the_entry(self):
        exc = self.assertRaises(
            exception.ScenarioError, scn.from_dict,
            _data([{'flavor': 'vgpu.a100', 'host': 'a100-9'}]), PATH)
        self.assertIn('boots[0].host', str(exc))
        self.assertIn("unknown host 'a100-9'", str(exc))


GPU_A, GPU_B = '0000:3b:00.0', '0000:86:00.0'


def _two_gpu_data(boots):
    data = _data(boots)
    data['hosts'] = [test_rollout._kind(
        'a100', 1, 2, 'vgpu', vgpu_type='nvidia-472',
        vgpu_name='A100D-20C', addresses=[GPU_A, GPU_B])]  # 4 vGPUs a GPU
    return data


class TestPinnedGpus(testtools.TestCase):
    """A boot's ``gpus:``: a snapshot's server replayed on its GPUs."""

    def test_pinned_servers_hold_their_gpus_or_fail_there(self):
        result = runner.Simulation(scn.from_dict(_two_gpu_data([
            {'flavor': 'vgpu.a100', 'name': 'on-b', 'host': 'a100-0001',
             'gpus': [GPU_B]},
            {'flavor': 'vgpu.a100', 'name': 'on-a', 'host': 'a100-0001',
             'gpus': ['3b:00.0'], 'count': 5},
            {'flavor': 'vgpu.a100', 'name': 'free'},
        ]), PATH)).run()
        where = {s.server: (s.gpus, s.error) for s in result.servers}
        self.assertEqual(([GPU_B], None), where['on-b-1'])
        # packing alone would put the first of them beside on-b
        self.assertEqual({((GPU_A,), None)}, {
            (tuple(where['on-a-%d' % n][0]), where['on-a-%d' % n][1])
            for n in range(1, 5)})
        gpus, error = where['on-a-5']
        self.assertFalse(gpus)
        self.assertIn('No valid host: no allocation candidate of a100-0001 '
                      'holds exactly GPU(s) %s' % GPU_A, error)
        # unpinned, the scheduler's own choice: the GPU with room
        self.assertEqual(([GPU_B], None), where['free-1'])

    def test_pin_mistakes_name_the_entry(self):
        exc = self.assertRaises(
            exception.ScenarioError, scn.from_dict, _two_gpu_data([
                {'flavor': 'vgpu.a100', 'host': 'a100-0001',
                 'gpus': ['0000:99:00.0']}]), PATH)
        self.assertIn('boots[0].gpus[0]', str(exc))
        self.assertIn('host a100-0001 has no GPU 0000:99:00.0', str(exc))
        exc = self.assertRaises(
            exception.ScenarioError, scn.from_dict, _two_gpu_data([
                {'flavor': 'vgpu.a100', 'gpus': [GPU_A]}]), PATH)
        self.assertIn('boots[0]', str(exc))
        self.assertIn('host', str(exc))
