# SPDX-License-Identifier: Apache-2.0

"""``openstack gpu reservation create|delete``: bad input is refused with
exit code 2 before anything is read or written (the cloud of clouds.yaml
points at a closed port: reaching it would say so instead)."""
import testtools

from gpu_nova_ext.tests.functional import osc_client


class TestBadInput(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(osc_client.Cloud('http://127.0.0.1:1/placement',
                                         'http://127.0.0.1:1/compute'))

    def test_ours_one_line_rc_2(self):
        for argv, says in (
                (['delete', '--project', 'p', '--aggregate', 'a',
                  '--gpu', '0000:3b:00.0'], '--gpu needs --host'),
                (['create', '--project', 'two words', '--host', 'h'],
                 'Invalid --project'),
                (['create', '--project', 'p', '--host', 'h', '--gpu',
                  '3b:00'], 'Invalid --gpu')):
            rc, out, err = osc_client.openstack('gpu', 'reservation', *argv)
            self.assertEqual(2, rc, argv)
            self.assertEqual(1, len(err.splitlines()), err)
            self.assertIn(says, err)
            self.assertNotIn('Traceback', err)

    def test_argparse_rc_2(self):
        for argv, says in (
                (['create', '--host', 'h1'], '--project'),
                (['create', '--project', 'p'], '--host'),
                (['create', '--project', 'p', '--host', 'h',
                  '--aggregate', 'a'], 'not allowed with argument')):
            rc, out, err = osc_client.openstack('gpu', 'reservation', *argv)
            self.assertEqual(2, rc, argv)
            self.assertIn(says, err.splitlines()[-1])
