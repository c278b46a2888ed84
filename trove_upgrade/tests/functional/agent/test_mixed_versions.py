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

"""Previous-release services beside today's, over real RabbitMQ, sealed.

The previous release (``previous_release``: agent API 1.1, conductor API
1.2) runs from its own source; between it and today, the agent API's
``upgrade`` gained ``expected_manifest`` (1.2), the conductor's
answers were sealed (1.3) and the conductor answers Trove's health
gate (``trove_health``, 1.4). Every instance has a key, so every message is
sealed. A client capped at the previous version works with today's
server; today's client, capped, works with the previous server; and a
binding argument the previous agent could not check is refused before it
is sent, never dropped.
"""

import hashlib
import os

import oslo_messaging as messaging
from oslo_utils import uuidutils


from trove_upgrade.agent import trove_health
from trove_upgrade.common import conductor_rpcapi as conductor_rpcapi
from trove_upgrade.common import exception
from trove_upgrade.common import states
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.services import agent_rpcapi
from trove_upgrade.services import sealing_keys
from trove_upgrade.tests.functional.agent import harness
from trove_upgrade.tests.functional import previous_release


class MixedVersionsTestCase(harness.AgentTestCase):

    def previous(self):
        if not hasattr(self, '_previous'):
            self._previous = self.useFixture(
                previous_release.PreviousRelease())
        return self._previous

    def record_upgrade(self, version):
        """An upgrade recorded and not sent, for a client to send."""
        return db_upgrades.create_upgrade(self.context, {
            'instance_id': self.instance_id, 'instance_version': version,
            'strategy': 'local',
            'location': os.path.join(self.repo, 'guest-%s.pkg' % version),
            'allow_downgrade': False})

    def send(self, upgrade, expected_manifest=None):
        agent_rpcapi.AgentAPI().upgrade(
            self.context, self.instance_id, upgrade['id'],
            upgrade['instance_version'], 'local', upgrade['location'], {},
            False, expected_manifest=expected_manifest)

    def manifest_sha256(self, version):
        path = os.path.join(self.repo, 'guest-%s.pkg.manifest' % version)
        with open(path, 'rb') as f:
            return hashlib.sha256(f.read()).hexdigest()

    def wait_for_agent(self, rpc_api_version):
        return self.wait_for(
            lambda: (self.registered() or {}).get('rpc_api_version')
            == rpc_api_version,
            'the agent to register with RPC API %s' % rpc_api_version)

    def assertSucceeds(self, upgrade):
        done = self.wait_for_status(upgrade['id'], states.FINAL_STATES)
        self.assertEqual(states.SUCCESS, done['status'], done['events'])
        self.assertEqual(upgrade['instance_version'],
                         self.running_guest_version())
        return done


class TestPreviousAgent(MixedVersionsTestCase):
    """Today's control plane and conductor, the previous release's agent."""

    packages = {'2.0.0': 'ok', '3.0.0': 'ok'}

    def setUp(self):
        super().setUp()
        self.start_agent(env=self.previous().env)
        self.wait_for_agent(previous_release.AGENT_API)

    def test_capped_control_plane_upgrades_the_previous_agent(self):
        # auto: the lowest version the agents reported, the previous one.
        self.flags(group='upgrade_levels', agent='auto')
        upgrade = self.create_upgrade('2.0.0')
        self.assertSucceeds(upgrade)
        # The previous agent's sealed claim and reports, answered unsealed
        # by today's conductor, as the previous agent expects.
        self.assertEqual('2.0.0', self.wait_for_outbox_empty()[
            'last_known_good'])

    def test_a_binding_it_could_not_check_is_refused_not_dropped(self):
        self.flags(group='upgrade_levels', agent='auto')
        bound = self.record_upgrade('2.0.0')
        e = self.assertRaises(
            exception.ArgumentNeedsNewerVersionError, self.send, bound,
            {'sha256': self.manifest_sha256('2.0.0'), 'package': None})
        self.assertIn('expected_manifest', str(e))
        self.assertIn('capped at 1.1', str(e))
        # What goes after it arrives; the bound upgrade never did.
        later = self.create_upgrade('3.0.0')
        self.assertSucceeds(later)
        journal = self.journal()
        self.assertNotIn(bound['id'], journal['processed'])
        self.assertEqual(states.PENDING,
                         self.get_upgrade(bound['id'])['status'])

    def test_uncapped_bound_upgrade_is_not_served_by_the_previous_agent(self):
        # Without a cap the 1.2 message goes out and the previous agent,
        # which serves up to 1.1, refuses it: nothing is installed.
        bound = self.record_upgrade('2.0.0')
        self.send(bound, {'sha256': self.manifest_sha256('2.0.0'),
                          'package': None})
        self.wait_for_log('Refused RPC message')
        later = self.create_upgrade('3.0.0')
        self.assertSucceeds(later)
        self.assertNotIn(bound['id'], self.journal()['processed'])


