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

"""The agents' database API on SQLite."""

import datetime

from trove_upgrade.common import exception
from trove_upgrade.common import states
from trove_upgrade.db import agents as db_agents
from trove_upgrade.db import transitions as db_transitions
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.tests.fixtures import database
from trove_upgrade.tests.unit.db import base as db_base

T0 = db_base.T0
INSTANCE = db_base.INSTANCE
OTHER_INSTANCE = db_base.OTHER_INSTANCE


class TestAgents(db_base.DbTestCase):

    def _register(self, instance_id=INSTANCE, **values):
        self.assertIsNone(db_agents.register_agent(self.context, instance_id,
                                                   values))
        return db_agents.get_agent(self.context, instance_id)

    def test_first_registration(self):
        agent = self._register(agent_version='2.0.0', guest_version='1.5.0',
                               rpc_api_version='1.2', state='RUNNING',
                               labels={'az': 'nova', 'ds': 'mysql'},
                               host='guest-1')
        self.assertEqual({
            'instance_id': INSTANCE,
            'agent_version': '2.0.0',
            'guest_version': '1.5.0',
            'rpc_api_version': '1.2',
            'state': 'RUNNING',
            'labels': {'az': 'nova', 'ds': 'mysql'},
            'host': 'guest-1',
            'created_at': T0,
            'updated_at': T0,
            'last_heartbeat_at': T0,
        }, agent)
        self.assertEqual(agent, db_agents.get_agent(self.context, INSTANCE))

    def test_registration_with_nothing_but_the_instance(self):
        agent = self._register()
        self.assertEqual({}, agent['labels'])
        self.assertIsNone(agent['rpc_api_version'])

    def test_heartbeat_updates_what_it_reports(self):
        self._register(agent_version='2.0.0', rpc_api_version='1.2',
                       state='RUNNING', labels={'az': 'nova'})
        self._advance(45)
        agent = self._register(state='UPGRADING')
        self.assertEqual('UPGRADING', agent['state'])
        self.assertEqual('2.0.0', agent['agent_version'])
        self.assertEqual({'az': 'nova'}, agent['labels'])
        self.assertEqual(T0, agent['created_at'])
        self.assertEqual(T0 + datetime.timedelta(seconds=45),
                         agent['last_heartbeat_at'])
        self.assertEqual(1, len(db_agents.list_agents(self.context)))

    def test_heartbeats_wait_for_another_writer(self):
        values = {'agent_version': '2.0.0', 'guest_version': '1.5.0',
                  'rpc_api_version': '1.2', 'state': 'RUNNING',
                  'labels': {'az': 'nova'}, 'host': 'guest-1'}
        self._register(**values)
        self._advance(30)
        heard_at = self.now
        missing = database.while_another_writes(
            self, lambda: db_agents.record_heartbeats(
                self.context, {INSTANCE: (values, heard_at)}))
        self.assertEqual([], missing)
        self.assertEqual(heard_at, db_agents.get_agent(
            self.context, INSTANCE)['last_heartbeat_at'])

    def test_labels_are_replaced_as_a_whole(self):
        self._register(labels={'az': 'nova', 'ds': 'mysql'})
        agent = self._register(labels={'az': 'other'})
        self.assertEqual({'az': 'other'}, agent['labels'])

    def test_bad_registrations_record_nothing(self):
        bad = [({'version': '1'}, 'unknown agent field: version'),
               ({'rpc_api_version': '1'}, 'must look like x.y'),
               ({'rpc_api_version': '1.2.3'}, 'must look like x.y'),
               ({'rpc_api_version': 'a.b'}, 'must look like x.y'),
               ({'rpc_api_version': 1.2}, 'must be a non-empty string'),
               ({'labels': ['az']}, 'labels must be an object'),
               ({'labels': {'az': {1, 2}}}, 'labels cannot be stored as JSON'),
               # Labels an agent's DictOpt cannot give: any sender's.
               ({'labels': {'az': {'a': 'b'}}},
                "label 'az' is not a string of at most 255"),
               ({'labels': {'az': 1}}, "label 'az' is not a string"),
               ({'labels': {'az': 'v' * 256}}, 'at most 255 characters'),
               ({'labels': {'': 'v'}}, 'a label key has 1 to 255'),
               ({'labels': {'k' * 256: 'v'}}, 'a label key has 1 to 255'),
               ({'labels': {'az': 'a\x00'}}, 'holds a NUL character'),
               ({'labels': {str(i): 'v' for i in range(65)}},
                'labels holds 65 labels, more than 64'),
               ({'host': ''}, 'host must be a non-empty string'),
               ({'state': 's' * 33}, 'state is longer than 32 characters')]
        for values, message in bad:
            error = self.assertRaises(exception.InvalidInputError,
                                      db_agents.register_agent,
                                      self.context, INSTANCE, values)
            self.assertIn(message, str(error))
        self.assertEqual([], db_agents.list_agents(self.context))

    def test_bad_instance_ids(self):
        for instance_id in (None, '', 'i' * 37, 7):
            error = self.assertRaises(exception.InvalidInputError,
                                      db_agents.register_agent, self.context,
                                      instance_id, {'state': 'RUNNING'})
            self.assertIn('instance_id', str(error))
        self.assertEqual([], db_agents.list_agents(self.context))

    def test_unknown_agent(self):
        error = self.assertRaises(
            exception.AgentNotFoundError, db_agents.get_agent,
            self.context, INSTANCE)
        self.assertEqual(404, error.code)
        self.assertIn(INSTANCE, str(error))


