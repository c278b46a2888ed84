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

"""An agent's outbox to a real conductor: progress by cast (1.2).

The agent's own ``Outbox`` and journal, the real ``ConductorAPI``, the
real RabbitMQ and a real ``trove-upgrade-conductor`` on PostgreSQL (and
SQLite): each report of progress flushed alone goes by cast with those
before it, and is recorded, the final one by call, which confirms them
all; the reports waiting in the outbox go together and are recorded in
order; an agent capped below 1.2 (a conductor that predates it) sends
them one call each and gets them recorded just the same.
"""

import os

import fixtures

from trove_upgrade.agent import journal as journal_mod
from trove_upgrade.agent import outbox as outbox_mod
from trove_upgrade.common import conductor_rpcapi as rpcapi
from trove_upgrade.common import states
from trove_upgrade.tests.fixtures import database
from trove_upgrade.tests.functional.conductor import test_conductor_process

CONFIRM_INTERVAL = 30.0

REPORTS = ((states.VERIFYING, None), (states.INSTALLING, None),
           (states.INSTALLING, None), (states.RESTARTING, None),
           (states.SUCCESS, 'health check passed'))


class _ReportBatches:

    def setUp(self):
        super().setUp()
        self.start_conductor()
        self.upgrade = self.create_upgrade()
        self.journal = journal_mod.UpgradeJournal(
            os.path.join(self.tmp, 'agent'))

    def add_reports(self, reports):
        with self.journal.update() as data:
            for state, detail in reports:
                self.journal.add_report(data, self.upgrade['id'], state,
                                        detail, 'v1.0.0', 'v2.0.0')

    def outbox(self, reports=REPORTS):
        api = rpcapi.ConductorAPI()
        self.assertTrue(api.start_upgrade(
            self.agent_context, self.instance_id, self.upgrade['id'],
            'v1.0.0')['proceed'])
        self.add_reports(reports)
        outbox = outbox_mod.Outbox(self.journal, api, self.agent_context,
                                   self.instance_id, CONFIRM_INTERVAL)
        # Watched, not replaced: what goes on the wire, one entry a call.
        self.sent = self.useFixture(fixtures.MockPatchObject(
            api, '_send', wraps=api._send)).mock
        return api, outbox

    def methods_sent(self):
        return [c.args[1] for c in self.sent.call_args_list]

    def kinds_sent(self):
        return [c.kwargs.get('kind', 'call') for c in self.sent.call_args_list]

    def assertRecordedInOrder(self):
        self.assertEqual(
            [(states.SENT, states.DOWNLOADING),
             (states.DOWNLOADING, states.VERIFYING),
             (states.VERIFYING, states.INSTALLING),
             (states.INSTALLING, states.RESTARTING),
             (states.RESTARTING, states.SUCCESS)],
            # What the agent recorded: the API's own events (a returned
            # cast among them: this agent has no queue) are not its.
            [(f, t) for s, f, t, _r in self.history(self.upgrade['id'])
             if s == 'agent'])
        self.assertEqual([], self.journal.read()['outbox'])

    def test_progress_alone_is_cast_and_the_final_call_confirms_it(self):
        api, outbox = self.outbox(reports=())
        for report in REPORTS[:-1]:
            self.add_reports([report])
            self.assertEqual(0, outbox.flush())
        # Recorded from the casts alone, and still kept, marked cast.
        test_conductor_process.wait_until(
            lambda: self.status(self.upgrade['id']) == states.RESTARTING,
            'the casts to be recorded')
        self.assertEqual(
            [states.VERIFYING, states.INSTALLING, states.INSTALLING,
             states.RESTARTING],
            [r['to_state'] for r in self.journal.read()['outbox']
             if outbox_mod.CAST_AT in r])
        self.add_reports(REPORTS[-1:])
        self.assertEqual(len(REPORTS), outbox.flush())
        self.assertRecordedInOrder()
        self.assertEqual(['report_upgrade_states'] * 5, self.methods_sent())
        self.assertEqual(['cast'] * 4 + ['call'], self.kinds_sent())

    def test_waiting_reports_go_together_and_are_recorded_in_order(self):
        api, outbox = self.outbox()
        self.assertGreater(api.reports_per_call(), len(REPORTS))
        # The duplicate INSTALLING is delivered (and ignored) too.
        self.assertEqual(len(REPORTS), outbox.flush())
        self.assertRecordedInOrder()
        self.assertEqual(['report_upgrade_states'], self.methods_sent())

    def test_capped_below_1_2_each_report_is_its_own_call(self):
        self.flags(group='upgrade_levels', conductor='1.1')
        api, outbox = self.outbox()
        self.assertEqual(1, api.reports_per_call())
        self.assertEqual(len(REPORTS), outbox.flush())
        self.assertRecordedInOrder()
        self.assertEqual(['report_upgrade_state'] * len(REPORTS),
                         self.methods_sent())


class TestReportBatchesSQLite(
        _ReportBatches, test_conductor_process.ConductorProcessTestCase):
    pass


class TestReportBatchesPostgreSQL(
        _ReportBatches, test_conductor_process.ConductorProcessTestCase):

    def setUp(self):
        self.database_fixture = database.PostgresqlDatabase
        super().setUp()


class TestReportBatchesMariaDB(
        _ReportBatches, test_conductor_process.ConductorProcessTestCase):

    def setUp(self):
        self.database_fixture = database.MariaDBDatabase
        super().setUp()
