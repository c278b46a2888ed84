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

"""conf.readable_config: a configuration file it cannot read is one line."""

import errno
import io
import os
import threading

import fixtures
from oslo_config import cfg

from trove_upgrade import conf
from trove_upgrade.tests import base


class TestReadableConfig(base.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.stderr = self.useFixture(
            fixtures.MonkeyPatch('sys.stderr', io.StringIO())).new_value

    def parse(self, path, status=2):
        raised = self.assertRaises(SystemExit, self._parse, path, status)
        self.assertEqual(status, raised.code)
        [line] = self.stderr.getvalue().splitlines()
        self.assertTrue(line.startswith(
            'prog: cannot read its configuration: '), line)
        return line

    def _parse(self, path, status, option='--config-file'):
        argv = [option, path]
        with conf.readable_config('prog', argv, status=status):
            cfg.ConfigOpts()(argv, project='x')

    def fifo(self, path):
        """A FIFO at ``path``, whose open a writer ends when it blocks.

        So that a parse that opens it fails the test instead of hanging.
        """
        os.mkfifo(path)
        done = threading.Event()

        def unblock():
            while not done.wait(0.01):
                try:
                    os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
                except OSError as e:
                    if e.errno != errno.ENXIO:
                        return
        thread = threading.Thread(target=unblock, daemon=True)
        thread.start()
        self.addCleanup(thread.join)
        self.addCleanup(done.set)
        return path

    def write(self, name, data):
        path = os.path.join(self.dir, name)
        with open(path, 'wb') as f:
            f.write(data)
        return path

    def test_missing(self):
        self.assertIn('Failed to find some config files',
                      self.parse(os.path.join(self.dir, 'none.conf')))

    def test_a_directory(self):
        path = os.path.join(self.dir, 'dir.conf')
        os.mkdir(path)
        self.assertIn('Is a directory', self.parse(path))

    def test_not_ini(self):
        path = self.write('a.conf', b'[DEFAULT\nx = 1\n')
        self.assertIn('Failed to parse %s' % path, self.parse(path, 255))

    def test_not_utf8(self):
        path = self.write('a.conf', b'[DEFAULT]\nx = \xff\n')
        self.assertIn('a configuration file is not UTF-8 text',
                      self.parse(path))

    def test_permission_denied(self):
        # What oslo.config raises for a file the user may not read (a
        # traceback for any user but root, whom nothing denies).
        def parse():
            with conf.readable_config('prog', []):
                raise cfg.ConfigFilesPermissionDeniedError(['/etc/x.conf'])
        raised = self.assertRaises(SystemExit, parse)
        self.assertEqual(2, raised.code)
        self.assertEqual('prog: cannot read its configuration: Failed to '
                         'open some config files: /etc/x.conf\n',
                         self.stderr.getvalue())

    def test_a_fifo_is_refused_unopened(self):
        # oslo.config's open() waited for ever for a writer.
        path = self.fifo(os.path.join(self.dir, 'fifo.conf'))
        self.assertEqual('prog: cannot read its configuration: Failed to '
                         'parse %s: not a regular file' % path,
                         self.parse(path))

    def test_a_fifo_in_a_config_dir_or_an_abbreviated_option(self):
        self.fifo(os.path.join(self.dir, 'fifo.conf'))
        for option in ('--config-dir', '--config-d'):
            self.stderr.truncate(0)
            self.stderr.seek(0)
            raised = self.assertRaises(SystemExit, self._parse, self.dir, 2,
                                       option)
            self.assertEqual(2, raised.code)
            self.assertIn('fifo.conf: not a regular file',
                          self.stderr.getvalue())

    def test_a_device_is_refused(self):
        # /dev/zero never ends: readlines() would fill the memory.
        self.assertIn('Failed to parse /dev/zero: not a regular file',
                      self.parse('/dev/zero'))

    def test_a_readable_file_passes(self):
        path = self.write('a.conf', b'[DEFAULT]\n')
        self._parse(path, 2)
        self.assertEqual('', self.stderr.getvalue())
