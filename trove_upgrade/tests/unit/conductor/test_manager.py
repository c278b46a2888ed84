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

"""The conductor endpoint: registrations, claims and state reports."""

import datetime
from unittest import mock

from oslo_messaging.rpc import dispatcher
from oslo_utils import fixture as utils_fixture

from trove_upgrade.common import context
from trove_upgrade.common import exception
from trove_upgrade.common import states
from trove_upgrade.conductor import manager
from trove_upgrade.db import agents as db_agents
from trove_upgrade.db import transitions as db_transitions
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.services import upgrade_memory
from trove_upgrade.services import upgrades
from trove_upgrade.tests import base
from trove_upgrade.tests.fixtures import database
from trove_upgrade.tests.fixtures import rpc as rpc_fixture

INSTANCE = '5b4a3c2d-1e0f-4a9b-8c7d-6e5f4a3b2c1d'
OTHER_INSTANCE = '0a1b2c3d-4e5f-4a6b-8c7d-8e9f0a1b2c3d'

AGENT = {'agent_version': '2026.2.0', 'guest_version': '21.0.0',
         'rpc_api_version': '1.0', 'state': 'RUNNING',
         'labels': {'datastore': 'mysql'}, 'host': 'guest-1'}


class ManagerTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.database = self.useFixture(database.Database())
        self.transport = self.useFixture(rpc_fixture.FakeTransport())
        self.context = context.RequestContext(request_id='req-agent')
        self.manager = manager.ConductorManager()

    def new_upgrade(self, instance_id=INSTANCE):
        return upgrades.create_upgrade(
            context.get_admin_context(),
            {'instance_id': instance_id, 'instance_version': 'v2.0.0',
             'strategy': 'swift', 'location': 'swift://c/v2.tar.gz'})

    def upgrade(self, upgrade_id):
        return db_upgrades.get_upgrade(self.context, upgrade_id,
                                       with_events=True)

    def report(self, upgrade_id, to_state, detail=None, from_version=None,
               to_version=None, instance_id=INSTANCE):
        return self.manager.report_upgrade_state(
            self.context, instance_id, upgrade_id, to_state, detail,
            from_version, to_version)

    def assertRefused(self, method, *args, **kwargs):
        """The endpoint refused the call with Invalid; return it.

        The endpoint marks Invalid as expected, which the RPC server sends
        back to the caller as InvalidInputError without logging a traceback.
        """
        e = self.assertRaises(dispatcher.ExpectedException, method, *args,
                              **kwargs)
        self.assertIsInstance(e.exc_info[1], exception.InvalidInputError)
        return e.exc_info[1]

    def event_types(self):
        return [n['event_type'] for n in self.transport.notifications]


class TestAgents(ManagerTestCase):

    def test_register(self):
        now = datetime.datetime(2026, 11, 29, 10, 0, 0)
        self.useFixture(utils_fixture.TimeFixture(now))
        self.assertEqual('1.4', self.manager.register_agent(
            self.context, INSTANCE, **AGENT))
        agent = db_agents.get_agent(self.context, INSTANCE)
        self.assertEqual(dict(AGENT, instance_id=INSTANCE,
                              last_heartbeat_at=now),
                         {k: agent[k] for k in list(AGENT) +
                          ['instance_id', 'last_heartbeat_at']})

    def test_heartbeat_updates_the_registration(self):
        clock = self.useFixture(utils_fixture.TimeFixture(
            datetime.datetime(2026, 11, 29, 10, 0, 0)))
        self.manager.register_agent(self.context, INSTANCE, **AGENT)
        clock.advance_time_seconds(30)
        self.manager.heartbeat(self.context, INSTANCE,
                               **dict(AGENT, state='BACKUP'))
        agent = db_agents.get_agent(self.context, INSTANCE)
        self.assertEqual(('BACKUP', datetime.datetime(2026, 11, 29, 10, 0,
                                                      30)),
                         (agent['state'], agent['last_heartbeat_at']))

    def test_heartbeat_of_an_unknown_agent_registers_it(self):
        self.manager.heartbeat(self.context, INSTANCE, **AGENT)
        self.assertEqual('RUNNING',
                         db_agents.get_agent(self.context, INSTANCE)['state'])

    def test_labels_default_to_empty(self):
        self.manager.register_agent(self.context, INSTANCE,
                                    **dict(AGENT, labels=None))
        self.assertEqual({}, db_agents.get_agent(self.context,
                                                 INSTANCE)['labels'])

    def test_register_refuses_bad_fields(self):
        for instance_id, fields, word in (
                ('not-a-uuid', AGENT, 'instance_id'),
                (INSTANCE, dict(AGENT, rpc_api_version='1'),
                 'rpc_api_version'),
                (INSTANCE, dict(AGENT, labels=['a']), 'labels'),
                (INSTANCE, dict(AGENT, state=''), 'state'),
                (INSTANCE, dict(AGENT, host='h' * 256), 'host')):
            e = self.assertRefused(self.manager.register_agent,
                                   self.context, instance_id, **fields)
            self.assertIn(word, str(e))
        self.assertEqual([], db_agents.list_agents(self.context))

    def test_bad_heartbeat_is_ignored(self):
        self.manager.register_agent(self.context, INSTANCE, **AGENT)
        self.assertIsNone(self.manager.heartbeat(
            self.context, INSTANCE, **dict(AGENT, rpc_api_version='x')))
        self.assertIsNone(self.manager.heartbeat(
            self.context, 'not-a-uuid', **AGENT))
        [agent] = db_agents.list_agents(self.context)
        self.assertEqual('1.0', agent['rpc_api_version'])


