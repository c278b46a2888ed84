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

"""Upgrades reach the instance's topic over the real RabbitMQ."""

import socket

import oslo_messaging as messaging
from oslo_messaging import conffixture
from oslo_utils import uuidutils

from trove_upgrade.common import conductor_rpcapi as conductor_rpcapi
from trove_upgrade.common import context
from trove_upgrade.common import exception
from trove_upgrade.common import rpc
from trove_upgrade.common import rpc_interface
from trove_upgrade.common import states
from trove_upgrade.db import agents as db_agents
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.services import upgrades
from trove_upgrade.tests import base
from trove_upgrade.tests.fixtures import database
from trove_upgrade.tests.fixtures import rpc as rpc_fixture
from trove_upgrade.tests.functional import rabbit


class TestDispatch(base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(database.Database())
        self.rabbit = self.useFixture(rabbit.RabbitMQ())
        self.instance_id = uuidutils.generate_uuid()
        self.context = context.RequestContext(user_id='admin',
                                              project_id='ops',
                                              is_admin=True)
        self.values = {
            'instance_id': self.instance_id, 'instance_version': 'v1.0.1',
            'strategy': 'swift',
            'location': 'swift://guest-agents/trove-guestagent-v1.0.1.tgz',
            'metadata': {'ticket': 'OPS-7'}, 'allow_downgrade': False}

    def agent(self, version='1.0', instance_id=None):
        """A real RPC server on the instance's topic, as an agent runs."""
        endpoint = rpc_fixture.AgentEndpoint(version)
        server = self.useFixture(rpc_fixture.RecordingServer(
            messaging.Target(
                topic=rpc_interface.agent_topic(
                    instance_id or self.instance_id),
                server='guest-%s' % uuidutils.generate_uuid()[:8]),
            [endpoint]))
        return server, endpoint

    def register(self, rpc_api_version, instance_id=None):
        db_agents.register_agent(
            self.context, instance_id or uuidutils.generate_uuid(),
            {'agent_version': '2026.2.0', 'rpc_api_version': rpc_api_version,
             'state': 'RUNNING'})

    def test_create_sends_the_upgrade_to_the_instance_topic(self):
        server, endpoint = self.agent()
        upgrade = upgrades.create_upgrade(self.context, self.values)
        self.assertEqual(states.SENT, upgrade['status'])
        [message] = server.wait_for(1)
        self.assertEqual(('upgrade', '1.0', None),
                         (message.method, message.version, message.error))
        self.assertEqual(dict(self.values, upgrade_id=upgrade['id']),
                         message.args)
        self.assertEqual(
            (self.context.request_id, 'admin', 'ops', True),
            (message.context['request_id'], message.context['user'],
             message.context['project_id'], message.context['is_admin']))
        [(received_context, kwargs)] = endpoint.received
        self.assertEqual(self.context.request_id,
                         received_context.request_id)
        self.assertEqual(upgrade['id'], kwargs['upgrade_id'])

    def test_other_instances_do_not_see_it(self):
        server, _endpoint = self.agent()
        other_id = uuidutils.generate_uuid()
        other, _other_endpoint = self.agent(instance_id=other_id)
        mine = upgrades.create_upgrade(self.context, self.values)
        theirs = upgrades.create_upgrade(
            self.context, dict(self.values, instance_id=other_id))
        self.assertEqual([mine['id']],
                         [m.args['upgrade_id'] for m in server.wait_for(1)])
        self.assertEqual([theirs['id']],
                         [m.args['upgrade_id'] for m in other.wait_for(1)])

    def test_auto_caps_to_the_oldest_registered_agent(self):
        self.flags(group='upgrade_levels', agent='auto')
        server, _endpoint = self.agent('1.0')
        self.register('1.0', self.instance_id)
        self.register('1.4')
        upgrade = upgrades.create_upgrade(self.context, self.values)
        [message] = server.wait_for(1)
        self.assertEqual(('1.0', None, upgrade['id']),
                         (message.version, message.error,
                          message.args['upgrade_id']))

        # An agent older than anything this code can send joins the fleet:
        # the next upgrade is refused and recorded as FAILED, not sent.
        old_agent = uuidutils.generate_uuid()
        self.register('0.9', old_agent)
        e = self.assertRaises(exception.DispatchError,
                              upgrades.create_upgrade, self.context,
                              self.values)
        self.assertIn('0.9', str(e))
        failed = db_upgrades.get_upgrade(self.context, e.kwargs['upgrade_id'])
        self.assertEqual(states.FAILED, failed['status'])

        # It upgrades and registers again: the cap follows at once.
        self.register('1.0', old_agent)
        upgrade = upgrades.create_upgrade(self.context, self.values)
        second = server.wait_for(2)[1]
        self.assertEqual((upgrade['id'], '1.0', None),
                         (second.args['upgrade_id'], second.version,
                          second.error))

    def test_report_no_conductor_answered_raises_for_the_outbox(self):
        # The broker is up but no conductor's queue is bound to the topic:
        # reports are published mandatory, so the broker returns it at once
        # and the agent's outbox keeps it for the next flush.
        self.flags(rpc_response_timeout=2)
        self.assertRaises(messaging.MessageUndeliverable,
                          conductor_rpcapi.ConductorAPI().report_upgrade_state,
                          self.context, self.instance_id,
                          uuidutils.generate_uuid(), states.SUCCESS, None,
                          None, None)


class TestMessagingServerDown(base.TestCase):
    """Nothing listens where the transport points: sends must give up."""

    def setUp(self):
        super().setUp()
        self.useFixture(database.Database())
        with socket.socket() as sock:
            sock.bind(('127.0.0.1', 0))
            port = sock.getsockname()[1]
        messaging_conf = self.useFixture(conffixture.ConfFixture(self.conf))
        messaging_conf.transport_url = 'rabbit://guest:guest@127.0.0.1:%d/' % (
            port)
        self.flags(rpc_send_retries=1)
        rpc.cleanup()
        self.addCleanup(rpc.cleanup)
        self.context = context.get_admin_context()

    def test_upgrade_is_recorded_failed(self):
        e = self.assertRaises(exception.DispatchError,
                              upgrades.create_upgrade, self.context, {
                                  'instance_id': uuidutils.generate_uuid(),
                                  'instance_version': 'v1.0.1',
                                  'strategy': 'swift',
                                  'location': 'swift://c/o'})
        self.assertEqual(503, e.code)
        self.assertIn('Connection refused', str(e))
        upgrade = db_upgrades.get_upgrade(self.context, e.kwargs['upgrade_id'],
                                          with_events=True)
        self.assertEqual(states.FAILED, upgrade['status'])
        # Recorded sent with the upgrade, then the cast failed.
        self.assertEqual([states.PENDING, states.SENT, states.FAILED],
                         [ev['to_state'] for ev in upgrade['events']])
