# SPDX-License-Identifier: Apache-2.0

"""tools/nova-compat's watchdog: a hung test does not hang the run.

Real worker processes (tools/nova-compat-worker, stock mode) run a test
module written here, whose second test never ends.
"""
import importlib.machinery
import importlib.util
import os
import sys
import textwrap

import fixtures
import testtools

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, os.pardir, os.pardir, os.pardir, 'tools',
                    'nova-compat')

MODULE = textwrap.dedent('''
    import time
    import unittest


    class T(unittest.TestCase):
        def test_a_passes(self):
            pass

        def test_b_hangs(self):
            time.sleep(3600)

        def test_c_fails(self):
            self.fail('boom')
''')


def load_tool():
    loader = importlib.machinery.SourceFileLoader('nova_compat_tool', TOOL)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


class TestWatchdog(testtools.TestCase):

    def test_hung_test_counts_as_hang_and_the_rest_runs(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        name = 'gne_hang_%d' % os.getpid()
        with open(os.path.join(tmp, name + '.py'), 'w') as f:
            f.write(MODULE)
        self.useFixture(fixtures.EnvironmentVariable(
            'PYTHONPATH', os.pathsep.join([tmp] + sys.path)))
        tool = load_tool()
        self.useFixture(fixtures.MockPatchObject(tool, 'HANG_S', 3))
        ids = ['%s.T.%s' % (name, test) for test in
               ('test_a_passes', 'test_b_hangs', 'test_c_fails')]
        self.useFixture(fixtures.MockPatch('sys.stdout'))
        outcomes, _calls = tool.run(ids, 'stock', 1, {}, tmp, 'stock')
        self.assertEqual(['success', 'hang', 'fail'],
                         [outcomes[i]['status'] for i in ids])
        # the test after the hung one ran in a new worker
        self.assertTrue(os.path.exists(
            os.path.join(tmp, 'stock-resumed-1.json')))
