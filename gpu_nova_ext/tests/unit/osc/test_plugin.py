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
