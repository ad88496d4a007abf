# SPDX-License-Identifier: Apache-2.0


"""The fragmentation-aware policy in the simulator, end to end.

Two passthrough hosts, one with 4 GPUs and one with 5.  A 4-GPU server
comes and goes (the scheduler learns that 4-GPU servers are asked for),
then a 1-GPU server and two 4-GPU servers arrive.  Best-fit packing puts
the 1-GPU server on the 4-GPU host, the fullest that fits, and the second
4-GPU server finds no host with 4 free GPUs; the fragmentation-aware
policy puts it on the 5-GPU host, whose fifth GPU no 4-GPU server could
use anyway, and both 4-GPU servers are placed.

(4 GPUs, not 8: with Placement's stock options every 8-GPU request on an
8-GPU host makes 8! = 40,320 ordered candidates per host, minutes per
boot; issue 26 item 1.)
"""
from gpu_nova_ext.tests.functional.simulate import test_cloud

ALIAS = {'name': 'gpu', 'resource_class': 'CUSTOM_GPU_TEST',
         'device_type': 'type-PCI'}


def _host(name, gpus):
    return {'name': name, 'vcpus': 128, 'memory_mb': 1048576,
            'cpu_allocation_ratio': 1.0,
            'pci_resource_class': 'CUSTOM_GPU_TEST',
            'gpus': [{'model': 'A100_80GB_PCIE', 'count': gpus}]}


def _flavor(gpus):
    return {'name': 'g%d' % gpus, 'vcpus': 4 * gpus, 'ram_mb': 16384 * gpus,
            'extra_specs': {'pci_passthrough:alias': 'gpu:%d' % gpus,
                            'group_policy': 'isolate'}}


SCENARIO = {
    'nova_conf': {'pci': {'alias': [ALIAS]}},
    'hosts': [_host('four', 4), _host('five', 5)],
    'flavors': [_flavor(1), _flavor(4)],
    'boots': [
        {'flavor': 'g4', 'name': 'warm', 'lifetime': 1},
        {'flavor': 'g1', 'name': 'small'},
        {'flavor': 'g4', 'name': 'big', 'count': 2},
    ],
}


class TestFragmentationPolicy(test_cloud.CloudTestCase):

    def test_packing_strands_a_4_gpu_server_that_frag_places(self):
        data, _ = self.simulate(SCENARIO, '--compare', 'pack', 'frag')
        placed = {run['policy']: {s['server']: s['host']
                                  for s in run['placements']
                                  if 'error' not in s}
                  for run in data['policies']}
        # best-fit: the 1-GPU server on the 4-GPU host, one big one left
        self.assertEqual('four', placed['pack']['small-1'])
        self.assertEqual(['big-1'], sorted(
            s for s in placed['pack'] if s.startswith('big')))
        # fragmentation-aware: the fifth GPU takes it, both big ones fit
        self.assertEqual('five', placed['frag']['small-1'])
        self.assertEqual({'big-1', 'big-2'}, {
            s for s in placed['frag'] if s.startswith('big')})
        self.assertEqual({'four', 'five'}, {
            placed['frag']['big-1'], placed['frag']['big-2']})
