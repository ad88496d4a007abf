# SPDX-License-Identifier: Apache-2.0

"""The operator documentation says what the code does.

Checks that every DevStack variable, CLI option, configuration option and
flavor recipe named in doc/source exists and gives what the page shows.
"""
import configparser
import os
import re
import shlex

from oslo_config import cfg
import testtools

from gpu_nova_ext.cmd import cli
from gpu_nova_ext import conf as gconf
from gpu_nova_ext.operator import flavor
from gpu_nova_ext.osc import flavor as flavor_cmd
from gpu_nova_ext.tests.functional import osc_client

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..',
                                   '..', '..'))
DOC = os.path.join(TOP, 'doc', 'source')


def read(name):
    with open(os.path.join(DOC, name)) as f:
        return f.read()


def all_docs():
    return {name: read(name) for name in sorted(os.listdir(DOC))
            if name.endswith('.rst')}


class TestDocs(testtools.TestCase):

    def test_toctree_lists_every_page(self):
        index = read('index.rst')
        for name in all_docs():
            if name != 'index.rst':
                self.assertIn('   %s\n' % name[:-4], index, name)

    @staticmethod
    def tool_environment() -> set[str]:
        """``GPU_NOVA_EXT_*`` variables the tools and tests read."""
        found = set()
        for top in ('gpu_nova_ext', 'tools'):
            for root, _dirs, files in os.walk(os.path.join(TOP, top)):
                for name in files:
                    # Python modules, and the tools' scripts (no suffix)
                    if '.' in name and not name.endswith('.py'):
                        continue
                    with open(os.path.join(root, name),
                              errors='replace') as f:
                        text = f.read()
                    found.update(re.findall(
                        r"environ(?:\.get\(|\[)\s*'(GPU_NOVA_EXT_[A-Z_]+)'",
                        text))
                    found.update(re.findall(
                        r'\$\{?(GPU_NOVA_EXT_[A-Z_]+)', text))
        return found

    def test_devstack_variables_exist(self):
        # every GPU_NOVA_EXT_* a page names is devstack's, or one a tool
        # or test reads from its environment (tools/run cloud's own)
        with open(os.path.join(TOP, 'devstack', 'settings')) as f:
            settings = f.read()
        defined = set(re.findall(r'^(GPU_NOVA_EXT_[A-Z_]+)=', settings,
                                 re.M)) | self.tool_environment()
        self.assertIn('GPU_NOVA_EXT_CLOUD_KEEP', defined)
        self.assertNotIn('GPU_NOVA_EXT_NO_SUCH_VARIABLE', defined)
        for name, text in all_docs().items():
            for var in set(re.findall(r'GPU_NOVA_EXT_[A-Z_<>]+', text)):
                if '<NAME>' in var:
                    for w in ('PACKING', 'UTILIZATION', 'THERMAL', 'POWER',
                              'CAPABILITY', 'AVOIDANCE'):
                        self.assertIn(var.replace('<NAME>', w), defined)
                    continue
                self.assertIn(var, defined, '%s names %s' % (name, var))

    def test_every_devstack_variable_documented(self):
        with open(os.path.join(TOP, 'devstack', 'settings')) as f:
            defined = set(re.findall(r'^(GPU_NOVA_EXT_[A-Z_]+)=', f.read(),
                                     re.M))
        text = read('install.rst').replace(
            '<NAME>_WEIGHT_MULTIPLIER', '{W}_WEIGHT_MULTIPLIER')
        documented = set(re.findall(r'GPU_NOVA_EXT_[A-Z_{}]+', text))
        for name in list(documented):
            if '{W}' in name:
                documented |= {name.format(W=w) for w in (
                    'PACKING', 'UTILIZATION', 'THERMAL', 'POWER',
                    'CAPABILITY', 'AVOIDANCE')}
        self.assertEqual(set(), defined - documented)

    def test_config_options_exist(self):
        conf = cfg.ConfigOpts()
        gconf.register_opts(conf)
        ours = {'agent', 'health', 'gpu_scheduler', 'gpu_weights'}
        checked = 0
        for name, text in all_docs().items():
            for group, option in re.findall(
                    r'``\[(\w+)\] (\w+)``', text):
                if group in ours:
                    checked += 1
                    self.assertIn(option, conf[group],
                                  '%s: [%s] %s' % (name, group, option))
        self.assertGreater(checked, 10)

    def test_cli_options_exist(self):
        parser = cli.build_parser()
        actions = parser._subparsers._group_actions[0].choices
        commands = {'nova-conf': actions['nova-conf']}
        text = read('cli.rst')
        for command, sub in commands.items():
            m = re.search(r'^``%s (.*)``$' % re.escape(command), text, re.M)
            self.assertIsNotNone(m, command)
            known = set(sub._option_string_actions)
            for opt in re.findall(r'--[a-z-]+', m.group(1)):
                self.assertIn(opt, known, '%s %s' % (command, opt))

    def test_filter_counts_match_the_entry_points(self):
        parser = configparser.ConfigParser()
        parser.read(os.path.join(TOP, 'setup.cfg'))
        filters = [line for line in parser['entry_points'][
            'gpu_nova_ext.scheduler.filters'].splitlines() if line.strip()]
        words = {3: 'three', 4: 'four', 5: 'five', 6: 'six', 7: 'seven',
                 8: 'eight', 9: 'nine', 10: 'ten'}
        for name, pattern in (
                ('install.rst', r'``enabled_filters`` \(all (\w+)\)'),
                ('nova-config.rst', r'append the (\w+) ``Gpu\*`` filters')):
            m = re.search(pattern, read(name))
            self.assertIsNotNone(m, name)
            self.assertEqual(words[len(filters)], m.group(1), name)

    def test_flavor_recipes_give_what_the_page_shows(self):
        text = read('flavors.rst')
        recipes = re.findall(
            r'    (openstack gpu flavor create .*?)\n\ngives::\n\n(.*?)\n\n',
            text, re.S)
        self.assertEqual(4, len(recipes))
        parser = osc_client.parser_of('gpu flavor create')
        for command, shown in recipes:
            argv = shlex.split(command.replace('\\\n', ' '))[4:]
            args = parser.parse_args(argv + ['--dry-run'])
            plan = flavor_cmd.plan_from_args(args)
            expected = {}
            for line in shown.splitlines():
                key, _, value = line.strip().partition(' = ')
                expected[key.strip()] = value.strip()
            self.assertEqual(expected, plan.extra_specs, command)
            self.assertIsInstance(plan, flavor.FlavorPlan)
