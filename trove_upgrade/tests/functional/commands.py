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

"""What the tests that run the console commands as real processes share."""

import os
import sys

import fixtures

from trove_upgrade.tests import base

# The console scripts of the virtualenv the tests run in.
BIN = os.path.dirname(sys.executable)
# Detects a hang; never a timing assertion.
TIMEOUT = 60


class CommandTestCase(base.TestCase):
    """A test with a temporary directory of its own for the commands' files."""

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def path(self, *names):
        return os.path.join(self.tmp, *names)
