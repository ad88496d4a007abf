# SPDX-License-Identifier: Apache-2.0

"""remediate, drain, undrain, rollout: bad input and unreachable services
give one line naming the thing and the fix, and exit code 2."""
import contextlib
import io
import os
import socket

import fixtures
from oslo_config import cfg
from oslo_messaging import conffixture
import testtools

from gpu_nova_ext.cmd import cli
from gpu_nova_ext.cmd import ops_remediate
from gpu_nova_ext import conf as gconf
from gpu_nova_ext import exception
from gpu_nova_ext.state import cache as state_cache
from gpu_nova_ext.tests.functional import osc_client

CONF = """
[placement]
auth_type = admin_token
endpoint = http://127.0.0.1:%(port)d/placement
token = admin
max_request_retries = 0
retry_backoff = 0
"""

CLOUDS = """
clouds:
  down:
    auth_type: admin_token
    auth:
      endpoint: http://127.0.0.1:%(port)d/compute
      token: admin
    compute_endpoint_override: http://127.0.0.1:%(port)d/compute
    placement_endpoint_override: http://127.0.0.1:%(port)d/placement
"""


def closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


class TestOpsErrors(testtools.TestCase):

    def setUp(self):
        super().setUp()
        tmp = self.useFixture(fixtures.TempDir()).path
        port = closed_port()
        self.conf = os.path.join(tmp, 'gpu-nova-ext.conf')
        with open(self.conf, 'w') as f:
            f.write(CONF % {'port': port})
        clouds = os.path.join(tmp, 'clouds.yaml')
        with open(clouds, 'w') as f:
            f.write(CLOUDS % {'port': port})
        self.useFixture(fixtures.EnvironmentVariable(
            'OS_CLIENT_CONFIG_FILE', clouds))
        self.useFixture(fixtures.EnvironmentVariable('OS_CLOUD', 'down'))

    def _run(self, *argv):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), \
                contextlib.redirect_stdout(io.StringIO()):
            rc = cli.main(['--config-file', self.conf] + list(argv))
        lines = err.getvalue().strip().splitlines()
        self.assertEqual(2, rc, lines)
        self.assertEqual(1, len(lines), lines)
        self.assertNotIn('Traceback', lines[0])
        return lines[0]

    def test_compute_api_unreachable(self):
        line = self._run('remediate', '--once', '--host', 'cmp-1')
        self.assertIn('compute API is unreachable', line)
        self.assertIn('clouds.yaml', line)
        for argv in (['drain', 'cmp-1'],
                     ['undrain', 'cmp-1', '--expect-driver', '570']):
            rc, out, err = osc_client.openstack('gpu', 'host', *argv)
            self.assertEqual(2, rc, err)
            [line] = err.strip().splitlines()
            self.assertIn('compute API is unreachable', line)
            self.assertIn('clouds.yaml', line)

    def test_placement_unreachable(self):
        # openstack gpu: Placement of the cloud's catalog (clouds.yaml)
        rc, out, err = osc_client.openstack(
            'gpu', 'rollout', 'plan', '--max-unavailable', '25%')
        self.assertEqual(2, rc, err)
        [line] = err.strip().splitlines()
        self.assertIn('Placement is unreachable at http://127.0.0.1:', line)
        self.assertIn('placement_endpoint_override in clouds.yaml', line)

    def test_sweep_without_any_gpu_state_says_so(self):
        # a bus no agent talks on: no state heard, so no guess either way
        conf = cfg.ConfigOpts()
        gconf.register_opts(conf)
        conf([], project='gpu-nova-ext', default_config_files=[])
        conf.set_override('state_wait', 0.1, group='remediation')
        self.useFixture(conffixture.ConfFixture(conf)).transport_url = (
            'fake:/')
        state_cache.reset_cache()
        self.addCleanup(state_cache.reset_cache)
        exc = self.assertRaises(exception.GpuNovaExtException,
                                ops_remediate.sweep_triggers, conf, None)
        self.assertIn('No GPU state heard from the agents within 0.1s',
                      str(exc))

    def test_bad_arguments(self):
        self.assertIn('--gpu 0000:3b:00.0 needs --host', self._run(
            'remediate', '--once', '--gpu', '0000:3b:00.0'))
        self.assertIn('add --once', self._run('remediate', '--host', 'x'))
