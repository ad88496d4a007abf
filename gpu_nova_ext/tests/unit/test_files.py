# SPDX-License-Identifier: Apache-2.0

"""The one atomic write of the files the commands write."""
import os
import stat

import fixtures
import testtools

from gpu_nova_ext import exception
from gpu_nova_ext import files


class TestWriteAtomic(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.path = os.path.join(self.dir, 'state.json')

    def test_replaces_the_file_with_its_mode_and_nothing_beside(self):
        with open(self.path, 'w') as f:
            f.write('old\n')
        files.write_atomic(self.path, 'new\n', mode=0o600)
        with open(self.path) as f:
            self.assertEqual('new\n', f.read())
        self.assertEqual(0o600, stat.S_IMODE(os.stat(self.path).st_mode))
        self.assertEqual(['state.json'], os.listdir(self.dir))

    def test_a_directory_is_refused_naming_the_option(self):
        exc = self.assertRaises(exception.GpuNovaExtException,
                                files.write_atomic, self.dir, 'x',
                                option='--state-file')
        self.assertIn('%s: it is a directory' % self.dir, str(exc))
        self.assertIn('--state-file', str(exc))
        self.assertEqual([], os.listdir(self.dir))

    def test_a_failed_write_keeps_the_old_file_and_no_temporary(self):
        with open(self.path, 'w') as f:
            f.write('old\n')
        missing = os.path.join(self.dir, 'gone', 'state.json')
        exc = self.assertRaises(exception.GpuNovaExtException,
                                files.write_atomic, missing, 'x')
        self.assertIn('Cannot write %s' % missing, str(exc))
        self.assertIn('Choose a writable --output path', str(exc))
        # an unencodable text fails after the temporary file was made
        self.assertRaises(UnicodeEncodeError, files.write_atomic,
                          self.path, '\ud800')
        with open(self.path) as f:
            self.assertEqual('old\n', f.read())
        self.assertEqual(['state.json'], os.listdir(self.dir))
