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

"""The rsync strategy against a real rsync daemon."""

import os
import stat

from trove_upgrade.agent.strategies import exception as exceptions
from trove_upgrade.tests.functional import servers
from trove_upgrade.tests.functional.strategies import base

PACKAGE = os.urandom(700 * 1024 + 3)
MANIFEST = b'{"signed": {}}'


class RsyncStrategyTestCase(base.StrategyTestCase):

    strategy = 'rsync'

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.root = cls.class_dir([('pkg.tar', PACKAGE),
                                  ('pkg.tar.manifest', MANIFEST)])
        os.symlink('/etc/hostname', os.path.join(cls.root, 'link.tar'))
        os.mkdir(os.path.join(cls.root, 'dir.tar'))
        cls.daemon = servers.RsyncDaemon(cls.root, user='agent',
                                         secret='rsync-secret')
        cls.daemon.setUp()
        cls.addClassCleanup(cls.daemon.cleanUp)

    def setUp(self):
        super().setUp()
        self.settings = {'password_file': self.daemon.password_file()}

    def test_fetch_package_and_manifest(self):
        strategy = self._strategy()
        location = self.daemon.url('pkg.tar')

        strategy.check_location(location)
        size = strategy.fetch(location, self.dest, len(PACKAGE))
        manifest_size = strategy.fetch(location + '.manifest',
                                       self.dest + '.manifest', 1024)

        self.assertEqual(len(PACKAGE), size)
        self.assertEqual(len(MANIFEST), manifest_size)
        self.assertEqual(PACKAGE, self._read_dest())
        self.assertEqual(['pkg.tar', 'pkg.tar.manifest'],
                         sorted(os.listdir(self.dest_dir)))

    def test_exact_size_cap_allowed_one_byte_less_refused(self):
        strategy = self._strategy()
        location = self.daemon.url('pkg.tar')

        error = self.assertRaises(exceptions.SizeLimitExceededError,
                                  strategy.fetch, location, self.dest,
                                  len(PACKAGE) - 1)

        self.assertIn('lists %d bytes' % len(PACKAGE), str(error))
        self.assertEqual([], os.listdir(self.dest_dir))
        self.assertEqual(len(PACKAGE),
                         strategy.fetch(location, self.dest, len(PACKAGE)))

    def test_daemon_lying_about_the_size_cannot_exceed_the_cap(self):
        # A daemon that lists fewer bytes than it sends: rsync itself is
        # made to report a small size and to ignore --max-size, so only the
        # file-size limit of the rsync process stands in the way.
        wrapper = os.path.join(self.config_dir, 'lying-rsync')
        with open(wrapper, 'w') as f:
            f.write('#!/bin/sh\n'
                    'case "$*" in *--list-only*)\n'
                    '  echo "-rw-r--r--          1,000 2026/01/01 00:00:00 '
                    'pkg.tar"; exit 0;;\n'
                    'esac\n'
                    'for a in "$@"; do case "$a" in --max-size=*) ;; '
                    '*) set -- "$@" "$a";; esac; shift; done\n'
                    'exec rsync "$@"\n')
        os.chmod(wrapper, stat.S_IRWXU)
        strategy = self._strategy(rsync_path=wrapper)

        error = self.assertRaises(exceptions.SizeLimitExceededError,
                                  strategy.fetch, self.daemon.url('pkg.tar'),
                                  self.dest, 100 * 1024)

        self.assertIn('sent more than it listed', str(error))
        self.assertEqual([], os.listdir(self.dest_dir))

    def test_not_found(self):
        strategy = self._strategy()

        error = self.assertRaises(
            exceptions.ObjectNotFoundError, strategy.fetch,
            self.daemon.url('missing.tar'), self.dest,
            1024)

        self.assertIn('No such file or directory', str(error))

    def test_unknown_module(self):
        strategy = self._strategy()
        location = self.daemon.url('pkg.tar').replace('/packages/',
                                                      '/nomodule/')

        error = self.assertRaises(exceptions.ObjectNotFoundError,
                                  strategy.check_location, location)

        self.assertIn('Unknown module', str(error))

    def test_wrong_password(self):
        password_file = os.path.join(self.config_dir, 'wrong.password')
        with open(os.open(password_file, os.O_WRONLY | os.O_CREAT, 0o600),
                  'w') as f:
            f.write('wrong\n')
        strategy = self._strategy(password_file=password_file)

        error = self.assertRaises(exceptions.AccessDeniedError, strategy.fetch,
                                  self.daemon.url('pkg.tar'), self.dest,
                                  len(PACKAGE))

        self.assertIn('auth failed', str(error))

    def test_symlink_and_directory_refused(self):
        strategy = self._strategy()

        for name in ('link.tar', 'dir.tar'):
            error = self.assertRaises(exceptions.RequestRejectedError,
                                      strategy.fetch, self.daemon.url(name),
                                      self.dest, 1024 * 1024)
            self.assertIn('not a regular file', str(error))
        self.assertEqual([], os.listdir(self.dest_dir))

    def test_daemon_down_fails_after_retries(self):
        strategy = self._strategy()
        location = 'rsync://127.0.0.1:%d/packages/pkg.tar' % (
            servers.free_port())

        error = self.assertRaises(exceptions.DownloadError, strategy.fetch,
                                  location, self.dest, 1024)

        self.assertIn('after 2 attempt(s)', str(error))
        self.assertIn('Connection refused', str(error))
