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

"""The control plane's client of the upgrade agents, and its version cap."""

import oslo_messaging as messaging
from oslo_utils import uuidutils

from trove_upgrade.common import context
from trove_upgrade.common import exception
from trove_upgrade.common import rpc
from trove_upgrade.common import rpc_interface
from trove_upgrade.db import agents as db_agents
from trove_upgrade.services import agent_rpcapi as rpcapi
from trove_upgrade.tests import base
from trove_upgrade.tests.fixtures import database
from trove_upgrade.tests.fixtures import rpc as rpc_fixture

INSTANCE = '9e2f7a4c-1b3d-4c5e-8f6a-7b8c9d0e1f2a'


def register(ctxt, rpc_api_version, instance_id=None):
    db_agents.register_agent(
        ctxt, instance_id or uuidutils.generate_uuid(),
        {'agent_version': '2026.2.0', 'rpc_api_version': rpc_api_version,
         'state': 'RUNNING'})


class TestTopic(base.TestCase):

    def test_one_topic_per_instance(self):
        self.assertEqual('guestagent_upgrade.%s' % INSTANCE,
                         rpc_interface.agent_topic(INSTANCE))

    def test_never_troves_own_topic(self):
        # Trove's guest agent consumes guestagent.<id>: sharing it would
        # hand upgrades to a consumer that does not know them.
        self.assertNotEqual('guestagent.%s' % INSTANCE,
                            rpc_interface.agent_topic(INSTANCE))
        self.assertFalse(rpc_interface.agent_topic(INSTANCE).startswith(
            'guestagent.'))


