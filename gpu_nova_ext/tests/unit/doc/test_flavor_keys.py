# SPDX-License-Identifier: Apache-2.0

"""The table of ``gpu:`` keys in flavors.rst is rendered from the request
parser's registry (``doc/source/_exts/flavor_keys.py``), not hand-kept:
Sphinx builds the directive (warnings are errors, as in tools/build-docs)
and the page shows every key, every enumerated value with its meaning and
each free-form key's rule."""
import html
import os
import re
import sys

import fixtures
from sphinx import application
import testtools

from gpu_nova_ext.scheduler import request

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..',
                                   '..', '..'))
EXTS = os.path.join(TOP, 'doc', 'source', '_exts')
QUOTES = str.maketrans({'\u201c': '"', '\u201d': '"', '\u2019': "'"})


def squeeze(text: str) -> str:
    return ''.join(text.split())


class TestFlavorKeysTable(testtools.TestCase):

    def build(self) -> str:
        """The text of a page holding the directive, built by Sphinx."""
        tmp = self.useFixture(fixtures.TempDir()).path
        src, out = os.path.join(tmp, 'src'), os.path.join(tmp, 'out')
        os.mkdir(src)
        with open(os.path.join(src, 'conf.py'), 'w') as f:
            f.write('import sys\nsys.path.insert(0, %r)\n'
                    "extensions = ['flavor_keys']\n" % EXTS)
        with open(os.path.join(src, 'index.rst'), 'w') as f:
            # as in flavors.rst: inside a list item
            f.write('Keys\n====\n\n* keys:\n\n'
                    '  .. gpu-nova-ext-flavor-keys::\n')
        self.addCleanup(sys.modules.pop, 'flavor_keys', None)
        app = application.Sphinx(src, src, out, os.path.join(tmp, 'd'),
                                 'html', status=None, warning=None,
                                 warningiserror=True)
        app.build()
        with open(os.path.join(out, 'index.html')) as f:
            text = re.sub(r'<[^>]+>', ' ', f.read())
        # Sphinx's smart quotes back, and no blanks (inline literals are
        # elements of their own)
        text = html.unescape(text).translate(QUOTES)
        return ''.join(text.split())

    def test_every_key_and_value(self):
        text = self.build()
        for key in request.KEYS.values():
            self.assertIn(squeeze(key.name), text)
            self.assertIn(squeeze(key.help), text)
            self.assertIn(key.filter, text)
            for value, meaning in key.values:
                self.assertIn(squeeze('%s: %s' % (value, meaning)
                                      if meaning else value), text)
            if not key.values:
                self.assertIn(squeeze(key.allowed), text)
        # the value fragmentation that the CLI's copy forgot (issue 36)
        self.assertIn(squeeze('fragmentation: Prefer the GPU'), text)

    def test_the_page_uses_the_directive(self):
        with open(os.path.join(TOP, 'doc', 'source', 'flavors.rst')) as f:
            page = f.read()
        self.assertIn('.. gpu-nova-ext-flavor-keys::', page)
        with open(os.path.join(TOP, 'doc', 'source', 'conf.py')) as f:
            self.assertIn("'flavor_keys'", f.read())
        # no hand-kept rows of the table are left
        for key in request.KEYS:
            self.assertNotRegex(page, r'\n  ``%s``  +\S' % re.escape(key))
