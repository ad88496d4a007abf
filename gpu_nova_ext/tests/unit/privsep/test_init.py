# SPDX-License-Identifier: Apache-2.0

"""The agent's configuration handed to the privsep context."""
import os
import sys

from oslo_config import cfg
from oslo_config import fixture as cfg_fixture
from oslotest import base

from gpu_nova_ext import conf as gconf
from gpu_nova_ext import privsep
from gpu_nova_ext.privsep import gpu
from gpu_nova_ext_dev.fakes import sysfs

SOCK = '/tmp/tmpabc/privsep.sock'
TAIL = ['--privsep_context', 'gpu_nova_ext.privsep.sys_admin_pctxt',
        '--privsep_sock_path', SOCK]


class TestInit(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        # the context reads the global CONF: its overrides go at cleanup
        self.useFixture(cfg_fixture.Config(cfg.CONF))
        self.conf = cfg.ConfigOpts()
        gconf.register_agent_opts(self.conf)
        self.agent_conf = self.useFixture(cfg_fixture.Config(self.conf))

    def load(self, *args):
        self.conf(list(args), default_config_files=[],
                  default_config_dirs=[])
        self.addCleanup(self.conf.reset)

    def test_default_is_sudo_privsep_helper_with_the_agents_files(self):
        path = self.create_tempfiles([('agent', '[DEFAULT]\n')])[0]
        self.load('--config-file', path)
        privsep.init(self.conf)
        self.assertEqual(
            ['sudo', sys.exec_prefix + '/bin/privsep-helper',
             '--config-file', path] + TAIL,
            privsep.sys_admin_pctxt.helper_command(SOCK))

    def test_helper_command_option_wins(self):
        self.load()
        self.agent_conf.config(helper_command='sudo -n /usr/bin/'
                               'privsep-helper --config-file /etc/x.conf',
                               log_daemon_traceback=True,
                               group=privsep.GROUP)
        privsep.init(self.conf)
        self.assertEqual(['sudo', '-n', '/usr/bin/privsep-helper',
                          '--config-file', '/etc/x.conf'] + TAIL,
                         privsep.sys_admin_pctxt.helper_command(SOCK))
        self.assertTrue(cfg.CONF[privsep.GROUP].log_daemon_traceback)

    def test_capabilities_default_is_the_contexts(self):
        # (what privsep-helper reads is the default the context sets on
        # the global CONF when it is built; the tests' config fixtures
        # reset the global defaults, so it is not asserted here)
        self.load()
        self.assertEqual(list(privsep.CAPABILITIES),
                         self.conf[privsep.GROUP].capabilities)


class TestHelper(base.BaseTestCase):
    """The real privsep-helper, started as the agent starts it.

    Without sudo (the helper runs as the test's user) and without
    capabilities (a plain user cannot keep any): the helper reads the
    agent's configuration file, finds the context by its name and runs
    the entry point in its own process.
    """

    def setUp(self):
        super().setUp()
        self.useFixture(cfg_fixture.Config(cfg.CONF))
        self.addCleanup(privsep.sys_admin_pctxt.stop)
        self.tree = self.useFixture(sysfs.GpuTree())
        self.tree.add_amd_gpu('0000:c1:00.0')
        path = os.path.join(self.tree.root, 'gpu-nova-agent.conf')
        with open(path, 'w') as f:
            f.write('[%s]\nhelper_command = %s/bin/privsep-helper '
                    '--config-file %s\ncapabilities =\n' % (
                        privsep.GROUP, sys.exec_prefix, path))
        conf = cfg.ConfigOpts()
        gconf.register_agent_opts(conf)
        conf(['--config-file', path], default_config_files=[],
             default_config_dirs=[])
        privsep.init(conf)

    def test_entry_point_runs_in_the_helpers_daemon(self):
        gpu.set_hwmon_power_cap(self.tree.root, '0000:c1:00.0', 123456)
        with open(self.tree.path('0000:c1:00.0', 'hwmon/power1_cap')) as f:
            self.assertEqual('123456\n', f.read())
        channel = privsep.sys_admin_pctxt.channel
        self.assertIsNotNone(channel)
        self.assertTrue(channel.running)
