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

"""Forged, unsealed and replayed messages on the real bus are refused.

The attacker publishes with plain oslo.messaging on the agent's topic and
on the conductor's topic, as anyone with access to the broker could; the
agent and the conductor are the real processes of the harness, the agent
requiring seals with its instance's key.
"""

import os

import oslo_messaging as messaging

from trove_upgrade.common import conductor_rpcapi as conductor_rpcapi
from trove_upgrade.common import exception
from trove_upgrade.common import rpc_interface
from trove_upgrade.common import sealing
from trove_upgrade.common import states
from trove_upgrade.db import agents as db_agents
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.services import sealing_keys
from trove_upgrade.tests.fixtures import rpc as rpc_fixture
from trove_upgrade.tests.functional.agent import harness


class TestSealing(harness.AgentTestCase):

    def setUp(self):
        super().setUp()
        self.transport = messaging.get_rpc_transport(self.conf)
        self.addCleanup(self.transport.cleanup)
        self.flags(group='conductor', topic=self.conductor_topic)
        self.keys = sealing_keys.keyring(self.context, self.instance_id)

    def publish(self, args, sealed=None, version='1.1'):
        """Cast ``upgrade`` on the agent's topic, as any client could."""
        client = messaging.get_rpc_client(self.transport, messaging.Target(
            topic=rpc_interface.agent_topic(self.instance_id),
            version=version))
        if sealed is not None:
            args = dict(args, sealed=sealed)
        client.cast({}, 'upgrade', **args)

    def forged_keys(self, key_id=None):
        return sealing.InstanceKeys(self.instance_id, [
            (key_id or sealing.new_key_id(), sealing.generate_key())])

    def record_upgrade(self, version):
        """An upgrade in the database that nobody sent."""
        upgrade = db_upgrades.create_upgrade(self.context, {
            'instance_id': self.instance_id, 'instance_version': version,
            'strategy': 'local',
            'location': os.path.join(self.repo, 'guest-%s.pkg' % version),
            'allow_downgrade': True})
        return self.get_upgrade(upgrade['id'])

    def args(self, upgrade):
        return dict(upgrade_id=upgrade['id'], instance_id=self.instance_id,
                    instance_version=upgrade['instance_version'],
                    strategy='local', location=upgrade['location'],
                    metadata={}, allow_downgrade=True)

    def assertUntouched(self, upgrade, pid):
        self.assertEqual(upgrade, self.get_upgrade(upgrade['id']))
        journal = self.journal()
        self.assertNotIn(upgrade['id'], journal['processed'])
        self.assertEqual([], journal['queue'])
        self.assertIsNone(journal['current_upgrade'])
        self.assertEqual(
            [], [r for r in journal['outbox']
                 if r['upgrade_id'] == upgrade['id']])
        self.assertEqual(pid, self.guest_status()['pid'])
        self.assertEqual('1.0.0', self.current_version())

    def test_forged_upgrade_messages_refused_by_the_agent(self):
        self.start_agent()
        self.wait_for_guest('1.0.0')
        pid = self.guest_status()['pid']
        # A downgrade nobody asked the agent for: the attacker reuses the
        # id of an upgrade the database holds.
        forged = self.record_upgrade('0.9.0')
        args = self.args(forged)
        real_key_id = self.keys.sealing_key()[0]
        attempts = [
            ('UnsealedError', None, '1.0'),
            ('BadSealError', sealing.seal(self.forged_keys(real_key_id),
                                          'upgrade', '1.1', sealing.TO_AGENT,
                                          args), '1.1'),
            ('UnknownKeyError', sealing.seal(self.forged_keys(), 'upgrade',
                                             '1.1', sealing.TO_AGENT, args),
             '1.1'),
            # A genuine seal moved onto other arguments.
            ('BadSealError', sealing.seal(
                self.keys, 'upgrade', '1.1', sealing.TO_AGENT,
                dict(args, instance_version='2.0.0')),
             '1.1'),
        ]
        for count, (error, sealed, version) in enumerate(attempts, 1):
            self.publish(args, sealed, version)
            marker = 'Refused upgrade message (upgrade id %s' % forged['id']
            self.wait_for(
                lambda: self._log_all('agent').count(marker) >= count,
                '%d refusals of the forged upgrade' % count)
            self.assertIn('): %s:' % error,
                          self._log_all('agent').split(marker)[count])
        self.assertUntouched(forged, pid)

        # The control plane's sealed upgrade still goes through.
        upgrade = self.create_upgrade('2.0.0')
        done = self.wait_for_status(upgrade['id'], states.FINAL_STATES)
        self.assertEqual(states.SUCCESS, done['status'], done['events'])
        self.assertEqual('2.0.0', self.running_guest_version())
        self.assertEqual(forged, self.get_upgrade(forged['id']))

    def test_captured_message_replayed_is_refused(self):
        # A spy consumes the instance's topic before the agent runs and
        # captures the genuine sealed upgrade the control plane casts.
        topic = rpc_interface.agent_topic(self.instance_id)
        self.bus_queues.append('%s.spy' % topic)
        spy = rpc_fixture.RecordingServer(
            messaging.Target(topic=topic, server='spy'),
            [rpc_fixture.AgentEndpoint('1.1')])
        spy.setUp()
        upgrade = self.create_upgrade('2.0.0')
        [captured] = spy.wait_for(1)
        spy.cleanUp()
        self.assertIn('sealed', captured.args)

        self.start_agent()
        self.wait_for_guest('1.0.0')
        self.publish(captured.args, version=captured.version)
        done = self.wait_for_status(upgrade['id'], states.FINAL_STATES)
        self.assertEqual(states.SUCCESS, done['status'], done['events'])
        pid = self.guest_status()['pid']
        journal = self.wait_for_outbox_empty()

        self.publish(captured.args, version=captured.version)
        self.wait_for_log('Refused upgrade message (upgrade id %s'
                          % upgrade['id'])
        self.assertIn('ReplayedMessageError', self._log_all('agent'))
        self.assertNotIn('was already received', self._log_all('agent'))
        self.assertEqual(done, self.get_upgrade(upgrade['id']))
        self.assertEqual(journal, self.journal())
        self.assertEqual(pid, self.guest_status()['pid'])

    def wait_for_conductor(self, api, upgrade_id):
        """Call until the conductor consumes its topic: it refuses.

        Before its queue is declared, the broker returns the call
        (MessageUndeliverable: calls to conductors are mandatory).
        """
        def refused():
            try:
                api.start_upgrade(self.context, self.instance_id,
                                  upgrade_id, '1.0.0')
            except (messaging.MessagingTimeout,
                    messaging.MessageUndeliverable):
                return False
            except exception.MessageNotAuthenticatedError:
                return True
            self.fail('the conductor accepted an unsealed claim')
        self.wait_for(refused, 'the conductor to answer')

    def test_forged_agent_messages_refused_by_the_conductor(self):
        upgrade = self.create_upgrade('2.0.0')
        upgrade = self.get_upgrade(upgrade['id'])
        self.assertEqual(states.SENT, upgrade['status'])
        self.flags(rpc_response_timeout=5)
        self.wait_for_conductor(conductor_rpcapi.ConductorAPI(),
                                upgrade['id'])
        info = dict(instance_id=self.instance_id, agent_version='9.9',
                    guest_version='6.6.6', rpc_api_version='1.1',
                    state='running', labels={'group': 'evil'}, host='evil')
        real_key_id = self.keys.sealing_key()[0]
        for keys in (None, self.forged_keys(real_key_id),
                     self.forged_keys()):
            api = conductor_rpcapi.ConductorAPI(keys)
            for method, kwargs in (
                    (api.report_upgrade_state,
                     dict(upgrade_id=upgrade['id'], to_state=states.SUCCESS,
                          detail='forged', from_version='1.0.0',
                          to_version='2.0.0')),
                    (api.start_upgrade, dict(upgrade_id=upgrade['id'],
                                             from_version='1.0.0')),
                    (api.register_agent, info)):
                kwargs = dict(kwargs, instance_id=self.instance_id)
                e = self.assertRaises(exception.MessageNotAuthenticatedError,
                                      method, self.context, **kwargs)
                self.assertIn(self.instance_id, str(e))
            api.heartbeat(self.context, **info)
        self.wait_for(
            lambda: self._log_all('conductor').count(
                'Refused heartbeat message of instance %s'
                % self.instance_id) >= 3,
            'the conductor to refuse three forged heartbeats')
        self.assertEqual(upgrade, self.get_upgrade(upgrade['id']))
        self.assertRaises(exception.AgentNotFoundError, db_agents.get_agent,
                          self.context, self.instance_id)
