# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""Topology end to end in the simulator (design doc: Topology): host kinds
with NVLink pairs, the agent's discovery over the simulated source, the
facts through the state channel, GpuTopologyFilter and the multi-GPU
choice of GpuCandidateOrderFilter in Nova's scheduler code, and the
summary's split counts."""
import json

import testtools

from gpu_nova_ext.tests.functional.simulate import cli


def _scenario(extra_specs):
    return {
        'description': 'two PCIe hosts of four NVLink-bridged pairs',
        'nova_conf': {'pci': {'alias': [{
            'name': 'gpu', 'resource_class': 'CUSTOM_GPU_TOPO',
            'device_type': 'type-PCI'}]}},
        'hosts': [{'name': 'pcie', 'count': 2, 'vcpus': 128,
                   'memory_mb': 1048576,
                   'pci_resource_class': 'CUSTOM_GPU_TOPO',
                   'gpus': [{'model': 'A100_80GB_PCIE', 'count': 8,
                             'nvlink': 'pairs'}]}],
        'flavors': [
            {'name': 'g1', 'vcpus': 4, 'ram_mb': 8192,
             'extra_specs': {'pci_passthrough:alias': 'gpu:1'}},
            {'name': 'g2', 'vcpus': 8, 'ram_mb': 16384,
             'extra_specs': dict(extra_specs, **{
                 'pci_passthrough:alias': 'gpu:2',
                 'group_policy': 'isolate'})}],
        # two single GPUs first: a 2-GPU server chosen without topology
        # then splits a pair
        'boots': [{'flavor': 'g1', 'count': 2},
                  {'flavor': 'g2', 'count': 6}],
    }


class TestTopology(testtools.TestCase):

    def test_pairs_kept_whole_and_nvlink_required(self):
        rc, out, err = cli.simulate(_scenario({}), '-f', 'json',
                                    '--compare', 'pack', 'nova')
        self.assertEqual(0, rc, err)
        pack, nova = json.loads(out)['policies']
        for result in (pack, nova):
            self.assertEqual(6, result['summary']['multi_gpu_servers'])
        # ours: every 2-GPU server on one bridged pair, one socket
        self.assertEqual(0, pack['summary'][
            'multi_gpu_not_in_one_link_domain'])
        self.assertEqual(0, pack['summary']['multi_gpu_across_numa_nodes'])
        # Nova's own chain takes Placement's first candidate
        self.assertGreater(nova['summary'][
            'multi_gpu_not_in_one_link_domain'], 0)

        rc, out, err = cli.simulate(_scenario({'gpu:topology': 'nvlink'}),
                                    '-f', 'json', '--compare', 'spread')
        self.assertEqual(0, rc, err)
        spread = json.loads(out)
        # required: no split even where spreading would split a pair
        self.assertEqual(6, spread['summary']['multi_gpu_servers'])
        self.assertEqual(0, spread['summary'][
            'multi_gpu_not_in_one_link_domain'])
