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

"""The conductor endpoint refuses agent messages that do not authenticate."""

import oslo_messaging as messaging
from oslo_messaging.rpc import dispatcher

from trove_upgrade.common import conductor_rpcapi as rpcapi
from trove_upgrade.common import context
from trove_upgrade.common import exception
from trove_upgrade.common import sealing
from trove_upgrade.common import states
from trove_upgrade.conductor import manager
from trove_upgrade.db import agents as db_agents
from trove_upgrade.services import sealing_keys
from trove_upgrade.tests.fixtures import rpc as rpc_fixture
from trove_upgrade.tests.unit.conductor import test_manager

INSTANCE = test_manager.INSTANCE
AGENT = dict(test_manager.AGENT, instance_id=INSTANCE)


class SealedTestCase(test_manager.ManagerTestCase):

    def setUp(self):
        super().setUp()
        sealing_keys.add_key(self.context, INSTANCE)
        self.keys = sealing_keys.keyring(self.context, INSTANCE)

    def sealed(self, method, args, keys=None):
        return sealing.seal(keys or self.keys, method, '1.1',
                            sealing.TO_CONDUCTOR, args)

    def assertNotAuthenticated(self, method, *args, **kwargs):
        e = self.assertRaises(dispatcher.ExpectedException, method, *args,
                              **kwargs)
        self.assertIsInstance(e.exc_info[1],
                              exception.MessageNotAuthenticatedError)
        return e.exc_info[1]


class TestSealedRegistration(SealedTestCase):

    def test_sealed_registration_recorded(self):
        self.manager.register_agent(
            self.context, sealed=self.sealed('register_agent', AGENT),
            **AGENT)
        self.assertEqual('guest-1',
                         db_agents.get_agent(self.context, INSTANCE)['host'])

    def test_refusals(self):
        wrong = sealing.InstanceKeys(INSTANCE, [(self.keys.keys[0][0],
                                                 sealing.generate_key())])
        other = sealing.InstanceKeys(INSTANCE, [('other',
                                                 sealing.generate_key())])
        for sealed, reason in ((None, 'not sealed'),
                               (self.sealed('register_agent', AGENT, wrong),
                                'does not verify'),
                               (self.sealed('register_agent', AGENT, other),
                                'no key other'),
                               (self.sealed('heartbeat', AGENT),
                                'does not verify')):
            e = self.assertNotAuthenticated(
                self.manager.register_agent, self.context, sealed=sealed,
                **AGENT)
            self.assertIn(reason, str(e))
            self.assertIn(INSTANCE, str(e))
        self.assertRaises(exception.AgentNotFoundError, db_agents.get_agent,
                          self.context, INSTANCE)

    def test_replay_refused(self):
        sealed = self.sealed('register_agent', AGENT)
        self.manager.register_agent(self.context, sealed=sealed, **AGENT)
        e = self.assertNotAuthenticated(
            self.manager.register_agent, self.context, sealed=sealed,
            **AGENT)
        self.assertIn('already accepted', str(e))

    def test_forged_heartbeat_ignored(self):
        self.manager.heartbeat(self.context, **AGENT)
        self.assertRaises(exception.AgentNotFoundError, db_agents.get_agent,
                          self.context, INSTANCE)

    def test_rotation_keeps_old_key_for_the_grace(self):
        self.flags(group='conductor', instance_key_cache_time=0)
        self.manager = manager.ConductorManager()
        old = self.keys
        sealing_keys.add_key(self.context, INSTANCE, grace=3600)
        self.manager.register_agent(
            self.context, sealed=self.sealed('register_agent', AGENT, old),
            **AGENT)
        sealing_keys.add_key(self.context, INSTANCE, grace=0)
        self.assertNotAuthenticated(
            self.manager.register_agent, self.context,
            sealed=self.sealed('register_agent', AGENT, old), **AGENT)

    def test_keys_are_read_again_after_the_cache_time(self):
        clock = [1000.0]
        self.manager.keyrings = sealing_keys.KeyringCache(
            5, timer=lambda: clock[0])
        old = self.keys
        self.manager.register_agent(
            self.context, sealed=self.sealed('register_agent', AGENT, old),
            **AGENT)
        sealing_keys.add_key(self.context, INSTANCE, grace=0)
        # Still the keys read 4 seconds ago.
        clock[0] += 4
        self.manager.register_agent(
            self.context, sealed=self.sealed('register_agent', AGENT, old),
            **AGENT)
        clock[0] += 1
        self.assertNotAuthenticated(
            self.manager.register_agent, self.context,
            sealed=self.sealed('register_agent', AGENT, old), **AGENT)

    def test_a_key_set_later_is_required_after_the_cache_time(self):
        other = dict(AGENT, instance_id=test_manager.OTHER_INSTANCE)
        clock = [1000.0]
        self.manager.keyrings = sealing_keys.KeyringCache(
            5, timer=lambda: clock[0])
        self.manager.register_agent(self.context, **other)
        sealing_keys.add_key(self.context, other['instance_id'])
        clock[0] += 5
        self.assertNotAuthenticated(self.manager.register_agent,
                                    self.context, **other)


