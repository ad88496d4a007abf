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

"""``gpu-nova-ext reserve`` / ``unreserve``: bad input is one line, rc 2,
before anything is read or written."""
import io

import fixtures
import testtools

from gpu_nova_ext.cmd import cli
from gpu_nova_ext.operator import reservation


class TestBadInput(testtools.TestCase):

    def run_cli(self, *argv):
        stderr = io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', stderr))
        rc = cli.main(['--config-file', '/dev/null'] + list(argv))
        return rc, stderr.getvalue()

    def test_one_line_rc_2(self):
        for argv, says in (
                (['reserve', '--host', 'h1'], 'give --project PROJECT'),
                (['reserve', '--project', 'p'], 'give exactly one of --host'),
                (['reserve', '--project', 'p', '--host', 'h',
                  '--aggregate', 'a'], 'give exactly one of --host'),
                (['unreserve', '--project', 'p', '--aggregate', 'a',
                  '--gpu', '0000:3b:00.0'], '--gpu needs --host'),
                (['reserve', '--project', 'two words', '--host', 'h'],
                 'Invalid --project'),
                (['reserve', '--project', 'p', '--host', 'h', '--gpu',
                  '3b:00'], 'Invalid --gpu'),
                (['reserve', '--list', '--host', 'h'],
                 '--list takes only --project and --format'),
                (['reserve', '--project', 'p', '--host', 'h', '--format',
                  'json'], '--format is for --list only')):
            rc, err = self.run_cli(*argv)
            self.assertEqual(2, rc, argv)
            self.assertEqual(1, len(err.splitlines()), err)
            self.assertIn(says, err)
            self.assertNotIn('Traceback', err)


class TestRender(testtools.TestCase):

    def test_table(self):
        text = reservation.render([
            reservation.Reservation(project='a1', host='h1',
                                    gpu='0000:3b:00.0', model='A100',
                                    mechanism='trait'),
            reservation.Reservation(project='b2', host='h2', gpu=None,
                                    model=None,
                                    mechanism='aggregate gpu-reserved-b2')])
        self.assertEqual(
            'PROJECT  HOST  GPU           MODEL  MECHANISM\n'
            'a1       h1    0000:3b:00.0  A100   trait\n'
            'b2       h2    (whole host)  -      aggregate gpu-reserved-b2\n',
            text)
        self.assertEqual('No GPU or host reservations.\n',
                         reservation.render([]))
