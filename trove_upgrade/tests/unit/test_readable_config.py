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

import io
import os

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

    def _parse(self, path, status):
        with conf.readable_config('prog', status=status):
            cfg.ConfigOpts()(['--config-file', path], project='x')

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

    def test_a_readable_file_passes(self):
        path = self.write('a.conf', b'[DEFAULT]\n')
        self._parse(path, 2)
        self.assertEqual('', self.stderr.getvalue())
