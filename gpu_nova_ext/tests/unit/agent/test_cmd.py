# SPDX-License-Identifier: Apache-2.0

"""gpu-nova-agent and gpu-nova-ext report: bad input -> one line, exit 2."""
import contextlib
import io
import os

import fixtures
import testtools

from gpu_nova_ext.cmd import agent
from gpu_nova_ext.cmd import cli

PLACEMENT = ('[placement]\nauth_type = admin_token\n'
             'endpoint = http://127.0.0.1:1/placement\ntoken = admin\n'
             'max_request_retries = 0\n')


class TestBadInput(testtools.TestCase):

    def run_main(self, text, argv=None, main=agent.main):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'agent.conf')
        with open(path, 'w') as f:
            f.write(text)
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rc = main(['--config-file', path] + (argv or []))
        self.assertEqual(2, rc, err.getvalue())
        self.assertEqual(1, len(err.getvalue().strip().splitlines()),
                         err.getvalue())
        self.assertNotIn('Traceback', err.getvalue())
        return err.getvalue()

    def test_unknown_mode(self):
        err = self.run_main('[agent]\nmode = everything\n' + PLACEMENT)
        self.assertIn('mode', err)
        self.assertIn('everything', err)

    def test_bad_reserved_gpu_address(self):
        err = self.run_main('[agent]\nreserved_gpus = 0000:zz:00.0\n'
                            + PLACEMENT)
        self.assertIn('[agent] reserved_gpus', err)
        self.assertIn('0000:zz:00.0', err)

    def test_missing_auth_options(self):
        err = self.run_main('[placement]\nauth_type = password\n')
        self.assertIn('[placement] auth_url', err)
        err = self.run_main('')
        self.assertIn('[placement] auth_type', err)

    def test_report_bad_input(self):
        err = self.run_main('[agent]\nreserved_gpus = nope\n' + PLACEMENT,
                            ['report', '--once'], main=cli.main)
        self.assertIn('reserved_gpus', err)

    def test_report_placement_down_names_it(self):
        err = self.run_main(PLACEMENT + '\n[agent]\ninventory_sources =\n',
                            ['report', '--once'], main=cli.main)
        self.assertIn('Placement is unreachable at '
                      'http://127.0.0.1:1/placement', err)


class TestHostileInput(testtools.TestCase):
    """Issue 16.8: each of these gave a traceback or a misleading line."""

    run_main = TestBadInput.run_main

    def run_raw(self, argv, main):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rc = main(argv)
        self.assertEqual(2, rc, err.getvalue())
        self.assertEqual(1, len(err.getvalue().strip().splitlines()),
                         err.getvalue())
        self.assertNotIn('Traceback', err.getvalue())
        return err.getvalue()

    def test_config_file_is_a_directory(self):
        directory = self.useFixture(fixtures.TempDir()).path
        for main, argv in ((agent.main, []), (cli.main, ['discover'])):
            err = self.run_raw(['--config-file', directory] + argv, main)
            self.assertIn('--config-file %s is a directory' % directory, err)
            self.assertIn('--config-dir', err)

    def test_config_file_not_utf8(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'latin1.conf')
        with open(path, 'wb') as f:
            f.write(b'[DEFAULT]\nhost = caf\xe9\n')
        for main, argv in ((agent.main, []), (cli.main, ['discover'])):
            err = self.run_raw(['--config-file', path] + argv, main)
            self.assertIn('%s is not UTF-8' % path, err)
            self.assertIn('line 2', err)

    def test_bad_value_names_group_and_file(self):
        err = self.run_main('[agent]\nreport_interval = soon\n' + PLACEMENT)
        self.assertIn('[agent] report_interval', err)
        self.assertIn('agent.conf', err)
        self.assertNotIn('LocationInfo', err)
        err = self.run_main('[DEFAULT]\ndebug = maybe\n' + PLACEMENT)
        self.assertIn('[DEFAULT] debug', err)
        self.assertIn('maybe', err)

    def test_password_auth_without_credentials(self):
        err = self.run_main('[placement]\nauth_type = password\n'
                            'auth_url = http://127.0.0.1:1/identity\n')
        self.assertIn('[placement] username and password', err)

    def test_endpoint_not_a_url(self):
        err = self.run_main(PLACEMENT.replace(
            'http://127.0.0.1:1/placement', 'not a url'),
            ['report', '--once'], main=cli.main)
        self.assertIn("'not a url' for option [placement] endpoint", err)
        self.assertNotIn('unreachable', err)

    def test_keystone_unreachable_is_named(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'agent.conf')
        with open(path, 'w') as f:
            f.write('[agent]\nlibvirt_uri = test:///default\n'
                    '[placement]\nauth_type = password\n'
                    'auth_url = http://127.0.0.1:1/identity\n'
                    'username = nova\npassword = secret\n'
                    'project_name = service\nuser_domain_name = Default\n'
                    'project_domain_name = Default\n'
                    'max_request_retries = 0\n')
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rc = cli.main(['--config-file', path, 'report', '--once'])
        # (keystoneauth logs a WARNING of its own first)
        last = err.getvalue().strip().splitlines()[-1]
        self.assertEqual(2, rc, err.getvalue())
        self.assertIn('Keystone at http://127.0.0.1:1/identity', last)
        self.assertIn('[placement] auth_url', last)
        self.assertNotIn('unreachable at ?', last)
        self.assertNotIn('Traceback', err.getvalue())

    def test_nova_conf_output_directory(self):
        directory = self.useFixture(fixtures.TempDir()).path
        err = self.run_main(
            '[agent]\ninventory_sources = libvirt\n'
            'libvirt_uri = test:///default\n',
            ['nova-conf', '--output', directory], main=cli.main)
        self.assertIn('it is a directory', err)
        parent = os.path.dirname(directory)
        self.assertFalse(os.path.exists(directory + '.tmp'))
        self.assertEqual([], [n for n in os.listdir(parent)
                              if n.startswith(os.path.basename(directory))
                              and n != os.path.basename(directory)])
