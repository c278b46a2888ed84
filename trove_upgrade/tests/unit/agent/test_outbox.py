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

"""The outbox casts progress, calls the final report, keeps what failed."""

import fixtures

from trove_upgrade.agent import journal as journal_mod
from trove_upgrade.agent import outbox
from trove_upgrade.common import rpc_interface
from trove_upgrade.tests import base

CONFIRM_INTERVAL = 30.0


class FlakyConductor:
    """Takes ``per_call`` reports a call; fails after ``fail_after``.

    ``messages`` holds ``(kind, [to_state, ...])`` of each message taken.
    """

    def __init__(self, per_call=rpc_interface.MAX_REPORTS_PER_CALL):
        self.per_call = per_call
        self.received = []
        self.messages = []
        self.fail_after = None

    def reports_per_call(self):
        return self.per_call

    def _take(self, kind, instance_id, reports):
        assert len(reports) <= self.per_call, reports
        if (self.fail_after is not None
                and len(self.messages) >= self.fail_after):
            raise ConnectionError('broker down')
        self.messages.append((kind, [r['to_state'] for r in reports]))
        self.received.extend(
            (instance_id, r['upgrade_id'], r['to_state'], r['detail'],
             r['from_version'], r['to_version']) for r in reports)

    def report_upgrade_states(self, context, instance_id, reports):
        self._take('call', instance_id, reports)

    def cast_upgrade_states(self, context, instance_id, reports):
        assert self.per_call > 1, 'no cast below 1.2'
        self._take('cast', instance_id, reports)


class OutboxTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.root = self.useFixture(fixtures.TempDir()).path
        self.journal = journal_mod.UpgradeJournal(self.root)
        self.conductor = FlakyConductor()
        self.outbox = self.new_outbox()
        self.now = 1000000.0
        self.useFixture(fixtures.MockPatch(
            'trove_upgrade.agent.outbox.time.time', lambda: self.now))

    def new_outbox(self):
        return outbox.Outbox(journal_mod.UpgradeJournal(self.root),
                             self.conductor, None, 'inst', CONFIRM_INTERVAL)

    def add(self, *to_states):
        with self.journal.update() as data:
            for state in to_states:
                self.journal.add_report(data, 'u1', state, state.lower(),
                                        '1', '2')

    def pending(self):
        return [(r['to_state'], r.get(outbox.CAST_AT))
                for r in self.outbox.pending()]


class TestFinalReports(OutboxTestCase):

    def setUp(self):
        super().setUp()
        self.add('DOWNLOADING', 'VERIFYING', 'SUCCESS')

    def test_flush_sends_in_order_in_one_call_and_empties(self):
        self.assertEqual(3, self.outbox.flush())
        self.assertEqual(
            [('call', ['DOWNLOADING', 'VERIFYING', 'SUCCESS'])],
            self.conductor.messages)
        self.assertEqual(('inst', 'u1', 'SUCCESS', 'success', '1', '2'),
                         self.conductor.received[-1])
        self.assertEqual([], self.outbox.pending())

    def test_more_than_a_call_carries_go_in_several(self):
        self.conductor.per_call = 2
        self.assertEqual(3, self.outbox.flush())
        self.assertEqual([('call', ['DOWNLOADING', 'VERIFYING']),
                          ('call', ['SUCCESS'])], self.conductor.messages)

    def test_a_failed_call_keeps_all_its_reports(self):
        self.conductor.fail_after = 0
        self.assertEqual(0, self.outbox.flush())
        self.assertEqual(['DOWNLOADING', 'VERIFYING', 'SUCCESS'],
                         [r['to_state'] for r in self.outbox.pending()])
        self.conductor.fail_after = None
        self.assertEqual(3, self.outbox.flush())
        self.assertEqual([], self.outbox.pending())

    def test_failure_keeps_the_rest_for_a_new_agent(self):
        # An older conductor: one report a call.
        self.conductor.per_call = 1
        self.conductor.fail_after = 1
        self.assertEqual(1, self.outbox.flush())
        self.assertEqual(['VERIFYING', 'SUCCESS'],
                         [r['to_state'] for r in self.outbox.pending()])
        self.conductor.fail_after = None
        self.assertEqual(2, self.new_outbox().flush())
        self.assertEqual(['DOWNLOADING', 'VERIFYING', 'SUCCESS'],
                         [r[2] for r in self.conductor.received])