class TestClaim(ManagerTestCase):

    def test_claim_starts_the_upgrade(self):
        upgrade = self.new_upgrade()
        self.assertEqual(
            {'proceed': True, 'status': states.DOWNLOADING, 'reason': None},
            self.manager.start_upgrade(self.context, INSTANCE, upgrade['id'],
                                       'v1.0.0'))
        recorded = self.upgrade(upgrade['id'])
        self.assertEqual(('v1.0.0', states.DOWNLOADING),
                         (recorded['from_version'], recorded['status']))
        last = recorded['events'][-1]
        self.assertEqual(('agent', states.SENT, states.DOWNLOADING,
                          'req-agent'),
                         (last['source'], last['from_state'],
                          last['to_state'], last['request_id']))
        self.assertEqual(['trove_upgrade.upgrade.create',
                          'trove_upgrade.upgrade.start'],
                         self.event_types())

    def test_repeated_claim_is_granted_once_recorded(self):
        upgrade = self.new_upgrade()
        self.manager.start_upgrade(self.context, INSTANCE, upgrade['id'],
                                   'v1.0.0')
        self.assertEqual(
            {'proceed': True, 'status': states.DOWNLOADING, 'reason': None},
            self.manager.start_upgrade(self.context, INSTANCE, upgrade['id'],
                                       'v1.0.0'))
        self.assertEqual(3, len(self.upgrade(upgrade['id'])['events']))
        self.assertEqual(1, self.event_types().count(
            'trove_upgrade.upgrade.start'))

    def test_claim_after_deferring(self):
        upgrade = self.new_upgrade()
        self.report(upgrade['id'], states.DEFERRED, 'backup running')
        result = self.manager.start_upgrade(self.context, INSTANCE,
                                            upgrade['id'], None)
        self.assertTrue(result['proceed'])
        self.assertIsNone(self.upgrade(upgrade['id'])['from_version'])

    def test_claim_of_a_moved_on_upgrade_is_refused(self):
        upgrade = self.new_upgrade()
        self.manager.start_upgrade(self.context, INSTANCE, upgrade['id'],
                                   'v1.0.0')
        self.report(upgrade['id'], states.VERIFYING)
        result = self.manager.start_upgrade(self.context, INSTANCE,
                                            upgrade['id'], 'v1.0.0')
        self.assertEqual((False, states.VERIFYING),
                         (result['proceed'], result['status']))

    def test_claim_by_another_instance_is_refused(self):
        upgrade = self.new_upgrade()
        result = self.manager.start_upgrade(self.context, OTHER_INSTANCE,
                                            upgrade['id'], 'v1.0.0')
        self.assertEqual((False, None), (result['proceed'],
                                         result['status']))
        self.assertIn(OTHER_INSTANCE, result['reason'])
        self.assertEqual(states.SENT, self.upgrade(upgrade['id'])['status'])

    def test_claim_of_an_unknown_upgrade_is_refused(self):
        result = self.manager.start_upgrade(
            self.context, INSTANCE, 'b6a6a6a6-0000-4000-8000-000000000000',
            None)
        self.assertFalse(result['proceed'])

    def test_claim_with_a_bad_version_is_refused_whole(self):
        upgrade = self.new_upgrade()
        self.assertRefused(self.manager.start_upgrade, self.context,
                           INSTANCE, upgrade['id'], 'v' * 300)
        self.assertEqual(states.SENT, self.upgrade(upgrade['id'])['status'])


