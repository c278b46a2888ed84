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

"""The outbox delivers in order, keeps what failed, survives restarts."""

import fixtures

from trove_upgrade.agent import journal as journal_mod
from trove_upgrade.agent import outbox
from trove_upgrade.tests import base


class FlakyConductor:
    """Takes ``per_call`` reports a call; fails calls after ``fail_after``."""

    def __init__(self, per_call=50):
        self.per_call = per_call
        self.received = []
        self.calls = 0
        self.fail_after = None

    def reports_per_call(self):
        return self.per_call

    def report_upgrade_states(self, context, instance_id, reports):
        assert len(reports) <= self.per_call, reports
        if self.fail_after is not None and self.calls >= self.fail_after:
            raise ConnectionError('broker down')
        self.calls += 1
        self.received.extend(
            (instance_id, r['upgrade_id'], r['to_state'], r['detail'],
             r['from_version'], r['to_version']) for r in reports)


class TestOutbox(base.TestCase):

    def setUp(self):
        super().setUp()
        self.root = self.useFixture(fixtures.TempDir()).path
        self.journal = journal_mod.UpgradeJournal(self.root)
        self.conductor = FlakyConductor()
        self.outbox = outbox.Outbox(self.journal, self.conductor, None,
                                    'inst')
        with self.journal.update() as data:
            for state in ('DOWNLOADING', 'VERIFYING', 'SUCCESS'):
                self.journal.add_report(data, 'u1', state, state.lower(),
                                        '1', '2')

    def test_flush_sends_in_order_in_one_call_and_empties(self):
        self.assertEqual(3, self.outbox.flush())
        self.assertEqual(1, self.conductor.calls)
        self.assertEqual(['DOWNLOADING', 'VERIFYING', 'SUCCESS'],
                         [r[2] for r in self.conductor.received])
        self.assertEqual(('inst', 'u1', 'SUCCESS', 'success', '1', '2'),
                         self.conductor.received[-1])
        self.assertEqual([], self.outbox.pending())

    def test_more_than_a_call_carries_go_in_several(self):
        self.conductor.per_call = 2
        self.assertEqual(3, self.outbox.flush())
        self.assertEqual(2, self.conductor.calls)
        self.assertEqual(['DOWNLOADING', 'VERIFYING', 'SUCCESS'],
                         [r[2] for r in self.conductor.received])

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
        restarted = outbox.Outbox(journal_mod.UpgradeJournal(self.root),
                                  self.conductor, None, 'inst')
        self.assertEqual(2, restarted.flush())
        self.assertEqual(['DOWNLOADING', 'VERIFYING', 'SUCCESS'],
                         [r[2] for r in self.conductor.received])
