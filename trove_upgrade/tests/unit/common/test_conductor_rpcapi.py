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

"""The agents' client of the conductor, against the real endpoint."""

import oslo_messaging as messaging

from trove_upgrade.common import conductor_rpcapi as rpcapi
from trove_upgrade.common import context
from trove_upgrade.common import exception
from trove_upgrade.common import rpc_interface
from trove_upgrade.common import states
from trove_upgrade.conductor import manager
from trove_upgrade.db import agents as db_agents
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.tests import base
from trove_upgrade.tests.fixtures import database
from trove_upgrade.tests.fixtures import rpc as rpc_fixture

INSTANCE = '3c1e5f2a-6b7d-4e8f-9a0b-1c2d3e4f5a6b'

AGENT = {'agent_version': '2026.2.0', 'guest_version': '21.0.0',
         'rpc_api_version': '1.0', 'state': 'RUNNING',
         'labels': {'az': 'nova', 'datastore': 'mysql'},
         'host': 'guest-1'}


class TestConductorAPI(base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(database.Database())
        self.useFixture(rpc_fixture.FakeTransport())
        self.flags(group='conductor', topic='conductor-test')
        self.server = self.useFixture(rpc_fixture.RecordingServer(
            messaging.Target(topic='conductor-test', server='conductor-1'),
            [manager.ConductorManager()]))
        self.context = context.RequestContext(request_id='req-agent-1')
        self.api = rpcapi.ConductorAPI()

    def create_upgrade(self):
        return db_upgrades.create_upgrade(context.get_admin_context(), {
            'instance_id': INSTANCE, 'instance_version': 'v2',
            'strategy': 'swift', 'location': 'swift://c/o'})

    def test_register_returns_the_conductor_version(self):
        self.assertEqual(manager.RPC_API_VERSION,
                         self.api.register_agent(self.context, INSTANCE,
                                                 **AGENT))
        [message] = self.server.wait_for(1)
        self.assertEqual(('register_agent', '1.0', 'req-agent-1'),
                         (message.method, message.version,
                          message.context['request_id']))
        self.assertEqual(dict(AGENT, instance_id=INSTANCE), message.args)
        agent = db_agents.get_agent(self.context, INSTANCE)
        self.assertEqual(AGENT, {k: agent[k] for k in AGENT})

    def test_register_with_a_bad_field_is_refused(self):
        e = self.assertRaises(
            exception.InvalidInputError, self.api.register_agent,
            self.context, INSTANCE,
            **dict(AGENT, rpc_api_version='one'))
        self.assertIn('rpc_api_version', str(e))
        self.assertRaises(exception.AgentNotFoundError, db_agents.get_agent,
                          self.context, INSTANCE)

    def test_heartbeat_is_a_cast(self):
        self.assertIsNone(self.api.heartbeat(self.context, INSTANCE,
                                             **dict(AGENT, state='BUSY')))
        [message] = self.server.wait_for(1)
        self.assertEqual('heartbeat', message.method)
        self.assertEqual(dict(AGENT, instance_id=INSTANCE, state='BUSY'),
                         message.args)

    def test_start_upgrade_is_a_call(self):
        upgrade = self.create_upgrade()
        self.assertEqual(
            {'proceed': True, 'status': states.DOWNLOADING, 'reason': None},
            self.api.start_upgrade(self.context, INSTANCE, upgrade['id'],
                                   'v1'))
        [message] = self.server.wait_for(1)
        self.assertEqual(('start_upgrade', '1.0'),
                         (message.method, message.version))
        self.assertEqual({'instance_id': INSTANCE,
                          'upgrade_id': upgrade['id'],
                          'from_version': 'v1'}, message.args)

    def test_report_is_a_call_answered_with_its_outcome(self):
        upgrade = self.create_upgrade()
        outcome = self.api.report_upgrade_state(
            self.context, INSTANCE, upgrade['id'], states.DEFERRED,
            'guest is busy', None, None)
        self.assertTrue(outcome['recorded'], outcome)
        self.assertEqual(states.DEFERRED, outcome['status'])
        [message] = self.server.wait_for(1)
        self.assertEqual(('report_upgrade_state', '1.0'),
                         (message.method, message.version))
        self.assertEqual({'instance_id': INSTANCE,
                          'upgrade_id': upgrade['id'],
                          'to_state': states.DEFERRED,
                          'detail': 'guest is busy',
                          'from_version': None, 'to_version': None},
                         message.args)

    def reports(self, upgrade):
        return [{'upgrade_id': upgrade['id'], 'to_state': state,
                 'detail': None, 'from_version': 'v1', 'to_version': 'v2'}
                for state in (states.VERIFYING, states.INSTALLING)]

    def test_reports_go_in_one_call_answered_in_order(self):
        upgrade = self.create_upgrade()
        self.api.start_upgrade(self.context, INSTANCE, upgrade['id'], 'v1')
        self.assertEqual(rpc_interface.MAX_REPORTS_PER_CALL,
                         self.api.reports_per_call())
        outcomes = self.api.report_upgrade_states(
            self.context, INSTANCE, self.reports(upgrade))
        self.assertEqual([states.VERIFYING, states.INSTALLING],
                         [o['status'] for o in outcomes])
        _claim, message = self.server.wait_for(2)
        self.assertEqual(('report_upgrade_states', '1.2'),
                         (message.method, message.version))
        self.assertEqual({'instance_id': INSTANCE,
                          'reports': self.reports(upgrade)}, message.args)

    def test_reports_cast_are_recorded_in_order(self):
        upgrade = self.create_upgrade()
        self.api.start_upgrade(self.context, INSTANCE, upgrade['id'], 'v1')
        self.assertIsNone(self.api.cast_upgrade_states(
            self.context, INSTANCE, self.reports(upgrade)))
        _claim, message = self.server.wait_for(2)
        self.assertEqual(('report_upgrade_states', '1.2'),
                         (message.method, message.version))
        self.assertEqual({'instance_id': INSTANCE,
                          'reports': self.reports(upgrade)}, message.args)
        self.assertEqual(
            [states.PENDING, states.DOWNLOADING, states.VERIFYING,
             states.INSTALLING],
            [e['to_state'] for e in db_upgrades.get_upgrade(
                self.context, upgrade['id'], with_events=True)['events']])

    def test_no_cast_of_reports_below_1_2(self):
        self.flags(group='upgrade_levels', conductor='1.1')
        api = rpcapi.ConductorAPI()
        upgrade = self.create_upgrade()
        self.assertRaises(messaging.RPCVersionCapError,
                          api.cast_upgrade_states, self.context, INSTANCE,
                          self.reports(upgrade))

    def test_a_method_is_not_sent_as_a_kind_it_is_not(self):
        e = self.assertRaises(ValueError, self.api._send, self.context,
                              'start_upgrade',
                              {'instance_id': INSTANCE, 'upgrade_id': 'u',
                               'from_version': None}, kind='cast')
        self.assertIn('start_upgrade is not sent by cast', str(e))

    def test_below_1_2_each_report_is_a_call_of_its_own(self):
        # The RPC-compat path: a conductor that predates 1.2.
        self.flags(group='upgrade_levels', conductor='1.1')
        api = rpcapi.ConductorAPI()
        self.assertEqual(1, api.reports_per_call())
        upgrade = self.create_upgrade()
        api.start_upgrade(self.context, INSTANCE, upgrade['id'], 'v1')
        outcomes = api.report_upgrade_states(self.context, INSTANCE,
                                             self.reports(upgrade))
        self.assertEqual([True, True], [o['recorded'] for o in outcomes])
        messages = self.server.wait_for(3)[1:]
        self.assertEqual([('report_upgrade_state', '1.0')] * 2,
                         [(m.method, m.version) for m in messages])
        self.assertEqual([states.VERIFYING, states.INSTALLING],
                         [m.args['to_state'] for m in messages])


class TestConductorVersionCap(base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(rpc_fixture.FakeTransport())

    def cap(self, value):
        self.flags(group='upgrade_levels', conductor=value)
        return rpcapi.ConductorAPI().client.version_cap

    def test_forms(self):
        self.assertIsNone(self.cap('latest'))
        self.assertEqual('1.0', self.cap('2026.2'))
        self.assertEqual('1.0', self.cap('1.0'))

    def test_auto_is_not_a_conductor_cap(self):
        # Agents have no registry of conductors to take a minimum from.
        self.flags(group='upgrade_levels', conductor='auto')
        self.assertRaises(exception.InvalidRPCVersionCapError,
                          rpcapi.ConductorAPI)

    def test_cap_below_the_first_version_refuses_to_send(self):
        self.flags(group='upgrade_levels', conductor='0.9')
        self.assertRaises(messaging.RPCVersionCapError,
                          rpcapi.ConductorAPI().heartbeat,
                          context.RequestContext(), INSTANCE, **AGENT)