class TestSealedReports(SealedTestCase):

    def test_forged_success_and_claim_refused(self):
        upgrade = self.upgrade(self.new_upgrade()['id'])
        args = dict(instance_id=INSTANCE, upgrade_id=upgrade['id'],
                    to_state=states.SUCCESS, detail=None,
                    from_version='1', to_version='2')
        self.assertNotAuthenticated(self.manager.report_upgrade_state,
                                    self.context, **args)
        claim = dict(instance_id=INSTANCE, upgrade_id=upgrade['id'],
                     from_version='1')
        self.assertNotAuthenticated(self.manager.start_upgrade,
                                    self.context, **claim)
        self.assertEqual(len(upgrade['events']),
                         len(self.upgrade(upgrade['id'])['events']))
        self.manager.start_upgrade(
            self.context, sealed=self.sealed('start_upgrade', claim),
            **claim)
        self.assertEqual(states.DOWNLOADING,
                         self.upgrade(upgrade['id'])['status'])

    def test_instance_without_key(self):
        other = test_manager.OTHER_INSTANCE
        values = dict(AGENT, instance_id=other)
        self.manager.register_agent(self.context, **values)
        self.flags(group='conductor', require_sealed=True)
        e = self.assertNotAuthenticated(self.manager.register_agent,
                                        self.context, **values)
        self.assertIn('require_sealed', str(e))


class TestSealedReportBatches(SealedTestCase):

    def setUp(self):
        super().setUp()
        self.upgrade_id = self.new_upgrade()['id']
        self.reports = [{'upgrade_id': self.upgrade_id, 'to_state': state,
                         'detail': None, 'from_version': 'v1.0.0',
                         'to_version': 'v2.0.0'}
                        for state in (states.DEFERRED, states.DOWNLOADING)]
        self.args = {'instance_id': INSTANCE, 'reports': self.reports}

    def test_one_seal_covers_the_batch(self):
        outcomes = self.manager.report_upgrade_states(
            self.context, sealed=self.sealed('report_upgrade_states',
                                             self.args), **self.args)
        self.assertEqual([True, True], [o['recorded'] for o in outcomes])

    def test_a_changed_report_is_refused_and_nothing_recorded(self):
        sealed = self.sealed('report_upgrade_states', self.args)
        changed = [dict(self.reports[0], to_state=states.FAILED),
                   self.reports[1]]
        self.assertNotAuthenticated(
            self.manager.report_upgrade_states, self.context,
            instance_id=INSTANCE, reports=changed, sealed=sealed)
        self.assertNotAuthenticated(
            self.manager.report_upgrade_states, self.context,
            instance_id=INSTANCE, reports=self.reports, sealed=None)
        self.assertEqual(states.SENT, self.upgrade(self.upgrade_id)['status'])