class ClaimedTestCase(ManagerTestCase):
    """An upgrade its agent claimed, for the reports that follow."""

    def setUp(self):
        super().setUp()
        self.upgrade_id = self.new_upgrade()['id']
        self.manager.start_upgrade(self.context, INSTANCE, self.upgrade_id,
                                   'v1.0.0')

    def states_recorded(self):
        return [e['to_state'] for e in self.upgrade(self.upgrade_id)['events']]


class TestReports(ClaimedTestCase):

    def test_whole_successful_upgrade(self):
        for state in (states.VERIFYING, states.INSTALLING,
                      states.RESTARTING):
            self.assertEqual({'recorded': True, 'status': state,
                              'reason': None},
                             self.report(self.upgrade_id, state))
        self.assertEqual(
            {'recorded': True, 'status': states.SUCCESS, 'reason': None},
            self.report(self.upgrade_id, states.SUCCESS, 'healthy',
                        'v1.0.0', 'v2.0.0'))
        upgrade = self.upgrade(self.upgrade_id)
        self.assertEqual([states.PENDING, states.SENT, states.DOWNLOADING,
                          states.VERIFYING, states.INSTALLING,
                          states.RESTARTING, states.SUCCESS],
                         [e['to_state'] for e in upgrade['events']])
        self.assertEqual(('healthy', 'healthy'),
                         (upgrade['status_detail'],
                          upgrade['events'][-1]['detail']))
        self.assertIsNotNone(upgrade['finished_at'])
        self.assertEqual('trove_upgrade.upgrade.end', self.event_types()[-1])

    def test_skipping_stages_is_legal(self):
        self.assertTrue(self.report(self.upgrade_id,
                                    states.RESTARTING)['recorded'])

    def test_duplicate(self):
        self.report(self.upgrade_id, states.VERIFYING)
        self.assertEqual(
            {'recorded': False, 'status': states.VERIFYING,
             'reason': upgrades.DUPLICATE},
            self.report(self.upgrade_id, states.VERIFYING))
        self.assertEqual(1, self.states_recorded().count(states.VERIFYING))

    def test_stale(self):
        self.report(self.upgrade_id, states.INSTALLING)
        self.assertEqual(
            {'recorded': False, 'status': states.INSTALLING,
             'reason': upgrades.STALE},
            self.report(self.upgrade_id, states.VERIFYING))
        self.assertNotIn(states.VERIFYING, self.states_recorded())

    def test_report_after_the_end_is_stale(self):
        self.report(self.upgrade_id, states.FAILED, 'download failed')
        result = self.report(self.upgrade_id, states.INSTALLING)
        self.assertEqual((False, states.FAILED, upgrades.STALE),
                         (result['recorded'], result['status'],
                          result['reason']))

    def test_illegal(self):
        # A rollback needs something installed to roll back from.
        events = self.states_recorded()
        self.assertEqual(
            {'recorded': False, 'status': states.DOWNLOADING,
             'reason': upgrades.ILLEGAL},
            self.report(self.upgrade_id, states.ROLLED_BACK))
        self.assertEqual(events, self.states_recorded())

    def test_rollback_and_failure_notify_an_error(self):
        self.report(self.upgrade_id, states.RESTARTING)
        self.assertTrue(self.report(self.upgrade_id, states.ROLLED_BACK,
                                    'health check failed')['recorded'])
        other = self.new_upgrade()['id']
        self.report(other, states.FAILED, 'no such package')
        errors = [n for n in self.transport.notifications
                  if n['event_type'] == 'trove_upgrade.upgrade.error']
        self.assertEqual([(self.upgrade_id, states.ROLLED_BACK, 'ERROR'),
                          (other, states.FAILED, 'ERROR')],
                         [(n['payload']['id'], n['payload']['status'],
                           n['priority']) for n in errors])

    def test_states_agents_do_not_report(self):
        events = self.states_recorded()
        for state in (states.CANCELLED, states.TIMED_OUT, states.PENDING,
                      states.SENT, 'BOGUS', None):
            self.assertEqual(
                {'recorded': False, 'status': None,
                 'reason': upgrades.REJECTED},
                self.report(self.upgrade_id, state))
        self.assertEqual(events, self.states_recorded())

    def test_report_of_another_instance_changes_nothing(self):
        events = self.states_recorded()
        self.assertEqual(
            {'recorded': False, 'status': None, 'reason': upgrades.REJECTED},
            self.report(self.upgrade_id, states.SUCCESS,
                        instance_id=OTHER_INSTANCE))
        upgrade = self.upgrade(self.upgrade_id)
        self.assertEqual(states.DOWNLOADING, upgrade['status'])
        self.assertEqual(events, self.states_recorded())

    def test_report_of_an_unknown_upgrade(self):
        self.assertEqual(
            {'recorded': False, 'status': None, 'reason': upgrades.REJECTED},
            self.report('c0c0c0c0-0000-4000-8000-000000000000',
                        states.SUCCESS))

    def test_malformed_version_changes_nothing(self):
        result = self.report(self.upgrade_id, states.VERIFYING,
                             from_version='')
        self.assertEqual((True, states.VERIFYING),
                         (result['recorded'], result['status']))
        result = self.report(self.upgrade_id, states.INSTALLING,
                             from_version='v' * 300)
        self.assertEqual({'recorded': False, 'status': None,
                          'reason': upgrades.REJECTED}, result)
        self.assertEqual(states.VERIFYING,
                         self.upgrade(self.upgrade_id)['status'])
        self.assertEqual('v1.0.0',
                         self.upgrade(self.upgrade_id)['from_version'])

    def test_other_version_than_requested_is_kept_in_the_detail(self):
        self.report(self.upgrade_id, states.SUCCESS, 'healthy', 'v1.0.0',
                    'v2.0.1')
        upgrade = self.upgrade(self.upgrade_id)
        self.assertEqual('healthy (the agent reports version v2.0.1, not '
                         'v2.0.0)', upgrade['status_detail'])
        self.assertEqual('v2.0.0', upgrade['instance_version'])

    def test_deferred_is_a_report(self):
        upgrade_id = self.new_upgrade()['id']
        self.assertEqual(
            {'recorded': True, 'status': states.DEFERRED, 'reason': None},
            self.report(upgrade_id, states.DEFERRED, 'resize running'))
        self.assertEqual(
            {'recorded': False, 'status': states.DEFERRED,
             'reason': upgrades.DUPLICATE},
            self.report(upgrade_id, states.DEFERRED, 'resize running'))


