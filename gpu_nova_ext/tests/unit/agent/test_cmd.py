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