class TestDeleteAgent(db_base.DbTestCase):

    def setUp(self):
        super().setUp()
        db_agents.register_agent(self.context, INSTANCE, {'state': 'RUNNING'})
        db_agents.register_agent(self.context, OTHER_INSTANCE,
                                 {'state': 'RUNNING'})

    def _agents(self):
        return [a['instance_id'] for a in db_agents.list_agents(self.context)]

    def test_deletes_only_that_agent_and_keeps_its_upgrades(self):
        upgrade = self._create()
        db_transitions.transition_upgrade(self.context, upgrade['id'],
                                          states.FAILED, 'agent')
        db_agents.delete_agent(self.context, INSTANCE)
        self.assertEqual([OTHER_INSTANCE], self._agents())
        kept = db_upgrades.get_upgrade(self.context, upgrade['id'],
                                       with_events=True)
        self.assertEqual(states.FAILED, kept['status'])
        self.assertEqual(2, len(kept['events']))

    def test_unknown_agent(self):
        db_agents.delete_agent(self.context, INSTANCE)
        error = self.assertRaises(exception.AgentNotFoundError,
                                  db_agents.delete_agent, self.context,
                                  INSTANCE)
        self.assertIn(INSTANCE, str(error))
        self.assertEqual([OTHER_INSTANCE], self._agents())

    def test_newest_unfinished_upgrade_refuses_and_changes_nothing(self):
        self._create()
        self._advance()
        newest = self._create()
        db_transitions.transition_upgrade(self.context, newest['id'],
                                          states.INSTALLING, 'agent')
        error = self.assertRaises(exception.AgentBusyError,
                                  db_agents.delete_agent,
                                  self.context, INSTANCE)
        self.assertEqual(409, error.code)
        self.assertEqual((INSTANCE, newest['id'], states.INSTALLING),
                         (error.kwargs['instance_id'],
                          error.kwargs['upgrade_id'],
                          error.kwargs['status']))
        self.assertEqual(sorted([INSTANCE, OTHER_INSTANCE]), self._agents())

    def test_unfinished_upgrade_of_another_instance_does_not_matter(self):
        self._create(instance_id=OTHER_INSTANCE)
        db_agents.delete_agent(self.context, INSTANCE)
        self.assertEqual([OTHER_INSTANCE], self._agents())

    def test_no_agent_is_not_found_even_with_an_unfinished_upgrade(self):
        db_agents.delete_agent(self.context, INSTANCE)
        self._create()
        self.assertRaises(exception.AgentNotFoundError, db_agents.delete_agent,
                          self.context, INSTANCE)

    def test_registers_again_after_deletion(self):
        db_agents.delete_agent(self.context, INSTANCE)
        self._advance(30)
        db_agents.register_agent(self.context, INSTANCE, {'state': 'RUNNING'})
        agent = db_agents.get_agent(self.context, INSTANCE)
        self.assertEqual(T0 + datetime.timedelta(seconds=30),
                         agent['created_at'])


