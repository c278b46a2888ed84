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

"""A real conductor while its PostgreSQL database goes away and comes back.

The test closes the conductor's database to new connections and ends
those it holds (``PostgresqlDatabase.allow_connections``), then sends
what agents send: each call is answered ``DatabaseUnavailableError`` at once,
each message costs one line of the log and no traceback, and the agent's
outbox keeps its reports until the database is back and a call confirms
them.
"""

import os

from trove_upgrade.agent import journal as journal_mod
from trove_upgrade.agent import outbox as outbox_mod
from trove_upgrade.common import conductor_rpcapi as rpcapi
from trove_upgrade.common import exception
from trove_upgrade.common import states
from trove_upgrade.tests.fixtures import database
from trove_upgrade.tests.functional.conductor import test_conductor_process

UNAVAILABLE = ('The %s message of instance %s failed, the database is '
               'unavailable: ')


class TestDatabaseOutage(test_conductor_process.ConductorProcessTestCase):

    database_fixture = database.PostgresqlDatabase

    def setUp(self):
        super().setUp()
        self.addCleanup(self.database.allow_connections, True)
        self.start_conductor()
        self.api = rpcapi.ConductorAPI()
        self.upgrade = self.create_upgrade()
        self.journal = journal_mod.UpgradeJournal(
            os.path.join(self.tmp, 'agent'))
        # A report is cast first, then due for the call that confirms it
        # at the next flush.
        self.outbox = outbox_mod.Outbox(self.journal, self.api,
                                        self.agent_context,
                                        self.instance_id, 0)

    def agent(self, state='RUNNING'):
        return (self.instance_id, '2026.2.0', '21.0.0', '1.2', state, {},
                'guest-1')

    def outage(self):
        self.database.allow_connections(False)
        self.assertGreater(self.database.terminate(), 0)

    def assertUnavailable(self, method, *args):
        e = self.assertRaises(exception.DatabaseUnavailableError,
                              getattr(self.api, method),
                              self.agent_context, *args)
        # Of the class the conductor raised, without its traceback.
        self.assertIs(exception.DatabaseUnavailableError, type(e))
        self.assertEqual('The conductor could not handle %s: its database '
                         'is unavailable. Try again later.' % method, str(e))

    def test_refused_in_one_line_each_then_recorded(self):
        self.assertEqual('1.4', self.api.register_agent(
            self.agent_context, *self.agent()))
        self.outage()

        self.assertUnavailable('register_agent', *self.agent())
        self.assertUnavailable('start_upgrade', self.instance_id,
                               self.upgrade['id'], 'v1.0.0')
        self.api.heartbeat(self.agent_context, *self.agent('BACKUP'))
        with self.journal.update() as data:
            self.journal.add_report(data, self.upgrade['id'],
                                    states.VERIFYING, None, 'v1.0.0',
                                    'v2.0.0')
        self.assertEqual(0, self.outbox.flush())
        self.assertEqual([states.VERIFYING],
                         [r['to_state'] for r in self.outbox.pending()])
        for method in ('register_agent', 'start_upgrade', 'heartbeat',
                       'report_upgrade_states'):
            test_conductor_process.wait_until(
                lambda: UNAVAILABLE % (method, self.instance_id)
                in self.log(), 'the outage of %s in the log' % method)

        self.database.allow_connections(True)
        self.assertTrue(self.api.start_upgrade(
            self.agent_context, self.instance_id, self.upgrade['id'],
            'v1.0.0')['proceed'])
        self.assertEqual(1, self.outbox.flush())
        self.assertEqual([], self.outbox.pending())
        self.assertEqual(states.VERIFYING, self.status(self.upgrade['id']))
        log = self.log()
        for method in ('register_agent', 'start_upgrade', 'heartbeat',
                       'report_upgrade_states'):
            self.assertEqual(1, log.count(UNAVAILABLE
                                          % (method, self.instance_id)),
                             method)
        self.assertNotIn('Traceback', log)
