# SPDX-License-Identifier: Apache-2.0

"""tools/bench-topology-candidates' measurement on tiny hosts.

Real Placement in process (the simulator's), Nova's request spec and
report client (design doc: Topology): what Placement offers a 4-GPU host
of two NVLink-bridged pairs for a 2-GPU server.
"""
import importlib.machinery
import importlib.util
import os

import testtools

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, os.pardir, os.pardir, os.pardir, os.pardir,
                    'tools', 'bench-topology-candidates')


def _tool():
    loader = importlib.machinery.SourceFileLoader('bench_topology_candidates',
                                                  TOOL)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


PAIR = (1, 1, 1)        # one link domain, one PCIe switch, one NUMA node
SPLIT = (2, 2, 2)


class TestTopologyCandidates(testtools.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.tool = _tool()

    def test_two_gpus_of_four(self):
        hosts = self.tool.measure(gpus=4, hosts=2, k=2)
        self.assertEqual(2, len(hosts))
        first = hosts[0]
        # K groups of one device, isolate: every ordered pair of distinct
        # GPUs, 4 x 3; the two bridged pairs in both orders are the best
        self.assertEqual(12, len(first.stock))
        self.assertEqual(PAIR, first.possible)
        self.assertEqual(4, first.stock.count(PAIR))
        self.assertEqual(8, first.stock.count(SPLIT))
        for host in hosts:
            # Placement generates the first GPU with each of the other
            # three first: its NVLink partner is among them
            self.assertIn(host.c, (1, 2, 3))
            n = max(h.c for h in hosts)
            # breadth-first with a cap of c x hosts: n candidates each,
            # a best pair among them
            self.assertEqual((n, True), host.under['breadth-first cap N'])

    def test_one_gpu_taken(self):
        [host] = self.tool.measure(gpus=4, hosts=1, k=2, taken=(0,))
        # three GPUs free: 3 x 2 ordered pairs, one whole pair (both ways)
        self.assertEqual(3, host.free)
        self.assertEqual(6, len(host.stock))
        self.assertEqual(2, host.stock.count(PAIR))
        self.assertLessEqual(host.c, 6)

    def test_vgpus_of_one_group_never_split(self):
        # resources:VGPU=2 (one unnumbered group): Placement takes a
        # resource class of a group from one provider, so both vGPUs come
        # from one GPU (4 candidates, one per GPU); 8 vGPUs fit no GPU of
        # 4 and get none rather than a split
        [two] = self.tool.measure(gpus=4, hosts=1, k=2, mode='vgpu')
        self.assertEqual([PAIR] * 4, two.stock)
        [eight] = self.tool.measure(gpus=4, hosts=1, k=8, mode='vgpu')
        self.assertEqual([], eight.stock)
