#    Licensed under the Apache License, Version 2.0 (the "License"); you may
#    not use this file except in compliance with the License. You may obtain
#    a copy of the License at
#
#         http://www.apache.org/licenses/LICENSE-2.0
#
#    Unless required by applicable law or agreed to in writing, software
#    distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
#    WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
#    License for the specific language governing permissions and limitations
#    under the License.

"""The key file reader refuses planted files; the writer opens no old name."""

import os
import pwd
import stat
import unittest

import fixtures

from trove_upgrade.common import exception as exceptions
from trove_upgrade.common import secret_files
from trove_upgrade.tests import base


def _nobody():
    return pwd.getpwnam('nobody').pw_uid


class TestReadSecretFile(base.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.path = os.path.join(self.dir, 'key')
        secret_files.write_secret_file(self.path, b'secret')

    def assertInsecure(self, expected):
        error = self.assertRaises(secret_files.InsecureKeyFileError,
                                  secret_files.read_secret_file, self.path)
        self.assertIn(expected, str(error))

    def test_reads_a_private_file(self):
        for mode in (0o600, 0o400):
            os.chmod(self.path, mode)
            self.assertEqual(b'secret',
                             secret_files.read_secret_file(self.path))

    def test_refuses_modes_that_let_others_in(self):
        for mode in (0o640, 0o604, 0o700, 0o666):
            os.chmod(self.path, mode)
            self.assertInsecure('has mode %04o; it must be 0600 or 0400'
                                % mode)

    def test_refuses_a_symbolic_link(self):
        link = os.path.join(self.dir, 'link')
        os.symlink(self.path, link)
        error = self.assertRaises(secret_files.InsecureKeyFileError,
                                  secret_files.read_secret_file, link)
        self.assertIn('is a symbolic link', str(error))

    def test_refuses_a_fifo_without_blocking(self):
        fifo = os.path.join(self.dir, 'fifo')
        os.mkfifo(fifo, 0o600)
        error = self.assertRaises(secret_files.InsecureKeyFileError,
                                  secret_files.read_secret_file, fifo)
        self.assertIn('is not a regular file', str(error))

    @unittest.skipUnless(os.geteuid() == 0, 'giving a file away needs root')
    def test_refuses_a_file_of_another_user(self):
        os.chown(self.path, _nobody(), -1)
        self.assertInsecure('is owned by uid %d, not by uid 0 or root'
                            % _nobody())

    def test_refuses_a_file_too_large(self):
        error = self.assertRaises(exceptions.KeyFileError,
                                  secret_files.read_secret_file, self.path,
                                  max_size=3)
        self.assertIn('too large', str(error))

    def test_a_missing_file_is_a_key_file_error(self):
        error = self.assertRaises(exceptions.KeyFileError,
                                  secret_files.read_secret_file,
                                  self.path + '.missing')
        self.assertNotIsInstance(error, secret_files.InsecureKeyFileError)


class TestWriteSecretFile(base.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.path = os.path.join(self.dir, 'key')

    def test_mode_0600_whatever_the_umask(self):
        old = os.umask(0)
        self.addCleanup(os.umask, old)
        secret_files.write_secret_file(self.path, b'k')
        self.assertEqual(0o600, stat.S_IMODE(os.stat(self.path).st_mode))
        self.assertEqual(['key'], os.listdir(self.dir))

    def test_replaces_a_link_instead_of_writing_through_it(self):
        target = os.path.join(self.dir, 'target')
        os.symlink(target, self.path)
        secret_files.write_secret_file(self.path, b'k')
        self.assertFalse(os.path.lexists(target))
        self.assertFalse(os.path.islink(self.path))
        self.assertEqual(b'k', secret_files.read_secret_file(self.path))

    def test_keeps_an_existing_file_when_told_not_to_replace(self):
        secret_files.write_secret_file(self.path, b'old')
        self.assertRaises(exceptions.KeyFileExistsError,
                          secret_files.write_secret_file, self.path, b'new',
                          replace=False)
        self.assertEqual(b'old', secret_files.read_secret_file(self.path))
        self.assertEqual(['key'], os.listdir(self.dir))

    def test_a_failed_block_leaves_nothing(self):
        def fail():
            with secret_files.secret_file_writer(self.path):
                raise RuntimeError('stop')
        self.assertRaises(RuntimeError, fail)
        self.assertEqual([], os.listdir(self.dir))

    def test_a_missing_directory_is_named_by_the_path_given(self):
        path = os.path.join(self.dir, 'missing', 'key')
        error = self.assertRaises(FileNotFoundError,
                                  secret_files.write_secret_file, path, b'k')
        self.assertEqual(path, error.filename)