class TestProgressByCast(OutboxTestCase):

    def test_progress_is_cast_with_all_unconfirmed_then_called(self):
        for state in ('VERIFYING', 'INSTALLING', 'RESTARTING'):
            self.add(state)
            self.assertEqual(0, self.outbox.flush())
            self.now += 1
        self.assertEqual(
            [('cast', ['VERIFYING']),
             ('cast', ['VERIFYING', 'INSTALLING']),
             ('cast', ['VERIFYING', 'INSTALLING', 'RESTARTING'])],
            self.conductor.messages)
        # Kept, each marked with the time of the last cast carrying it.
        self.assertEqual([('VERIFYING', self.now - 1),
                          ('INSTALLING', self.now - 1),
                          ('RESTARTING', self.now - 1)], self.pending())
        self.add('SUCCESS')
        self.assertEqual(4, self.outbox.flush())
        self.assertEqual(
            ('call', ['VERIFYING', 'INSTALLING', 'RESTARTING', 'SUCCESS']),
            self.conductor.messages[-1])
        self.assertEqual([], self.outbox.pending())

    def test_every_final_state_goes_by_call(self):
        for final in ('SUCCESS', 'FAILED', 'ROLLED_BACK'):
            self.add('INSTALLING', final)
            self.assertEqual(2, self.outbox.flush())
            self.assertEqual(('call', ['INSTALLING', final]),
                             self.conductor.messages[-1])

    def test_cast_reports_are_not_cast_again_until_something_new(self):
        self.add('VERIFYING')
        self.outbox.flush()
        self.now += CONFIRM_INTERVAL - 1
        self.assertEqual(0, self.outbox.flush())
        self.assertEqual([('cast', ['VERIFYING'])], self.conductor.messages)

    def test_reports_cast_long_enough_ago_are_confirmed_by_call(self):
        self.add('VERIFYING')
        self.outbox.flush()
        self.now += CONFIRM_INTERVAL
        self.assertEqual(1, self.outbox.flush())
        self.assertEqual([('cast', ['VERIFYING']), ('call', ['VERIFYING'])],
                         self.conductor.messages)
        self.assertEqual([], self.outbox.pending())

    def test_a_new_cast_restarts_the_wait_for_all_it_carries(self):
        self.add('VERIFYING')
        self.outbox.flush()
        self.now += CONFIRM_INTERVAL - 1
        self.add('INSTALLING')
        self.outbox.flush()
        self.now += CONFIRM_INTERVAL - 1
        self.assertEqual(0, self.outbox.flush())
        self.assertEqual('cast', self.conductor.messages[-1][0])

    def test_a_clock_set_back_confirms_by_call(self):
        self.add('VERIFYING')
        self.outbox.flush()
        self.now -= 3600
        self.assertEqual(1, self.outbox.flush())
        self.assertEqual(('call', ['VERIFYING']),
                         self.conductor.messages[-1])

    def test_a_failed_cast_is_cast_again_at_the_next_flush(self):
        self.add('VERIFYING')
        self.conductor.fail_after = 0
        self.assertEqual(0, self.outbox.flush())
        self.assertEqual([('VERIFYING', None)], self.pending())
        self.conductor.fail_after = None
        self.outbox.flush()
        self.assertEqual([('cast', ['VERIFYING'])], self.conductor.messages)
        self.assertEqual([('VERIFYING', self.now)], self.pending())

    def test_a_crash_before_the_mark_only_casts_again(self):
        self.add('VERIFYING')
        # Killed in the write that marks the cast.
        with fixtures.MockPatchObject(journal_mod.UpgradeJournal, '_save',
                                      side_effect=OSError('killed')):
            self.assertRaises(OSError, self.outbox.flush)
        # The journal as the crash left it: the report, never marked.
        self.assertEqual([('VERIFYING', None)], self.pending())
        self.new_outbox().flush()
        self.assertEqual([('cast', ['VERIFYING']), ('cast', ['VERIFYING'])],
                         self.conductor.messages)
        self.assertEqual([('VERIFYING', self.now)], self.pending())

    def test_marks_survive_a_restart(self):
        self.add('VERIFYING')
        self.outbox.flush()
        self.assertEqual(0, self.new_outbox().flush())
        self.assertEqual([('cast', ['VERIFYING'])], self.conductor.messages)

    def test_below_1_2_progress_goes_one_call_each(self):
        self.conductor.per_call = 1
        self.add('VERIFYING', 'INSTALLING')
        self.assertEqual(2, self.outbox.flush())
        self.assertEqual([('call', ['VERIFYING']), ('call', ['INSTALLING'])],
                         self.conductor.messages)

    def test_more_than_a_message_carries_go_by_calls(self):
        self.conductor.per_call = 2
        with fixtures.MockPatchObject(rpc_interface,
                                      'MAX_REPORTS_PER_CALL', 2):
            self.add('DEFERRED', 'VERIFYING', 'INSTALLING')
            self.assertEqual(3, self.outbox.flush())
        self.assertEqual([('call', ['DEFERRED', 'VERIFYING']),
                          ('call', ['INSTALLING'])],
                         self.conductor.messages)