class TestListAgents(db_base.DbTestCase):

    def setUp(self):
        super().setUp()
        self.agents = {
            'i-1': {'guest_version': '1.0', 'state': 'RUNNING',
                    'rpc_api_version': '1.0',
                    'labels': {'az': 'a', 'ds': 'mysql'}},
            'i-2': {'guest_version': '2.0', 'state': 'RUNNING',
                    'rpc_api_version': '1.1',
                    'labels': {'az': 'b', 'ds': 'mysql'}},
            'i-3': {'guest_version': '1.0', 'state': 'UPGRADING',
                    'rpc_api_version': '1.1', 'labels': {'az': 'a'}},
            'i-4': {'guest_version': '1.0', 'state': 'RUNNING',
                    'rpc_api_version': '1.1',
                    'labels': {'az': 'a', 'ds': 'mysql'}},
        }
        for instance_id in ('i-3', 'i-1', 'i-4', 'i-2'):
            db_agents.register_agent(self.context, instance_id,
                                     self.agents[instance_id])

    def _ids(self, **kw):
        return [a['instance_id'] for a in db_agents.list_agents(self.context,
                                                                **kw)]

    def test_ordered_by_instance_id(self):
        self.assertEqual(['i-1', 'i-2', 'i-3', 'i-4'], self._ids())

    def test_column_filters(self):
        self.assertEqual(['i-1', 'i-3', 'i-4'],
                         self._ids(filters={'guest_version': '1.0'}))
        self.assertEqual(['i-3'], self._ids(filters={'state': 'UPGRADING'}))
        self.assertEqual(['i-2', 'i-4'], self._ids(
            filters={'rpc_api_version': '1.1', 'state': 'RUNNING'}))

    def test_labels_must_all_match(self):
        self.assertEqual(['i-1', 'i-4'], self._ids(
            filters={'labels': {'az': 'a', 'ds': 'mysql'}}))
        self.assertEqual(['i-1', 'i-3', 'i-4'],
                         self._ids(filters={'labels': {'az': 'a'}}))
        self.assertEqual([], self._ids(filters={'labels': {'rack': '1'}}))
        self.assertEqual(['i-4'], self._ids(filters={
            'labels': {'az': 'a'}, 'rpc_api_version': '1.1',
            'state': 'RUNNING'}))

    def test_empty_labels_filter_matches_all(self):
        self.assertEqual(4, len(self._ids(filters={'labels': {}})))

    def test_limit_counts_matching_agents(self):
        self.assertEqual(['i-1', 'i-3'], self._ids(
            filters={'labels': {'az': 'a'}}, limit=2))
        self.assertEqual(['i-4'], self._ids(
            filters={'labels': {'az': 'a'}}, limit=2, marker='i-3'))

    def test_pages(self):
        self.assertEqual(['i-1', 'i-2'], self._ids(limit=2))
        self.assertEqual(['i-3', 'i-4'], self._ids(limit=2, marker='i-2'))
        self.assertEqual([], self._ids(limit=2, marker='i-4'))

    def test_unknown_marker(self):
        self.assertRaises(exception.MarkerNotFoundError, db_agents.list_agents,
                          self.context, marker='i-9')

    def test_bad_filters(self):
        error = self.assertRaises(
            exception.InvalidInputError, db_agents.list_agents,
            self.context, filters={'host': 'x'})
        self.assertIn('unknown agent filter: host', str(error))
        error = self.assertRaises(
            exception.InvalidInputError, db_agents.list_agents,
            self.context, filters={'labels': 'az=a'})
        self.assertIn('labels filter must be an object', str(error))
        self.assertRaises(exception.InvalidInputError, db_agents.list_agents,
                          self.context, limit=0)


class TestMinAgentRPCVersion(db_base.DbTestCase):

    def _register(self, instance_id, version):
        values = {} if version is None else {'rpc_api_version': version}
        db_agents.register_agent(self.context, instance_id, values)

    def test_no_agents(self):
        self.assertIsNone(db_agents.min_agent_rpc_version(self.context))

    def test_agents_without_a_version_do_not_count(self):
        self._register('i-1', None)
        self.assertIsNone(db_agents.min_agent_rpc_version(self.context))
        self._register('i-2', '1.3')
        self.assertEqual('1.3', db_agents.min_agent_rpc_version(self.context))

    def test_compared_as_numbers(self):
        self._register('i-1', '1.10')
        self._register('i-2', '1.9')
        self._register('i-3', '2.0')
        self.assertEqual('1.9', db_agents.min_agent_rpc_version(self.context))

    def test_ten_is_above_nine(self):
        self._register('i-1', '2.0')
        self._register('i-2', '1.10')
        self.assertEqual('1.10', db_agents.min_agent_rpc_version(self.context))

    def test_follows_heartbeats(self):
        self._register('i-1', '1.0')
        self._register('i-2', '1.1')
        self._register('i-1', '1.1')
        self.assertEqual('1.1', db_agents.min_agent_rpc_version(self.context))

    def test_agents_below_a_malformed_version(self):
        self._register('i-1', '1.0')
        for version in ('1', 'latest', '1.x', None):
            error = self.assertRaises(
                exception.InvalidInputError,
                db_agents.list_agents_below_rpc_version, self.context, version)
            self.assertIn('looks like x.y', str(error))
