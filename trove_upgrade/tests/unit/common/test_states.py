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

"""The state machine, and its documentation kept in step with it."""

import os
import re

from trove_upgrade.common import states
from trove_upgrade.tests import base

DOC = os.path.join(os.path.dirname(__file__), '..', '..', '..', '..',
                   'doc', 'source', 'reference', 'state-machine.rst')


class TestStates(base.TestCase):

    def test_forward_moves_are_legal(self):
        self.assertTrue(states.is_legal(states.SENT, states.DOWNLOADING))
        self.assertTrue(states.is_legal(states.SENT, states.INSTALLING))
        self.assertTrue(states.is_legal(states.PENDING, states.DOWNLOADING))

    def test_backward_moves_are_stale_not_legal(self):
        self.assertFalse(states.is_legal(states.INSTALLING,
                                         states.DOWNLOADING))
        self.assertTrue(states.is_duplicate_or_stale(states.INSTALLING,
                                                     states.DOWNLOADING))
        self.assertTrue(states.is_duplicate_or_stale(states.SENT,
                                                     states.PENDING))

    def test_same_state_is_a_duplicate(self):
        for state in states.ALL_STATES:
            self.assertFalse(states.is_legal(state, state))
            self.assertTrue(states.is_duplicate_or_stale(state, state))

    def test_cancel_only_before_the_agent_starts(self):
        for state in states.ORDER:
            self.assertEqual(state in states.CANCELLABLE_STATES,
                             states.is_legal(state, states.CANCELLED), state)
        self.assertFalse(states.is_duplicate_or_stale(states.INSTALLING,
                                                      states.CANCELLED))

    def test_rollback_only_after_install_began(self):
        legal = {s for s in states.ORDER
                 if states.is_legal(s, states.ROLLED_BACK)}
        self.assertEqual({states.INSTALLING, states.RESTARTING}, legal)

    def test_final_states_are_final(self):
        for final in states.FINAL_STATES - {states.TIMED_OUT}:
            for state in states.ALL_STATES:
                self.assertFalse(states.is_legal(final, state))

    def test_late_final_report_replaces_a_timeout(self):
        for state in (states.SUCCESS, states.FAILED, states.ROLLED_BACK):
            self.assertTrue(states.is_legal(states.TIMED_OUT, state))
            self.assertFalse(states.is_duplicate_or_stale(states.TIMED_OUT,
                                                          state))
        self.assertTrue(states.is_duplicate_or_stale(states.TIMED_OUT,
                                                     states.DOWNLOADING))
        self.assertFalse(states.is_legal(states.TIMED_OUT, states.CANCELLED))

    def test_conflicting_final_report_is_ignored(self):
        self.assertTrue(states.is_duplicate_or_stale(states.SUCCESS,
                                                     states.FAILED))

    def test_documented_table_matches_the_code(self):
        with open(DOC) as f:
            text = f.read()
        table = text.split('All legal moves')[1]
        rows = re.findall(r'^   \* - (\w+)\n     - ([A-Z_,\s]+?)(?=\n   \*|'
                          r'\n\n)', table, re.M)
        documented = sorted(
            (src, dst.strip())
            for src, dsts in rows for dst in dsts.split(',') if dst.strip())
        self.assertEqual(states.transitions(), documented)