class TestReportBatches(ClaimedTestCase):
    """report_upgrade_states (1.2): several reports, one call."""

    def batch(self, *reports):
        return [{'upgrade_id': self.upgrade_id, 'to_state': state,
                 'detail': detail, 'from_version': 'v1.0.0',
                 'to_version': 'v2.0.0'} for state, detail in reports]

    def test_reports_are_recorded_in_order_each_answered(self):
        outcomes = self.manager.report_upgrade_states(
            self.context, INSTANCE, self.batch(
                (states.VERIFYING, None), (states.VERIFYING, None),
                (states.INSTALLING, None), (states.SUCCESS, 'healthy')))
        self.assertEqual(
            [{'recorded': True, 'status': states.VERIFYING, 'reason': None},
             {'recorded': False, 'status': states.VERIFYING,
              'reason': upgrades.DUPLICATE},
             {'recorded': True, 'status': states.INSTALLING,
              'reason': None},
             {'recorded': True, 'status': states.SUCCESS, 'reason': None}],
            outcomes)
        self.assertEqual([states.PENDING, states.SENT, states.DOWNLOADING,
                          states.VERIFYING, states.INSTALLING,
                          states.SUCCESS], self.states_recorded())
        self.assertEqual('trove_upgrade.upgrade.end', self.event_types()[-1])

    def test_the_reports_of_one_upgrade_are_one_transaction(self):
        other_id = self.new_upgrade()['id']
        self.manager.start_upgrade(self.context, INSTANCE, other_id,
                                   'v1.0.0')
        reports = self.batch((states.VERIFYING, None),
                             (states.INSTALLING, None))
        reports.insert(1, dict(reports[0], upgrade_id=other_id))
        reports.append(dict(reports[-1], to_state=states.SUCCESS))
        with mock.patch.object(db_transitions, '_transition_once',
                               wraps=db_transitions._transition_once) as once:
            outcomes = self.manager.report_upgrade_states(
                self.context, INSTANCE, reports)
        self.assertEqual([True] * 4, [o['recorded'] for o in outcomes])
        # This upgrade's first report, the other's, then this one's two.
        self.assertEqual([self.upgrade_id, other_id, self.upgrade_id],
                         [c.args[1] for c in once.call_args_list])
        self.assertEqual(states.SUCCESS,
                         self.upgrade(self.upgrade_id)['status'])
        self.assertEqual(states.VERIFYING, self.upgrade(other_id)['status'])

    def test_a_bad_report_changes_only_itself(self):
        outcomes = self.manager.report_upgrade_states(
            self.context, INSTANCE, self.batch(
                (states.CANCELLED, None), (states.VERIFYING, None)))
        self.assertEqual([upgrades.REJECTED, None],
                         [o['reason'] for o in outcomes])
        self.assertEqual(states.VERIFYING,
                         self.upgrade(self.upgrade_id)['status'])

    def test_malformed_batches_are_refused_whole(self):
        good = self.batch((states.VERIFYING, None))[0]
        for reports in ([], 'VERIFYING', [good] * 51, [dict(good, x=1)],
                        [{k: v for k, v in good.items() if k != 'detail'}],
                        [dict(good, upgrade_id=['a'])],
                        [dict(good, detail=3)], [good, 'SUCCESS']):
            self.assertRefused(self.manager.report_upgrade_states,
                               self.context, INSTANCE, reports)
        self.assertEqual(states.DOWNLOADING,
                         self.upgrade(self.upgrade_id)['status'])


