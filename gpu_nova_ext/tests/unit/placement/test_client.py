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

"""PlacementClient configuration errors (no server needed)."""
import os

import fixtures
from oslo_config import cfg
import testtools

from gpu_nova_ext import conf as gconf
from gpu_nova_ext import exception
from gpu_nova_ext.placement import client as pclient
from gpu_nova_ext.placement import reporter as preporter


class TestClientConfig(testtools.TestCase):

    def conf(self, text):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'agent.conf')
        with open(path, 'w') as f:
            f.write(text)
        conf = cfg.ConfigOpts()
        gconf.register_agent_opts(conf)
        conf(['--config-file', path], default_config_files=[])
        return conf

    def test_no_auth_type(self):
        exc = self.assertRaises(exception.ConfigError,
                                pclient.PlacementClient, self.conf(''))
        self.assertIn('[placement] auth_type', str(exc))

    def test_password_without_auth_url(self):
        exc = self.assertRaises(
            exception.ConfigError, pclient.PlacementClient,
            self.conf('[placement]\nauth_type = password\nusername = u\n'))
        self.assertIn('auth_url', str(exc))

    def test_admin_token_without_endpoint(self):
        exc = self.assertRaises(
            exception.ConfigError, pclient.PlacementClient,
            self.conf('[placement]\nauth_type = admin_token\n'
                      'token = admin\n'))
        self.assertIn('[placement] endpoint', str(exc))

    def test_unknown_auth_plugin(self):
        exc = self.assertRaises(
            exception.InvalidOption, pclient.PlacementClient,
            self.conf('[placement]\nauth_type = kerberos-ish\n'))
        self.assertIn('auth_type', str(exc))

    def test_admin_token_and_password_load(self):
        c = pclient.PlacementClient(self.conf(
            '[placement]\nauth_type = admin_token\n'
            'endpoint = http://127.0.0.1:1/placement\ntoken = admin\n'))
        self.assertEqual('http://127.0.0.1:1/placement', c.endpoint)
        pclient.PlacementClient(self.conf(
            '[placement]\nauth_type = password\n'
            'auth_url = http://keystone/identity\nusername = nova\n'
            'password = p\nproject_name = service\n'
            'user_domain_name = Default\nproject_domain_name = Default\n'))

    def test_microversions(self):
        for name in dir(pclient):
            if name.endswith('_VERSION'):
                major, minor = getattr(pclient, name).split('.')
                self.assertGreaterEqual((int(major), int(minor)), (1, 36))

    def test_bad_reserved_gpus(self):
        conf = self.conf('[agent]\nmode = inventory\n'
                         'reserved_gpus = 0000:3b:00.0,gpu-seven\n'
                         '[placement]\nauth_type = admin_token\n'
                         'endpoint = http://127.0.0.1:1/placement\n'
                         'token = admin\n')
        exc = self.assertRaises(exception.InvalidOption, preporter.Reporter,
                                conf, pclient.PlacementClient(conf))
        self.assertIn('reserved_gpus', str(exc))
        self.assertIn('gpu-seven', str(exc))

    def test_reserved_gpus_any_spelling(self):
        self.assertEqual({'0000:3b:00.0', '0000:86:00.0'},
                         preporter.parse_reserved_gpus(
                             ['00000000:3B:00.0', '86:00.0']))
