# SPDX-License-Identifier: Apache-2.0

"""The design document has the sections the code's docstrings cite."""
import os
import re

import testtools

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..',
                                   '..', '..'))
DESIGN = os.path.join(TOP, 'doc', 'source', 'contributor', 'index.rst')
SECTIONS = ('Architecture', 'Placement ownership', 'Flavor extra specs',
            'Scheduler plugins', 'Fragmentation-aware placement',
            'Topology', 'State protocol', 'Health', 'Reservations',
            'MIG layouts and power', 'Privileged work',
            'Remediation, drains and driver roll-outs',
            'GPU quota per model', 'Operator CLI', 'OpenStackClient plugin',
            'Monitoring',
            'Simulator', 'Packaging, versions and the install matrix',
            'Tests', 'Development cloud')


def _titles():
    with open(DESIGN) as f:
        lines = f.read().splitlines()
    return [title for title, rule in zip(lines, lines[1:])
            if rule and set(rule) == {'='} and len(rule) >= len(title)
            and title.strip() and set(title) != {'='}]


class TestDesignDoc(testtools.TestCase):

    def test_sections(self):
        self.assertEqual(list(SECTIONS), _titles()[1:])

    def test_every_citation_names_a_section(self):
        cited = []
        for root, _dirs, files in os.walk(os.path.join(TOP, 'gpu_nova_ext')):
            for name in files:
                if not name.endswith('.py') or name == 'test_design.py':
                    continue
                with open(os.path.join(root, name)) as f:
                    text = ' '.join(f.read().split())
                cited.extend((name, m) for m in re.findall(
                    r'design doc:\s*([A-Z][A-Za-z -]+)', text))
                self.assertNotIn('DESIGN ' + 'section', text, name)
        self.assertTrue(cited)
        for name, text in cited:
            self.assertTrue(any(text.startswith(s) for s in SECTIONS),
                            (name, text))

    def test_listed_in_the_index(self):
        with open(os.path.join(TOP, 'doc', 'source', 'index.rst')) as f:
            self.assertIn('   contributor/index\n', f.read())