class TestReportsFromMemory(ClaimedTestCase):
    """What the conductor remembers of an upgrade spares the database."""

    def test_a_repeated_report_needs_no_database(self):
        self.report(self.upgrade_id, states.VERIFYING)
        with mock.patch.object(db_transitions, '_transition_once') as once:
            self.assertEqual(
                {'recorded': False, 'status': states.VERIFYING,
                 'reason': upgrades.DUPLICATE},
                self.report(self.upgrade_id, states.VERIFYING))
            self.assertEqual(
                upgrades.STALE,
                self.report(self.upgrade_id, states.DOWNLOADING)['reason'])
        once.assert_not_called()

    def test_a_report_after_the_claim_is_recorded_without_a_read(self):
        with mock.patch.object(db_transitions, '_read_upgrade') as read:
            for state in (states.VERIFYING, states.INSTALLING,
                          states.SUCCESS):
                self.assertTrue(self.report(self.upgrade_id,
                                            state)['recorded'])
        read.assert_not_called()
        upgrade = self.upgrade(self.upgrade_id)
        self.assertEqual(states.SUCCESS, upgrade['status'])
        self.assertEqual([states.PENDING, states.SENT, states.DOWNLOADING,
                          states.VERIFYING, states.INSTALLING,
                          states.SUCCESS], self.states_recorded())

    def test_what_another_conductor_recorded_is_read(self):
        other = manager.ConductorManager()
        other.report_upgrade_state(self.context, INSTANCE, self.upgrade_id,
                                   states.INSTALLING, None, None, None)
        self.assertEqual(
            {'recorded': False, 'status': states.INSTALLING,
             'reason': upgrades.STALE},
            self.report(self.upgrade_id, states.VERIFYING))
        # Illegal from what this one remembered, legal from what it read.
        self.assertTrue(self.report(self.upgrade_id,
                                    states.ROLLED_BACK)['recorded'])
        self.assertEqual(states.ROLLED_BACK,
                         self.upgrade(self.upgrade_id)['status'])

    def test_a_final_report_replaces_a_time_out(self):
        db_transitions.transition_upgrade(self.context, self.upgrade_id,
                                          states.TIMED_OUT, 'conductor')
        self.assertTrue(self.report(self.upgrade_id,
                                    states.SUCCESS)['recorded'])
        self.assertEqual([states.DOWNLOADING, states.TIMED_OUT,
                          states.SUCCESS], self.states_recorded()[2:])

    def test_memory_is_bounded(self):
        memory = upgrade_memory.UpgradeMemory(size=2)
        for number in range(3):
            memory.remember({'id': str(number), 'status': states.SENT})
        self.assertIsNone(memory.get('0'))
        self.assertEqual(states.SENT, memory.get('2')['status'])
