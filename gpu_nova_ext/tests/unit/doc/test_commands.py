# SPDX-License-Identifier: Apache-2.0

"""Every command the README and the docs show exists.

Commands are read where a reader copies them from: inline literals
(````...````) and literal blocks (after ``::`` or a ``code-block``).  A
``gpu-nova-ext`` subcommand must be one of the CLI's, an ``openstack gpu``
command one of the plugin's entry points (setup.cfg, as OpenStackClient
finds them), any other ``openstack`` command one of the installed
client's and its plugins' (osc-placement's ``resource provider``
commands included: the test venv holds what the docs tell an operator to
install), a ``tools/`` path a file of the tree.  Release notes are
history and are not read.
"""
import configparser
import glob
import importlib.metadata
import os
import re

import testtools

from gpu_nova_ext.cmd import cli

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..',
                                   '..', '..'))
PAGES = [os.path.join(TOP, 'README.rst')] + sorted(
    glob.glob(os.path.join(TOP, 'doc', 'source', '**', '*.rst'),
              recursive=True))

_INLINE = re.compile(r'``(.+?)``', re.S)
_BLOCK_START = re.compile(r'(::\s*$|^\s*\.\. code-block::)')
# a command word where a shell would run it: at the start, after a prompt,
# a pipe, ``;``, ``&&``, sudo, or a path to the venv's bin/
_CMD = r'(?:^|[$|;&]\s*|sudo\s+|\bbin/)'
# (not a message that starts with the name: ``gpu-nova-ext drain: TEXT``)
_GPU_NOVA_EXT = re.compile(_CMD + r'gpu-nova-ext\s+([a-z][a-z-]*)\b(?!:)',
                           re.M)
_OPENSTACK_GPU = re.compile(
    _CMD + r'openstack\s+(?:--[a-z-]+\s+\S+\s+)*gpu\s+([a-z]+)'
    r'(?:\s+([a-z]+))?', re.M)
# ``openstack [--option value ...] word word ...``: the command's words
# end at an option, a placeholder (SERVER) or a value
_OPENSTACK = re.compile(
    _CMD + r'openstack((?:\s+--[a-z-]+(?:[= ]\S+)?)*)((?:\s+[a-z][a-z-]*)+)',
    re.M)
_TOOL = re.compile(r'(?<![\w/.])tools/([A-Za-z0-9_-]+(?:\.[a-z]+)?)')


def snippets(text: str) -> list[str]:
    """The inline literals and literal blocks of an RST page."""
    found = [' '.join(m.group(1).split()) for m in _INLINE.finditer(text)]
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if _BLOCK_START.search(lines[i]):
            block = []
            i += 1
            while i < len(lines) and (not lines[i].strip()
                                      or lines[i][:1].isspace()):
                block.append(lines[i].strip())
                i += 1
            found.extend(line for line in block if line)
            continue
        i += 1
    return found


def openstack_gpu_commands() -> set[str]:
    parser = configparser.ConfigParser()
    parser.read(os.path.join(TOP, 'setup.cfg'))
    names = parser['entry_points']['openstack.gpu.v1'].split('\n')
    return {line.split('=')[0].strip().replace('_', ' ')
            for line in names if line.strip()}


def openstack_commands() -> set[tuple[str, ...]]:
    """Every installed OpenStackClient command, as its words."""
    installed = importlib.metadata.entry_points()
    # cliff's own commands, beside the entry points
    return {('help',), ('complete',)} | {tuple(ep.name.split('_'))
            for group in installed.groups
            if group.startswith('openstack.')
            and group != 'openstack.cli.extension'
            for ep in installed.select(group=group)}


class TestDocumentedCommandsExist(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.pages = {}
        for path in PAGES:
            with open(path) as f:
                self.pages[os.path.relpath(path, TOP)] = snippets(f.read())

    def _each(self, pattern):
        for page, found in self.pages.items():
            for snippet in found:
                for m in pattern.finditer(snippet):
                    yield page, snippet, m

    def test_gpu_nova_ext_subcommands(self):
        parser = cli.build_parser()
        known = set(parser._subparsers._group_actions[0].choices)
        seen = 0
        for page, snippet, m in self._each(_GPU_NOVA_EXT):
            seen += 1
            self.assertIn(m.group(1), known,
                          '%s shows %r: gpu-nova-ext has no %r command'
                          % (page, snippet, m.group(1)))
        self.assertGreater(seen, 20)

    def test_openstack_gpu_commands(self):
        commands = openstack_gpu_commands()
        self.assertIn('gpu host drain', commands)
        seen = 0
        for page, snippet, m in self._each(_OPENSTACK_GPU):
            seen += 1
            one = 'gpu ' + m.group(1)
            two = one + ' ' + (m.group(2) or '')
            ok = (one in commands or two.strip() in commands)
            if not ok and m.group(2) is None:
                # a group named alone (``openstack gpu quota``)
                ok = any(c.startswith(one + ' ') for c in commands)
            self.assertTrue(ok, '%s shows %r: openstack has no such gpu '
                            'command (known: %s)'
                            % (page, snippet, ', '.join(sorted(commands))))
        self.assertGreater(seen, 20)

    def test_openstack_commands(self):
        commands = openstack_commands()
        self.assertIn(('resource', 'provider', 'list'), commands)
        seen = 0
        missing = []
        for page, snippet, m in self._each(_OPENSTACK):
            words = tuple(m.group(2).split())
            if '--help' in m.group(1) or not words:
                continue
            seen += 1
            # a command and its arguments, or a group named alone
            if not (any(words[:n] in commands
                        for n in range(1, len(words) + 1))
                    or any(c[:len(words)] == words for c in commands)):
                missing.append('%s shows %r' % (page, snippet))
        self.assertEqual([], missing, 'openstack has no such command '
                         '(installed: the client and its plugins)')
        self.assertGreater(seen, 40)

    def test_tools_exist(self):
        seen = 0
        for page, snippet, m in self._each(_TOOL):
            seen += 1
            self.assertTrue(
                os.path.exists(os.path.join(TOP, 'tools', m.group(1))),
                '%s shows %r: there is no tools/%s' % (page, snippet,
                                                       m.group(1)))
        self.assertGreater(seen, 10)

    def test_stale_names_are_caught(self):
        # the checks above would see the names this page once showed
        found = snippets('Run ``gpu-nova-ext drain cmp-1``, then::\n\n'
                         '  $ openstack gpu reserve --host h\n')
        self.assertEqual(['drain'], [m.group(1) for s in found
                                     for m in _GPU_NOVA_EXT.finditer(s)])
        self.assertEqual(['reserve'], [m.group(1) for s in found
                                       for m in _OPENSTACK_GPU.finditer(s)])