class TestSealedAnswers(SealedTestCase):
    """From 1.3 the answer to a sealed call is sealed and bound to it."""

    def setUp(self):
        super().setUp()
        self.upgrade_id = self.new_upgrade()['id']
        self.claim = dict(instance_id=INSTANCE, upgrade_id=self.upgrade_id,
                          from_version='1')

    def test_a_1_3_claim_is_answered_sealed(self):
        sealed = sealing.seal(self.keys, 'start_upgrade', '1.3',
                              sealing.TO_CONDUCTOR, self.claim)
        answer = self.manager.start_upgrade(self.context, sealed=sealed,
                                            **self.claim)
        self.assertEqual([sealing.SEALED_REPLY], list(answer))
        self.assertTrue(sealing.open_reply(self.keys, 'start_upgrade',
                                           sealed, answer)['proceed'])

    def test_every_call_is_answered_sealed(self):
        report = dict(instance_id=INSTANCE, upgrade_id=self.upgrade_id,
                      to_state=states.DEFERRED, detail=None,
                      from_version='1', to_version='2')
        batch = dict(instance_id=INSTANCE, reports=[{
            'upgrade_id': self.upgrade_id, 'to_state': states.DOWNLOADING,
            'detail': None, 'from_version': '1', 'to_version': '2'}])
        for method, args in (('register_agent', AGENT),
                             ('report_upgrade_state', report),
                             ('report_upgrade_states', batch)):
            sealed = sealing.seal(self.keys, method, '1.3',
                                  sealing.TO_CONDUCTOR, args)
            answer = getattr(self.manager, method)(
                self.context, sealed=sealed, **args)
            self.assertIsNotNone(sealing.open_reply(self.keys, method,
                                                    sealed, answer), method)

    def test_an_older_call_is_answered_as_before(self):
        answer = self.manager.start_upgrade(
            self.context, sealed=self.sealed('start_upgrade', self.claim),
            **self.claim)
        self.assertTrue(answer['proceed'])

    def test_an_unsealed_call_is_answered_as_before(self):
        other = dict(AGENT, instance_id=test_manager.OTHER_INSTANCE)
        self.assertEqual('1.4', self.manager.register_agent(self.context,
                                                            **other))


class TestSealingClients(SealedTestCase):
    """The rpcapi clients seal what they send, over the fake transport."""

    def setUp(self):
        super().setUp()
        self.server = self.useFixture(rpc_fixture.RecordingServer(
            messaging.Target(topic=rpcapi.topic(), server='c'),
            [self.manager]))

    def test_conductor_api_seals(self):
        api = rpcapi.ConductorAPI(self.keys)
        self.assertEqual('1.4', api.register_agent(
            context.get_admin_context(), **AGENT))
        [message] = self.server.wait_for(1)
        self.assertEqual('1.3', message.version)
        self.assertIn('sealed', message.args)

    def test_conductor_api_capped_at_1_2_seals_calls_at_1_1(self):
        # A 1.2 conductor does not seal its answers: none is expected.
        self.flags(group='upgrade_levels', conductor='1.2')
        api = rpcapi.ConductorAPI(self.keys)
        self.assertEqual('1.4', api.register_agent(
            context.get_admin_context(), **AGENT))
        [message] = self.server.wait_for(1)
        self.assertEqual('1.1', message.version)
        self.assertEqual('1.1', message.args['sealed']['version'])

    def test_conductor_api_casts_a_batch_at_1_2(self):
        # A cast has no answer to seal.
        upgrade_id = self.new_upgrade()['id']
        api = rpcapi.ConductorAPI(self.keys)
        api.cast_upgrade_states(
            context.get_admin_context(), INSTANCE,
            [{'upgrade_id': upgrade_id, 'to_state': states.DEFERRED,
              'detail': 'busy', 'from_version': None, 'to_version': None}])
        [message] = self.server.wait_for(1)
        self.assertEqual(('report_upgrade_states', '1.2'),
                         (message.method, message.version))
        self.assertEqual('1.2', message.args['sealed']['version'])

    def test_conductor_api_calls_a_batch_at_1_3(self):
        upgrade_id = self.new_upgrade()['id']
        api = rpcapi.ConductorAPI(self.keys)
        [outcome] = api.report_upgrade_states(
            context.get_admin_context(), INSTANCE,
            [{'upgrade_id': upgrade_id, 'to_state': states.DEFERRED,
              'detail': 'busy', 'from_version': None, 'to_version': None}])
        self.assertTrue(outcome['recorded'])
        [message] = self.server.wait_for(1)
        self.assertEqual(('report_upgrade_states', '1.3'),
                         (message.method, message.version))
        self.assertEqual('1.3', message.args['sealed']['version'])

    def test_conductor_api_capped_sends_unsealed(self):
        self.flags(group='upgrade_levels', conductor='1.0')
        api = rpcapi.ConductorAPI(self.keys)
        e = self.assertRaises(exception.MessageNotAuthenticatedError,
                              api.register_agent,
                              context.get_admin_context(), **AGENT)
        self.assertIn('not sealed', str(e))
        [message] = self.server.wait_for(1)
        self.assertEqual('1.0', message.version)
