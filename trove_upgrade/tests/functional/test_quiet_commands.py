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

"""The console scripts print no warning that is not about their input.

A warning a library gives on import (eventlet's deprecation, dnspython's
DSA names with recent cryptography) would start every command's output
with lines the user can do nothing about; ``trove_upgrade.cmd`` filters
exactly those. Each command runs as the real console script.
"""

import os
import re
import subprocess
import sys

import fixtures

from trove_upgrade.tests import base

BIN = os.path.dirname(sys.executable)
# How Python prints a warning: "<file>:<line>: <Category>Warning: <text>".
WARNING = re.compile(r'\w*Warning\b')


class TestQuietCommands(base.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def run_command(self, *argv):
        result = subprocess.run(
            [os.path.join(BIN, argv[0]), *argv[1:]], cwd=self.tmp,
            capture_output=True, text=True, timeout=300,
            stdin=subprocess.DEVNULL)
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertIsNone(WARNING.search(result.stderr), result.stderr)
        return result

    def test_help_of_every_console_script(self):
        for script in ('trove-upgrade-package', 'trove-upgrade-manage',
                       'trove-upgrade-status', 'trove-upgrade-adopt',
                       'trove-upgrade-api', 'trove-upgrade-conductor',
                       'trove-upgrade-agent'):
            self.assertIn('usage', self.run_command(script, '--help').stdout)

    def test_package_keygen(self):
        self.run_command('trove-upgrade-package', 'keygen',
                         '--signing-key', 'signing.key',
                         '--encryption-key', 'encryption.key')
        self.assertTrue(os.path.exists(os.path.join(self.tmp,
                                                    'signing.key.pub')))
