# SPDX-License-Identifier: Apache-2.0

"""The systemd units of contrib/systemd run commands that exist, and every
page of the docs uses their paths (doc/source/install.rst lists them)."""
import configparser
import glob
import os
import re
import shlex

import testtools

from gpu_nova_ext.cmd import cli

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..',
                                   '..'))
VENV_BIN = '/opt/gpu-nova-ext/bin/'
CONF_DIR = '/etc/gpu-nova-ext/'
# the files install.rst names under /etc/gpu-nova-ext (the broker's CA
# for the agent's TLS included), and the CLI's default configuration file
# (oslo.config's, cli.rst)
CONF_FILES = {'gpu-nova-agent.conf', 'gpu-nova-remediation.conf',
              'clouds.yaml', 'gpu-nova-ext.conf', 'rabbitmq-ca.pem'}
UNITS = {'gpu-nova-agent.service': ('gpu-nova-agent',
                                    'gpu-nova-agent.conf', []),
         'gpu-nova-remediation.service': ('gpu-nova-ext',
                                          'gpu-nova-remediation.conf',
                                          ['remediate'])}


def console_scripts() -> set[str]:
    conf = configparser.ConfigParser()
    conf.read(os.path.join(TOP, 'setup.cfg'))
    return {line.split('=')[0].strip() for line in
            conf['entry_points']['console_scripts'].strip().splitlines()}


def docs() -> list[str]:
    return sorted(glob.glob(os.path.join(TOP, 'doc', 'source', '**',
                                         '*.rst'), recursive=True) +
                  [os.path.join(TOP, 'README.rst')])


class TestSystemdUnits(testtools.TestCase):

    def test_units_run_installed_commands(self):
        found = {os.path.basename(p) for p in glob.glob(
            os.path.join(TOP, 'contrib', 'systemd', '*.service'))}
        self.assertEqual(set(UNITS), found)
        scripts = console_scripts()
        parser = cli.build_parser()
        for unit, (command, conf_file, sub) in UNITS.items():
            conf = configparser.ConfigParser(strict=False,
                                             interpolation=None)
            conf.read(os.path.join(TOP, 'contrib', 'systemd', unit))
            argv = shlex.split(conf['Service']['ExecStart'])
            self.assertEqual(VENV_BIN + command, argv[0], unit)
            self.assertIn(command, scripts)
            self.assertEqual(['--config-file', CONF_DIR + conf_file] + sub,
                             argv[1:], unit)
            if sub:
                # the sub-command exists and takes no other argument
                parser.parse_args(argv[1:])
            self.assertEqual('SIGTERM', conf['Service']['KillSignal'])
            self.assertIn('WantedBy', conf['Install'])


class TestDocPaths(testtools.TestCase):

    def test_docs_use_the_units_paths(self):
        bad = []
        for path in docs():
            with open(path) as f:
                text = f.read()
            rel = os.path.relpath(path, TOP)
            # a command of ours run by path runs from the venv of install
            for match in re.finditer(
                    r'([\w/.-]*)/bin/(gpu-nova-(?:agent|ext))\b', text):
                if match.group(1) + '/bin/' != VENV_BIN:
                    bad.append('%s: %s' % (rel, match.group(0)))
            for match in re.finditer(r'/etc/gpu-nova-ext/(\w[\w.-]*)',
                                     text):
                if match.group(1).rstrip('.') not in CONF_FILES:
                    bad.append('%s: %s' % (rel, match.group(0)))
        self.assertEqual([], bad)

    def test_install_page_lists_the_paths(self):
        with open(os.path.join(TOP, 'doc', 'source', 'install.rst')) as f:
            text = f.read()
        for name in CONF_FILES - {'gpu-nova-ext.conf'} | set(UNITS):
            self.assertIn(name, text)
        self.assertIn('``/opt/gpu-nova-ext``', text)
