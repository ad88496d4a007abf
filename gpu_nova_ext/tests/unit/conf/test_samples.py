# SPDX-License-Identifier: Apache-2.0

"""The committed sample configs are what oslo-config-generator writes now.

Fix a failure with ``tox -e genconfig`` and commit the samples.  The
generator runs in a fresh interpreter: libraries loaded by other tests
(Nova, oslo.log) change option defaults process-wide.
"""
import os
import subprocess
import sys
import tempfile

from oslo_config import cfg
import testtools

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__),
                                    '..', '..', '..', '..'))


class TestSampleConfigs(testtools.TestCase):

    def _check(self, generator_conf):
        path = os.path.join(ROOT, 'etc', 'oslo-config-generator',
                            generator_conf)
        parser = cfg.ConfigParser(path, {})
        parser.parse()
        committed = os.path.join(
            ROOT, parser.sections['DEFAULT']['output_file'][0])
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, 'sample')
            subprocess.run(
                [sys.executable, '-m', 'oslo_config.generator',
                 '--config-file', path, '--output-file', out],
                cwd=ROOT, check=True, capture_output=True)
            with open(out) as f:
                fresh = f.read()
        with open(committed) as f:
            current = f.read()
        self.assertEqual(fresh, current,
                         '%s is stale: run "tox -e genconfig" and commit it'
                         % os.path.relpath(committed, ROOT))

    def test_agent_sample_is_current(self):
        self._check('gpu-nova-agent.conf')

    def test_nova_sample_is_current(self):
        self._check('nova.conf')