class TestPreviousConductor(MixedVersionsTestCase):
    """Today's agent and control plane, the previous release's conductor."""

    def conductor_env(self):
        return self.previous().env

    def test_capped_agent_upgrades_through_the_previous_conductor(self):
        self.start_agent(sections={'upgrade_levels': {
            'conductor': previous_release.CONDUCTOR_API}})
        self.wait_for_agent(agent_rpcapi.AgentAPI.RPC_API_VERSION)
        upgrade = self.create_upgrade('2.0.0')
        self.assertSucceeds(upgrade)

    def test_todays_calls_are_capped_or_refused_by_the_previous_one(self):
        keys = sealing_keys.keyring(self.context, self.instance_id)
        fields = dict(instance_id=self.instance_id, agent_version='x',
                      guest_version='1.0.0', rpc_api_version='1.2',
                      state='running', labels={}, host='guest')
        self.flags(group='conductor', topic=self.conductor_topic)
        # Capped at its version, the call goes sealed at 1.1 and its
        # answer, unsealed as it answers, is taken (once the conductor
        # has declared its queue).
        self.flags(group='upgrade_levels',
                   conductor=previous_release.CONDUCTOR_API)
        capped = conductor_rpcapi.ConductorAPI(keys)

        def register():
            try:
                return capped.register_agent(self.context, **fields)
            except messaging.MessageUndeliverable:
                return None
        self.assertEqual(previous_release.CONDUCTOR_API,
                         self.wait_for(register, 'the conductor'))
        # Uncapped, today's sealed-answer call is above what it serves.
        self.flags(group='upgrade_levels', conductor='latest')
        e = self.assertRaises(messaging.MessagingException,
                              conductor_rpcapi.ConductorAPI(keys)
                              .register_agent, self.context, **fields)
        self.assertIn('UnsupportedVersion', '%s %s %s' % (
            type(e).__name__, getattr(e, 'exc_type', ''), e))
        # Trove's health gate (1.4): the previous conductor refuses the
        # question, and today's agent falls back to the ping alone.
        gate = trove_health.TroveHealthGate(
            conductor_rpcapi.ConductorAPI(keys), self.context,
            self.instance_id).baseline({'id': uuidutils.generate_uuid()})
        self.assertEqual({'gate': False, 'reason': 'the conductor is older '
                          'than RPC API 1.4'}, gate)


class TestTodaysAgentBound(MixedVersionsTestCase):
    """Today's services: an upgrade bound to its manifest."""

    def setUp(self):
        super().setUp()
        self.start_agent()
        self.wait_for_agent(agent_rpcapi.AgentAPI.RPC_API_VERSION)

    def test_the_expected_manifest_is_installed(self):
        upgrade = self.record_upgrade('2.0.0')
        self.send(upgrade, {'sha256': self.manifest_sha256('2.0.0'),
                            'package': None})
        self.assertSucceeds(upgrade)

    def test_another_manifest_is_refused_before_its_payload(self):
        upgrade = self.record_upgrade('2.0.0')
        self.send(upgrade, {'sha256': 'ab' * 32, 'package': None})
        done = self.wait_for_status(upgrade['id'], states.FINAL_STATES)
        self.assertEqual(states.FAILED, done['status'])
        self.assertIn('ManifestHashMismatchError', done['status_detail'])
        self.assertEqual('1.0.0', self.running_guest_version())

    def test_an_unnamed_package_is_refused_where_a_name_is_expected(self):
        upgrade = self.record_upgrade('2.0.0')
        self.send(upgrade, {'sha256': None, 'package': 'trove-guestagent'})
        done = self.wait_for_status(upgrade['id'], states.FINAL_STATES)
        self.assertEqual(states.FAILED, done['status'])
        self.assertIn('PackageNameMismatchError', done['status_detail'])
        self.assertIn('unnamed', done['status_detail'])
