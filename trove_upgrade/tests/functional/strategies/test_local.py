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

"""The local strategy against a real file system."""

import os

import fixtures

from trove_upgrade.agent import strategies
from trove_upgrade.agent.strategies import exception as exceptions
from trove_upgrade.tests import base
from trove_upgrade.tests.functional import servers

PACKAGE = os.urandom(3 * 1024 * 1024 + 5)


class LocalStrategyTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        tmp = self.useFixture(fixtures.TempDir()).path
        self.packages = os.path.join(tmp, 'packages')
        self.outside = os.path.join(tmp, 'outside')
        self.dest_dir = os.path.join(tmp, 'dest')
        for directory in (self.packages, self.outside, self.dest_dir):
            os.mkdir(directory)
        self.package = self._write(self.packages, 'pkg.tar', PACKAGE)
        self._write(self.packages, 'pkg.tar.manifest', b'{}')
        self.secret = self._write(self.outside, 'secret', b'secret')
        self.dest = os.path.join(self.dest_dir, 'pkg.tar')
        config_dir = os.path.join(tmp, 'strategies.d')
        servers.write_strategy_conf(config_dir, 'local', {
            'allowed_dirs': [self.packages], 'chunk_size': 65536})
        self.flags(group='agent', strategy_config_dir=config_dir,
                   download_retry_delay=0)
        self.strategy = strategies.load('local', self.conf)

    @staticmethod
    def _write(directory, name, data):
        path = os.path.join(directory, name)
        with open(path, 'wb') as f:
            f.write(data)
        return path

    def test_fetch_path_and_file_url(self):
        size = self.strategy.fetch(self.package, self.dest, len(PACKAGE))
        manifest_size = self.strategy.fetch(
            'file://' + self.package + '.manifest', self.dest + '.manifest',
            100)

        self.assertEqual(len(PACKAGE), size)
        self.assertEqual(2, manifest_size)
        with open(self.dest, 'rb') as f:
            self.assertEqual(PACKAGE, f.read())
        self.assertEqual(['pkg.tar', 'pkg.tar.manifest'],
                         sorted(os.listdir(self.dest_dir)))

    def test_ranges_are_read_back_to_back(self):
        ranges = [(0, 10), (1 << 20, 70000), (len(PACKAGE) - 5, 5)]
        size = self.strategy.fetch_ranges(self.package, ranges, self.dest)
        self.assertEqual(70015, size)
        with open(self.dest, 'rb') as f:
            self.assertEqual(b''.join(PACKAGE[a:a + n] for a, n in ranges),
                             f.read())

    def test_a_range_past_the_end_fails_and_leaves_nothing(self):
        self.assertRaises(exceptions.DownloadError,
                          self.strategy.fetch_ranges, self.package,
                          [(len(PACKAGE) - 5, 6)], self.dest)
        self.assertEqual([], os.listdir(self.dest_dir))

    def test_check_location(self):
        self.strategy.check_location(self.package)
        self.assertRaises(exceptions.ObjectNotFoundError,
                          self.strategy.check_location,
                          os.path.join(self.packages, 'missing.tar'))

    def test_path_outside_allowed_dirs_refused(self):
        error = self.assertRaises(exceptions.AccessDeniedError,
                                  self.strategy.fetch, self.secret,
                                  self.dest, 100)

        self.assertIn('outside [local] allowed_dirs', str(error))
        self.assertEqual([], os.listdir(self.dest_dir))

    def test_traversal_refused(self):
        location = os.path.join(self.packages, '..', 'outside', 'secret')

        error = self.assertRaises(exceptions.InvalidLocationError,
                                  self.strategy.fetch, location, self.dest,
                                  100)

        self.assertIn('".."', str(error))

    def test_symlink_escaping_allowed_dirs_refused(self):
        link = os.path.join(self.packages, 'link.tar')
        os.symlink(self.secret, link)

        self.assertRaises(
            exceptions.AccessDeniedError, self.strategy.fetch, link,
            self.dest, 100)
        self.assertEqual([], os.listdir(self.dest_dir))

    def test_symlink_inside_allowed_dirs_followed(self):
        link = os.path.join(self.packages, 'current.tar')
        os.symlink('pkg.tar', link)

        self.assertEqual(len(PACKAGE),
                         self.strategy.fetch(link, self.dest, len(PACKAGE)))

    def test_device_refused(self):
        link = os.path.join(self.packages, 'zero.tar')
        os.symlink('/dev/zero', link)

        self.assertRaises(
            exceptions.AccessDeniedError, self.strategy.fetch, link,
            self.dest, 100)

    def test_fifo_refused_without_blocking(self):
        fifo = os.path.join(self.packages, 'fifo.tar')
        os.mkfifo(fifo)

        error = self.assertRaises(exceptions.AccessDeniedError,
                                  self.strategy.fetch, fifo, self.dest, 100)

        self.assertIn('not a regular file', str(error))

    def test_directory_refused(self):
        os.mkdir(os.path.join(self.packages, 'dir.tar'))

        self.assertRaises(exceptions.AccessDeniedError, self.strategy.fetch,
                          os.path.join(self.packages, 'dir.tar'), self.dest,
                          100)

    def test_size_cap(self):
        error = self.assertRaises(exceptions.SizeLimitExceededError,
                                  self.strategy.fetch, self.package,
                                  self.dest, len(PACKAGE) - 1)

        self.assertIn('holds %d bytes' % len(PACKAGE), str(error))
        self.assertEqual([], os.listdir(self.dest_dir))

    def test_failed_fetch_keeps_previous_destination(self):
        with open(self.dest, 'wb') as f:
            f.write(b'previous')

        self.assertRaises(exceptions.ObjectNotFoundError, self.strategy.fetch,
                          os.path.join(self.packages, 'missing.tar'),
                          self.dest, 100)

        with open(self.dest, 'rb') as f:
            self.assertEqual(b'previous', f.read())
        self.assertEqual(['pkg.tar'], os.listdir(self.dest_dir))
