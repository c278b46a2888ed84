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

"""Guest state providers: the file, the command, and plugins."""

import os

import fixtures

from trove_upgrade.agent import guest_state
from trove_upgrade.tests import base


class TestGuestState(base.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.path = os.path.join(self.tmp, 'state')
        self.flags(group='agent', guest_state_file=self.path)

    def test_missing_file_means_running(self):
        provider = guest_state.load(self.conf)
        self.assertEqual('running', provider.get_state())

    def test_file_state_is_normalised(self):
        with open(self.path, 'w') as f:
            f.write('  Backup\n')
        self.assertEqual('backup', guest_state.load(self.conf).get_state())

    def test_empty_file_is_unknown_and_not_upgradeable(self):
        open(self.path, 'w').close()
        state = guest_state.load(self.conf).get_state()
        self.assertEqual('unknown', state)
        self.assertFalse(guest_state.is_upgradeable(state))

    def test_command_provider(self):
        self.flags(group='agent', guest_state_provider='command',
                   guest_state_command='echo resize')
        self.assertEqual('resize', guest_state.load(self.conf).get_state())

    def test_failing_command_is_unknown(self):
        self.flags(group='agent', guest_state_provider='command',
                   guest_state_command='sh -c "echo oops >&2; exit 4"')
        provider = guest_state.load(self.conf)
        e = self.assertRaises(guest_state.GuestStateError,
                              provider.get_state)
        self.assertIn('exited with 4: oops', str(e))
        self.assertEqual('unknown', guest_state.current_state(provider))

    def test_command_output_beyond_its_first_line_is_not_kept(self):
        self.flags(group='agent', guest_state_provider='command',
                   guest_state_command='sh -c "echo Backup; yes | head -c '
                                       '67108864"')
        self.assertEqual('backup', guest_state.load(self.conf).get_state())

    def test_command_provider_needs_a_command(self):
        self.flags(group='agent', guest_state_provider='command')
        self.assertRaises(guest_state.GuestStateError, guest_state.load,
                          self.conf)

    def test_unknown_provider_is_a_clear_error(self):
        self.flags(group='agent', guest_state_provider='nonexistent')
        e = self.assertRaises(guest_state.GuestStateError, guest_state.load,
                              self.conf)
        self.assertIn("unknown guest state provider 'nonexistent'", str(e))

    def test_only_running_is_upgradeable(self):
        self.assertTrue(guest_state.is_upgradeable('running'))
        for state in guest_state.NON_UPGRADEABLE:
            self.assertFalse(guest_state.is_upgradeable(state))
