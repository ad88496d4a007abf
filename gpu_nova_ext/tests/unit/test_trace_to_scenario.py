# SPDX-License-Identifier: Apache-2.0

"""tools/trace-to-scenario on a hand-made CSV of the trace's columns.

tests/data/openb/ holds a few rows in the layout of Alibaba's
cluster-trace-gpu-v2023 openb_node_list_gpu_node.csv and
openb_pod_list_default.csv (made up, not the trace).
"""
import os
import subprocess
import sys
import tempfile

import fixtures
import testtools
import yaml

from gpu_nova_ext.simulate import scenario as sim_scenario

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, os.pardir, 'data', 'openb')
NODES = os.path.join(DATA, 'nodes.csv')
PODS = os.path.join(DATA, 'pods.csv')
TOOL = os.path.join(HERE, os.pardir, os.pardir, os.pardir, 'tools',
                    'trace-to-scenario')


class TestTraceToScenario(testtools.TestCase):

    def run_tool(self, *args, nodes=NODES, pods=PODS):
        out = os.path.join(self.useFixture(
            fixtures.TempDir()).path, 'scenario.yaml')
        proc = subprocess.run(
            [sys.executable, TOOL, nodes, pods, '-o', out] + list(args),
            capture_output=True, text=True, timeout=60)
        if proc.returncode:
            return proc, None, None
        with open(out, encoding='utf-8') as f:
            text = f.read()
        return proc, text, yaml.safe_load(text)

    def test_full_scale(self):
        proc, text, data = self.run_tool()
        self.assertEqual(0, proc.returncode, proc.stderr)
        hosts = {h['name']: h for h in data['hosts']}
        # one kind per (model, GPUs, CPU, memory); the GPU-less node is
        # not a GPU host
        self.assertEqual({'g2-8g': 4, 'p100-2g': 2, 'v100m16-1g': 1},
                         {n: h['count'] for n, h in hosts.items()})
        self.assertEqual({'vcpus': 96, 'memory_mb': 393216,
                          'cpu_allocation_ratio': 1.0,
                          'pci_resource_class': 'CUSTOM_GPU_OPENB',
                          'gpus': [{'model': 'A100_PCIE_40GB', 'count': 8}]},
                         {k: v for k, v in hosts['g2-8g'].items()
                          if k not in ('name', 'count')})
        flavors = {f['name']: f for f in data['flavors']}
        # the GPU-sharing task (460 milli) takes a whole GPU; shapes are
        # ceil(CPU), ceil(GiB)
        self.assertEqual({'g1.c12.m16': 2, 'g1.c6.m12': 1, 'g1.c4.m6': 1,
                          'cpu.c13.m56': 1, 'g8.c88.m320': 1,
                          'g8.c65.m256': 1, 'g4.c33.m128': 1,
                          'g2.c17.m64': 1},
                         data['workload']['flavors'])
        self.assertEqual({'pci_passthrough:alias': 'openb:8',
                          'group_policy': 'isolate'},
                         flavors['g8.c88.m320']['extra_specs'])
        self.assertEqual({'pci_passthrough:alias': 'openb:1'},
                         flavors['g1.c4.m6']['extra_specs'])
        self.assertEqual({}, flavors['cpu.c13.m56']['extra_specs'])
        self.assertEqual(12 * 1024, flavors['g1.c6.m12']['ram_mb'])
        self.assertEqual({'arrived_pct': 130}, data['workload']['until'])
        self.assertIn('GPU-sharing tasks given a whole GPU: 1', text)
        self.assertIn('GPU model G2 -> A100_PCIE_40GB (stand-in', text)
        # the simulator's own parser takes it
        with tempfile.NamedTemporaryFile('w', suffix='.yaml',
                                         delete=False) as f:
            f.write(text)
        self.addCleanup(os.unlink, f.name)
        loaded = sim_scenario.load(f.name)
        self.assertEqual(7, len(loaded.hosts))
        self.assertEqual(8, len(loaded.flavors))

    def test_scale_shapes_and_what_is_left_out(self):
        proc, text, data = self.run_tool(
            '--scale', '0.5', '--shapes', '1', '--sharing', 'drop',
            '--cpu-tasks', 'drop')
        self.assertEqual(0, proc.returncode, proc.stderr)
        # 7 GPU nodes x 0.5: 4 hosts by largest remainders
        self.assertEqual({'g2-8g': 2, 'p100-2g': 1, 'v100m16-1g': 1},
                         {h['name']: h['count'] for h in data['hosts']})
        # one shape per GPU count (the most frequent), plus the largest:
        # the 1-GPU task of 4 vCPUs takes the 12-vCPU flavor
        self.assertEqual({'g1.c12.m16': 3, 'g8.c65.m256': 1,
                          'g8.c88.m320': 1, 'g4.c33.m128': 1,
                          'g2.c17.m64': 1},
                         data['workload']['flavors'])
        self.assertIn('GPU-sharing tasks left out: 1', text)
        self.assertIn('CPU-only tasks left out: 1', text)

    def test_kind_left_out_at_small_scale_is_listed(self):
        proc, text, data = self.run_tool('--scale', '0.2')
        self.assertEqual(0, proc.returncode, proc.stderr)
        self.assertEqual(1, sum(h['count'] for h in data['hosts']))
        self.assertIn('left out: host kind p100-2g (2 nodes', text)

    def test_bad_input_is_one_line_exit_2(self):
        bad = os.path.join(self.useFixture(fixtures.TempDir()).path, 'bad.csv')
        with open(bad, 'w', encoding='utf-8') as f:
            f.write('sn,cpu_milli,gpu,model\nx,1,1,T4\n')
        proc, _, _ = self.run_tool(nodes=bad)
        self.assertEqual(2, proc.returncode)
        self.assertEqual(1, len(proc.stderr.strip().splitlines()))
        self.assertIn('no column memory_mib', proc.stderr)
        proc, _, _ = self.run_tool(nodes=NODES, pods='/nonexistent.csv')
        self.assertEqual(2, proc.returncode)
        self.assertIn('/nonexistent.csv', proc.stderr)
        self.assertNotIn('Traceback', proc.stderr)
