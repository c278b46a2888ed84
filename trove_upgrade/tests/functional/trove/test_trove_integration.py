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

"""The control plane reading a real Trove database, with real agents.

Trove's schema comes from the real ``trove-manage db_sync`` of Trove
25.1.0 on MariaDB (``trove_db``); the conductor and the agent are real
processes on the real RabbitMQ (``agent/harness.py``). The instance is
created by Trove's own code, with Trove's defaults, in a customer's
project. Its sealing key is derived from the key Trove gave it: the agent
reads the guest_info.conf Trove injected (``[trove_guest] config_dir``),
no ``trove-upgrade-manage instance-key`` is used, and neither side is
told to require seals: the defaults do.
"""

import os

from oslo_utils import uuidutils

from tools.testbed import conffile
from trove_upgrade.common import conductor_rpcapi as conductor_rpcapi
from trove_upgrade.common import exception
from trove_upgrade.common import rpc_interface
from trove_upgrade.common import sealing
from trove_upgrade.common import states
from trove_upgrade.db import trove as trove_db_api
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.services import agent_rpcapi
from trove_upgrade.services import upgrades
from trove_upgrade.tests.functional.agent import harness
from trove_upgrade.tests.functional.trove import trove_db

AGENT = dict(agent_version='9.9.9', guest_version='1.0.0',
             rpc_api_version='1.1', state='running', labels={},
             host='forger')


class TroveTestCase(harness.AgentTestCase):
    """One instance in Trove's database, keyed by Trove only."""

    def provision_key(self, instance_id):
        # No key of trove-upgrade's own: the one Trove gave is used.
        return None

    def agent_conf(self, **overrides):
        agent = super().agent_conf(**overrides)
        if agent['instance_key_file'] is None:
            del agent['instance_key_file']
        del agent['require_sealed']  # the default requires seals
        return agent

    def start_conductor(self):
        if not hasattr(self, 'trove'):
            self.trove = self.useFixture(trove_db.TroveDatabase())
            self.trove.add_instance('db-1', instance_id=self.instance_id)
            self.trove_conf_dir = os.path.join(self.tmp, 'trove-conf.d')
            self.trove.write_guest_info(self.instance_id,
                                        self.trove_conf_dir)
            self.flags(group='trove', connection=self.trove.url)
            self.addCleanup(trove_db_api.dispose)
        return super().start_conductor()

    def conductor_conf(self):
        conf = super().conductor_conf()
        conf['DEFAULT']['debug'] = True
        conf['conductor']['rollout_interval'] = 0.3
        conf['trove'] = {'connection': self.trove.url}
        return conf

    def start_agent(self, **overrides):
        path = os.path.join(self.tmp, 'agent.conf')
        conffile.write_conf(path, {
            'DEFAULT': {'transport_url': harness.RABBIT_URL,
                        'control_exchange': self.exchange,
                        'state_path': self.tmp},
            'agent': self.agent_conf(**overrides),
            # Where the agent finds the key Trove injected.
            'trove_guest': {'config_dir': self.trove_conf_dir},
            'conductor': {'topic': self.conductor_topic},
        })
        proc = self._spawn('agent', [
            os.path.join(harness.BIN, 'trove-upgrade-agent'),
            '--config-file', path])
        self.addCleanup(self.stop_guest)
        return proc

    def setUp(self):
        super().setUp()
        self.flags(group='conductor', topic=self.conductor_topic,
                   require_sealed=True)

    def wait_for_conductor_log(self, text):
        return self.wait_for_log(text, name='conductor')

    def assert_completed(self, upgrade_id):
        done = self.wait_for_status(upgrade_id, states.FINAL_STATES)
        self.assertEqual(states.SUCCESS, done['status'], done['events'])
        self.assertEqual('2.0.0', self.running_guest_version())
        return done


