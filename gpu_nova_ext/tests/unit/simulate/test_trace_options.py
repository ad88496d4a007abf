# SPDX-License-Identifier: Apache-2.0

"""tools/trace-to-scenario: every task's own shape, no multi-GPU tasks.

On the hand-made rows of tests/data/openb/ (made up, not the trace).
"""
import os
import subprocess
import sys

import fixtures
import testtools
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, os.pardir, os.pardir, os.pardir, os.pardir)
DATA = os.path.join(ROOT, 'gpu_nova_ext', 'tests', 'data', 'openb')
TOOL = os.path.join(ROOT, 'tools', 'trace-to-scenario')


class TestTraceOptions(testtools.TestCase):

    def run_tool(self, *args):
        out = os.path.join(self.useFixture(
            fixtures.TempDir()).path, 'scenario.yaml')
        proc = subprocess.run(
            [sys.executable, TOOL, os.path.join(DATA, 'nodes.csv'),
             os.path.join(DATA, 'pods.csv'), '-o', out] + list(args),
            capture_output=True, text=True, timeout=60)
        self.assertEqual(0, proc.returncode, proc.stderr)
        with open(out, encoding='utf-8') as f:
            text = f.read()
        return text, yaml.safe_load(text)

    def test_every_shape_keeps_its_cpu_and_ram(self):
        text, data = self.run_tool('--shapes', '0')
        mix = data['workload']['flavors']
        # each task its own (GPUs, ceil vCPUs, ceil GiB): the two 12-vCPU
        # 16 GiB tasks share one; the 8-GPU tasks keep their 65 and 88
        self.assertEqual({'cpu.c13.m56': 1, 'g1.c4.m6': 1, 'g1.c6.m12': 1,
                          'g1.c12.m16': 2, 'g2.c17.m64': 1,
                          'g4.c33.m128': 1, 'g8.c65.m256': 1,
                          'g8.c88.m320': 1}, mix)
        flavors = {f['name']: f for f in data['flavors']}
        self.assertEqual({'pci_passthrough:alias': 'openb:8',
                          'group_policy': 'isolate'},
                         flavors['g8.c65.m256']['extra_specs'])
        self.assertEqual(88, flavors['g8.c88.m320']['vcpus'])

    def test_without_multi_gpu_tasks(self):
        text, data = self.run_tool('--shapes', '0', '--max-gpus', '1')
        names = set(data['workload']['flavors'])
        self.assertEqual({'cpu.c13.m56', 'g1.c4.m6', 'g1.c6.m12',
                          'g1.c12.m16'}, names)
        self.assertIn('#   tasks of more than 1 GPUs left out: 4', text)

    def test_bad_max_gpus(self):
        proc = subprocess.run(
            [sys.executable, TOOL, os.path.join(DATA, 'nodes.csv'),
             os.path.join(DATA, 'pods.csv'), '--max-gpus', '-1'],
            capture_output=True, text=True, timeout=60)
        self.assertEqual(2, proc.returncode)
        self.assertIn('--max-gpus at least 0', proc.stderr)
