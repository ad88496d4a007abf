# SPDX-License-Identifier: Apache-2.0

"""doc/source/operations.rst names options and commands that exist."""
import os
import re

from oslo_config import cfg
import testtools

from gpu_nova_ext.cmd import cli
from gpu_nova_ext import conf as gconf
from gpu_nova_ext.tests.functional import osc_client

PAGE = os.path.join(os.path.dirname(__file__), '..', '..', '..', '..',
                    'doc', 'source', 'operations.rst')


class TestOperationsPage(testtools.TestCase):

    def setUp(self):
        super().setUp()
        with open(PAGE) as f:
            self.text = f.read()

    def test_every_remediation_option_documented_and_real(self):
        conf = cfg.ConfigOpts()
        gconf.register_opts(conf)
        named = set(re.findall(r'``\[remediation\] (\w+)``', self.text))
        self.assertEqual(set(conf.remediation), named)

    def test_command_synopses_match_the_parser(self):
        choices = cli.build_parser()._subparsers._group_actions[0].choices
        commands = {'gpu-nova-ext remediate': choices['remediate']}
        for command in ('gpu host drain', 'gpu host undrain',
                        'gpu rollout plan'):
            commands['openstack ' + command] = osc_client.parser_of(command)
        for command, parser in commands.items():
            m = re.search(r'^``%s (.*)``$' % command, self.text, re.M)
            self.assertIsNotNone(m, command)
            for opt in re.findall(r'--[a-z-]+', m.group(1)):
                self.assertIn(opt, parser._option_string_actions,
                              '%s %s' % (command, opt))