class TestTroveAwareDispatch(TroveTestCase):

    def test_missing_deleted_named_and_ambiguous_instances(self):
        e = self.assertRaises(exception.InstanceNotFoundError,
                              self.create_upgrade_of,
                              uuidutils.generate_uuid())
        self.assertEqual(404, e.code)
        self.assertIn('no instance has this id or name', str(e))
        deleted = self.trove.add_instance('gone', deleted=True)
        e = self.assertRaises(exception.InstanceNotFoundError,
                              self.create_upgrade_of, deleted)
        self.assertIn('it was deleted', str(e))
        self.assertRaises(exception.InstanceNotFoundError,
                          self.create_upgrade_of, 'gone')
        self.trove.add_instance('twin')
        self.trove.add_instance('twin')
        e = self.assertRaises(exception.AmbiguousInstanceNameError,
                              self.create_upgrade_of, 'twin')
        self.assertEqual(400, e.code)
        self.assertEqual([], db_upgrades.list_upgrades(self.context))
        # By name: recorded for the instance's id.
        upgrade = self.create_upgrade_of('db-1')
        self.assertEqual(self.instance_id, upgrade['instance_id'])
        upgrades.cancel_upgrade(self.context, upgrade['id'])

    def create_upgrade_of(self, instance):
        return upgrades.create_upgrade(self.context, {
            'instance_id': instance, 'instance_version': '2.0.0',
            'strategy': 'local',
            'location': os.path.join(self.repo, 'guest-2.0.0.pkg'),
            'allow_downgrade': False})

    def test_busy_instance_held_deferred_then_sent_when_idle(self):
        self.trove.set_task(self.instance_id, trove_db.RESIZING)
        self.start_agent()
        self.wait_for_guest('1.0.0')
        self.wait_for(self.registered, 'the agent to register')
        upgrade = self.create_upgrade('2.0.0')
        self.assertEqual(states.DEFERRED, upgrade['status'])
        self.assertIn('Trove is working on instance', upgrade['status_detail'])
        self.wait_for_conductor_log('Upgrade %s still held: Trove is working'
                                    % upgrade['id'])
        # Idle task, but a backup runs: still held.
        self.trove.set_task(self.instance_id, trove_db.NONE)
        backup = self.trove.add_backup(self.instance_id, 'BUILDING')
        self.wait_for_conductor_log('Upgrade %s still held: a backup'
                                    % upgrade['id'])
        held = self.get_upgrade(upgrade['id'])
        self.assertEqual(states.DEFERRED, held['status'])
        self.assertEqual([states.PENDING, states.DEFERRED],
                         self.history(held))
        self.assertEqual('1.0.0', self.running_guest_version())

        self.trove.set_backup_state(backup, 'COMPLETED')
        done = self.assert_completed(upgrade['id'])
        release = done['events'][2]
        self.assertEqual(('conductor', states.DEFERRED, states.DEFERRED),
                         (release['source'], release['from_state'],
                          release['to_state']))

    def test_unregistered_agent_upgrade_held_until_it_registers(self):
        upgrade = self.create_upgrade('2.0.0')
        self.assertEqual(states.DEFERRED, upgrade['status'])
        self.assertIn('waiting for the upgrade agent',
                      upgrade['status_detail'])
        self.wait_for_conductor_log('Upgrade %s still held: waiting for the '
                                    'upgrade agent' % upgrade['id'])
        self.start_agent()
        self.assert_completed(upgrade['id'])


class TestSealingWithTroveKeys(TroveTestCase):

    def test_forged_messages_refused_by_default(self):
        self.start_agent()
        self.wait_for(self.registered, 'the agent to register')
        forged = sealing.InstanceKeys(
            self.instance_id, [('trove-v1-forged', sealing.generate_key())])
        for keyring in (forged, None):
            e = self.assertRaises(
                exception.MessageNotAuthenticatedError,
                conductor_rpcapi.ConductorAPI(keyring).register_agent,
                self.context, instance_id=self.instance_id, **AGENT)
            self.assertIn(self.instance_id, str(e))
        # An instance Trove gave no key: nothing may speak for it.
        stranger = self.trove.add_instance('keyless', secure_rpc=False)
        self.assertRaises(
            exception.MessageNotAuthenticatedError,
            conductor_rpcapi.ConductorAPI().register_agent,
            self.context, instance_id=stranger, **AGENT)
        self.assertIsNone(self.registered(stranger))
        self.assertEqual('running', self.registered()['state'])
        self.assertNotEqual('forger', self.registered()['host'])

        # An unsealed upgrade cast straight to the agent is refused.
        upgrade = db_upgrades.create_upgrade(self.context, {
            'instance_id': self.instance_id, 'instance_version': '2.0.0',
            'strategy': 'local',
            'location': os.path.join(self.repo, 'guest-2.0.0.pkg'),
            'metadata': {}, 'allow_downgrade': False})
        client = agent_rpcapi.AgentAPI().client.prepare(
            topic=rpc_interface.agent_topic(self.instance_id), version='1.0')
        client.cast(self.context, 'upgrade', upgrade_id=upgrade['id'],
                    instance_id=self.instance_id, instance_version='2.0.0',
                    strategy='local', location=upgrade['location'],
                    metadata={}, allow_downgrade=False)
        self.wait_for_log('Refused upgrade message (upgrade id %s'
                          % upgrade['id'])
        self.assertEqual(states.PENDING,
                         self.get_upgrade(upgrade['id'])['status'])

        # The genuine one, sealed with the key derived from Trove's.
        genuine = self.create_upgrade('2.0.0')
        self.assertEqual(states.SENT, genuine['status'])
        self.assert_completed(genuine['id'])