class TestVersionCap(base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(database.Database())
        self.useFixture(rpc_fixture.FakeTransport())
        self.context = context.get_admin_context()

    def cap(self, value):
        self.flags(group='upgrade_levels', agent=value)
        return rpcapi.AgentAPI().version_cap(self.context)

    def prepared(self, value):
        self.flags(group='upgrade_levels', agent=value)
        api = rpcapi.AgentAPI()
        return api._prepare(INSTANCE, api.version_cap(self.context), '1.0')

    def test_latest(self):
        self.assertIsNone(self.cap('latest'))
        self.assertTrue(self.prepared('latest').can_send_version(
            rpcapi.AgentAPI.RPC_API_VERSION))

    def test_release_alias(self):
        self.assertEqual('1.0', self.cap('2026.2'))

    def test_explicit(self):
        self.assertEqual('1.0', self.cap('1.0'))
        self.assertEqual('0.9', self.cap('0.9'))

    def test_explicit_above_this_code_fails_at_construction(self):
        self.flags(group='upgrade_levels', agent='2026.1')
        self.assertRaises(exception.InvalidRPCVersionCapError, rpcapi.AgentAPI)

    def test_cap_decides_what_can_be_sent(self):
        cctxt = self.prepared('1.0')
        self.assertTrue(cctxt.can_send_version('1.0'))
        self.assertFalse(cctxt.can_send_version('1.1'))
        # Agents newer than this code: the cap follows them numerically.
        register(self.context, '1.10')
        register(self.context, '1.12')
        cctxt = self.prepared('auto')
        self.assertTrue(cctxt.can_send_version('1.9'))
        self.assertTrue(cctxt.can_send_version('1.10'))
        self.assertFalse(cctxt.can_send_version('1.11'))
        self.assertFalse(cctxt.can_send_version('2.0'))

    def test_invalid_value_fails_at_construction(self):
        self.flags(group='upgrade_levels', agent='1.x')
        e = self.assertRaises(exception.InvalidRPCVersionCapError,
                              rpcapi.AgentAPI)
        self.assertIn('[upgrade_levels] agent = 1.x', str(e))

    def test_auto_without_agents_is_uncapped(self):
        self.assertIsNone(self.cap('auto'))

    def test_auto_is_the_oldest_registered_agent(self):
        register(self.context, '1.10')
        register(self.context, '1.9')
        register(self.context, '1.12')
        self.assertEqual('1.9', self.cap('auto'))
        cctxt = self.prepared('auto')
        self.assertTrue(cctxt.can_send_version('1.9'))
        self.assertFalse(cctxt.can_send_version('1.10'))

    def test_auto_compares_majors_numerically(self):
        register(self.context, '10.0')
        register(self.context, '9.3')
        self.assertEqual('9.3', self.cap('auto'))

    def test_auto_is_read_again_on_every_send(self):
        self.flags(group='upgrade_levels', agent='auto')
        api = rpcapi.AgentAPI()
        register(self.context, '1.4', instance_id=INSTANCE)
        self.assertEqual('1.4', api.version_cap(self.context))
        register(self.context, '1.2')
        self.assertEqual('1.2', api.version_cap(self.context))
        # The old agent upgraded its agent and registered again.
        register(self.context, '1.5',
                 instance_id=db_agents.list_agents(
                     self.context, {'rpc_api_version': '1.2'})[0][
                         'instance_id'])
        self.assertEqual('1.4', api.version_cap(self.context))


class TestUpgrade(base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(database.Database())
        self.useFixture(rpc_fixture.FakeTransport())
        self.context = context.RequestContext(user_id='admin',
                                              project_id='admin-project',
                                              is_admin=True)
        self.agent = rpc_fixture.AgentEndpoint('1.0')
        self.server = self.useFixture(rpc_fixture.RecordingServer(
            messaging.Target(topic=rpc_interface.agent_topic(INSTANCE),
                             server='guest-1'),
            [self.agent]))

    def send(self):
        rpcapi.AgentAPI().upgrade(
            self.context, INSTANCE, 'upgrade-1', 'v1.0.1', 'swift',
            'swift://guest-agents/trove-guestagent-v1.0.1.tar.gz',
            {'reason': 'CVE'}, False)

    def test_cast_reaches_the_instance_topic(self):
        self.send()
        [message] = self.server.wait_for(1)
        self.assertEqual(('upgrade', '1.0', None, None),
                         (message.method, message.version,
                          message.namespace, message.error))
        self.assertEqual(1, len(self.agent.received))
        self.assertEqual(
            {'upgrade_id': 'upgrade-1', 'instance_id': INSTANCE,
             'instance_version': 'v1.0.1', 'strategy': 'swift',
             'location': 'swift://guest-agents/'
                         'trove-guestagent-v1.0.1.tar.gz',
             'metadata': {'reason': 'CVE'}, 'allow_downgrade': False},
            message.args)
        self.assertEqual(self.context.request_id,
                         message.context['request_id'])
        self.assertTrue(message.context['is_admin'])

    def test_another_instance_does_not_receive_it(self):
        other_instance = uuidutils.generate_uuid()
        other = self.useFixture(rpc_fixture.RecordingServer(
            messaging.Target(topic=rpc_interface.agent_topic(other_instance),
                             server='guest-2'),
            [rpc_fixture.AgentEndpoint()]))
        self.send()
        rpcapi.AgentAPI().upgrade(self.context, other_instance, 'upgrade-2',
                                  'v1.0.1', 'swift', 'swift://c/o', {},
                                  False)
        # Queues are first in, first out: had the first upgrade reached the
        # other instance's topic, it would come before the second.
        [first] = other.wait_for(1)
        self.assertEqual('upgrade-2', first.args['upgrade_id'])
        [mine] = self.server.wait_for(1)
        self.assertEqual('upgrade-1', mine.args['upgrade_id'])

    def test_cap_below_the_first_version_refuses_to_send(self):
        self.flags(group='upgrade_levels', agent='0.9')
        self.assertRaises(messaging.RPCVersionCapError, self.send)

    def test_auto_refuses_when_an_agent_is_too_old(self):
        self.flags(group='upgrade_levels', agent='auto')
        register(self.context, '0.9')
        self.assertRaises(messaging.RPCVersionCapError, self.send)

    def test_auto_sends_to_agents_that_understand_it(self):
        self.flags(group='upgrade_levels', agent='auto')
        register(self.context, '1.0', instance_id=INSTANCE)
        register(self.context, '1.3')
        self.send()
        [message] = self.server.wait_for(1)
        self.assertEqual(('1.0', None), (message.version, message.error))


class TestShared(base.TestCase):
    """The API's one AgentAPI: kept, but never past what it was built of."""

    def setUp(self):
        super().setUp()
        self.useFixture(rpc_fixture.FakeTransport())

    def test_kept_between_calls(self):
        self.assertIs(rpcapi.shared(), rpcapi.shared())

    def test_built_again_for_a_new_transport(self):
        first = rpcapi.shared()
        rpc.cleanup()
        second = rpcapi.shared()
        self.assertIsNot(first, second)
        self.assertIs(rpc.get_transport(), second.transport)

    def test_built_again_when_send_retries_change(self):
        first = rpcapi.shared()
        self.flags(rpc_send_retries=first.retries + 1)
        second = rpcapi.shared()
        self.assertIsNot(first, second)
        self.assertEqual(first.retries + 1, second.retries)

    def test_bad_cap_refused_on_every_call(self):
        rpcapi.shared()
        self.flags(group='upgrade_levels', agent='1.x')
        self.assertRaises(exception.InvalidRPCVersionCapError, rpcapi.shared)
