# SPDX-License-Identifier: Apache-2.0

"""``--os-gpu-api-version`` as OpenStackClient's own shell reads it."""
import testtools

from gpu_nova_ext.tests.functional import osc_client


class TestApiVersion(testtools.TestCase):

    def test_each_spelling_of_version_one(self):
        for version in ('1', '1.0'):
            rc, out, err = osc_client.openstack(
                '--os-gpu-api-version', version, 'gpu', 'list', '--help')
            self.assertEqual(0, rc, err)
            self.assertIn('List the GPUs of the cloud', out)
            self.assertNotIn('not in supported versions', err)

    def test_an_unknown_version_has_no_commands(self):
        rc, out, err = osc_client.openstack(
            '--os-gpu-api-version', '2', 'gpu', 'list', '--help')
        self.assertNotEqual(0, rc)
        self.assertIn('not in supported versions', err)
