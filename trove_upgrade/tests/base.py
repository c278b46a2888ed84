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

"""Base test case: isolated config, logging capture, no leaked state."""

import time

import fixtures
from oslo_config import fixture as config_fixture
from oslotest import base

from trove_upgrade import conf
from trove_upgrade.conf import database
from trove_upgrade.conf import opts

# How long a killed process may take to leave: bounds a broken test only.
_DEATH_WAIT = 30


def _running(pid):
    """Whether ``pid`` runs; a zombie, killed but not reaped yet, does not."""
    try:
        with open('/proc/%d/stat' % pid) as f:
            state = f.read().rsplit(')', 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ('Z', 'X')


class TestCase(base.BaseTestCase):
    """Every test gets a fresh view of CONF, reset when it ends."""

    def setUp(self):
        super().setUp()
        self.conf_fixture = self.useFixture(config_fixture.Config(conf.CONF))
        self.conf = self.conf_fixture.conf
        # The fixture's cleanup drops defaults set at import time, such as
        # the SQLite connection under state_path: set them again.
        database.register_opts(self.conf)
        # As the API at start, whichever test of the process ran first.
        opts.set_healthcheck_defaults()
        self.conf.set_default(
            'state_path', self.useFixture(fixtures.TempDir()).path)
        # Sealing is required by default; tests of other concerns run
        # unsealed, and those of sealing set what they test.
        self.conf.set_default('require_sealed', False, group='conductor')
        self.conf.set_default('require_sealed', False, group='agent')

    def flags(self, group=None, **kw):
        """Override options for the duration of the test."""
        for name, value in kw.items():
            self.conf.set_override(name, value, group)

    def assertProcessesDie(self, pids):
        """Wait for each of ``pids`` to be killed; fail if one lives on."""
        deadline = time.monotonic() + _DEATH_WAIT
        while any(_running(pid) for pid in pids):
            if time.monotonic() > deadline:
                self.fail('still running: %s'
                          % [pid for pid in pids if _running(pid)])
            time.sleep(0.1)
