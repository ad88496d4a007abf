# SPDX-License-Identifier: Apache-2.0

"""The console entry points: bad input gives one line and exit code 2."""
import contextlib
import importlib.metadata
import io
import os
import tempfile

import testtools

from gpu_nova_ext.cmd import agent
from gpu_nova_ext.cmd import cli


class TestCliErrors(testtools.TestCase):

    def _run(self, main, argv):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rc = main(argv)
        return rc, err.getvalue()

    def test_missing_config_file_names_it(self):
        rc, err = self._run(cli.main, ['--config-file', '/nonexistent.conf',
                                       'discover'])
        self.assertEqual(2, rc)
        self.assertIn('/nonexistent.conf', err)
        self.assertNotIn('Traceback', err)

    def test_bad_option_value_names_option(self):
        with tempfile.NamedTemporaryFile('w', suffix='.conf',
                                         delete=False) as f:
            f.write('[agent]\nmode = sideways\n')
        self.addCleanup(os.unlink, f.name)
        rc, err = self._run(agent.main, ['--config-file', f.name])
        self.assertEqual(2, rc)
        self.assertIn('mode', err)
        self.assertIn('sideways', err)
        self.assertEqual(1, len(err.strip().splitlines()), err)

    def test_unreadable_host_xml_names_file_not_daemon(self):
        with tempfile.NamedTemporaryFile('wb', suffix='.xml',
                                         delete=False) as f:
            f.write(b'<node><device')
        self.addCleanup(os.unlink, f.name)
        rc, err = self._run(cli.main, ['discover', '--libvirt-uri',
                                       'test://' + f.name])
        self.assertEqual(2, rc)
        self.assertIn(f.name, err)
        self.assertIn('not well-formed XML', err)
        self.assertNotIn('libvirtd', err)
        self.assertNotIn('Traceback', err)
        self.assertEqual(1, len(err.strip().splitlines()), err)


class TestVersion(testtools.TestCase):
    """Both commands report the installed distribution's version.

    It is the one pbr built from setup.cfg's ``version``.
    """

    def test_version(self):
        want = importlib.metadata.version('gpu-nova-ext')
        self.assertTrue(want.startswith('1.'), want)
        for main, prog in ((cli.main, 'gpu-nova-ext'),
                           (agent.main, 'gpu-nova-agent')):
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exc = self.assertRaises(SystemExit, main, ['--version'])
            self.assertEqual(0, exc.code)
            self.assertEqual('%s %s\n' % (prog, want), out.getvalue())
