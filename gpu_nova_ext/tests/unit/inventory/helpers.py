# SPDX-License-Identifier: Apache-2.0

"""Shared helpers of the inventory tests."""
import os

import fixtures
from oslo_config import cfg

from gpu_nova_ext import conf as gconf

DATA_DIR = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir,
                        'data', 'libvirt')
SAMPLE_HOST = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir,
                           os.pardir, 'inventory', 'samples',
                           'a100-vgpu-host.xml')


def host_xml(name: str) -> str:
    return os.path.abspath(os.path.join(DATA_DIR, name))


def host_uri(name: str) -> str:
    """``test:///abs/path.xml`` of a shipped host XML."""
    return 'test://' + host_xml(name)


class AgentConf(fixtures.Fixture):
    """Agent ConfigOpts isolated from this machine's /etc and /sys."""

    def __init__(self, **agent):
        super().__init__()
        self.agent = agent

    def _setUp(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        conf = cfg.ConfigOpts()
        gconf.register_agent_opts(conf)
        conf([], project='gpu-nova-ext-test', default_config_files=[],
             default_config_dirs=[])
        conf.set_override('host', 'cmp-1')
        defaults = {'nova_config_file': os.path.join(tmp, 'nova.conf'),
                    'nova_config_dir': os.path.join(tmp, 'nova.conf.d'),
                    'sysfs_root': os.path.join(tmp, 'sys')}
        defaults.update(self.agent)
        for key, value in defaults.items():
            self.set_override(conf, key, value)
        self.tmp = tmp
        self.conf = conf

    def set_override(self, conf, key, value, group='agent'):
        # oslo.config keeps overrides in the OptGroup object, which
        # conf/agent.py shares between ConfigOpts: clear them after.
        conf.set_override(key, value, group=group)
        self.addCleanup(conf.clear_override, key, group=group)

    def write_nova_conf(self, text: str, name: str | None = None) -> str:
        """Write this host's nova.conf (or a nova.conf.d drop-in)."""
        if name is None:
            path = self.conf.agent.nova_config_file
        else:
            os.makedirs(self.conf.agent.nova_config_dir, exist_ok=True)
            path = os.path.join(self.conf.agent.nova_config_dir, name)
        with open(path, 'w') as f:
            f.write(text)
        return path
