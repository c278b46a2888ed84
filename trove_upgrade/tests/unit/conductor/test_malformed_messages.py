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

"""Agent messages of the wrong types: refused or ignored, never a crash.

Each of these once reached the database driver, or the seal's arithmetic,
and escaped the endpoint as an unexpected exception.
"""

import fixtures

from trove_upgrade.common import exception
from trove_upgrade.common import sealing
from trove_upgrade.common import states
from trove_upgrade.db import agents as db_agents
from trove_upgrade.services import upgrades
from trove_upgrade.tests.unit.conductor import test_manager
from trove_upgrade.tests.unit.conductor import test_manager_sealing

INSTANCE = test_manager.INSTANCE
AGENT = dict(test_manager.AGENT, instance_id=INSTANCE)

# Upgrade ids no upgrade can have, that the database drivers fail on.
MALFORMED_IDS = ([], ['x'], {}, {'a': 1}, 2 ** 70, '\ud800')


class TestMalformedIds(test_manager.ManagerTestCase):

    def test_claim_of_a_malformed_id_is_refused(self):
        upgrade = self.new_upgrade()
        for upgrade_id in MALFORMED_IDS:
            claim = self.manager.start_upgrade(self.context, INSTANCE,
                                               upgrade_id, '1.0')
            self.assertFalse(claim['proceed'], upgrade_id)
            self.assertIn('Upgrade ids are UUIDs', claim['reason'])
        self.assertEqual(states.SENT, self.upgrade(upgrade['id'])['status'])

    def test_report_of_a_malformed_id_is_rejected(self):
        upgrade = self.new_upgrade()
        for upgrade_id in MALFORMED_IDS:
            self.assertEqual(upgrades.REJECTED,
                             self.report(upgrade_id, states.FAILED)['reason'])
            answer, = self.manager.report_upgrade_states(
                self.context, INSTANCE, [{
                    'upgrade_id': upgrade_id if isinstance(upgrade_id, str)
                    else 'nope', 'to_state': states.FAILED, 'detail': None,
                    'from_version': None, 'to_version': None}])
            self.assertEqual(upgrades.REJECTED, answer['reason'])
        self.assertEqual(states.SENT, self.upgrade(upgrade['id'])['status'])

    def test_report_of_a_state_not_a_string_is_rejected(self):
        upgrade = self.new_upgrade()
        for to_state in ([], ['SUCCESS'], {}, {'SUCCESS': 1}):
            self.assertEqual(upgrades.REJECTED,
                             self.report(upgrade['id'], to_state)['reason'])
        self.assertEqual(states.SENT, self.upgrade(upgrade['id'])['status'])

    def assertRefusedBeforeTheDatabase(self, version, value, heartbeat,
                                       what):
        """A claim from ``version``, and every agent field, refused.

        ``value`` is sent in each field of a registration, ``heartbeat``
        in the same field of a heartbeat, which is ignored; each refusal
        says the field holds ``what``. Returns the upgrade claimed.
        """
        upgrade = self.new_upgrade()
        e = self.assertRefused(self.manager.start_upgrade, self.context,
                               INSTANCE, upgrade['id'], version)
        self.assertIn('from_version holds %s' % what, str(e))
        self.assertEqual(states.SENT, self.upgrade(upgrade['id'])['status'])
        for field in ('agent_version', 'guest_version', 'state', 'host'):
            e = self.assertRefused(self.manager.register_agent, self.context,
                                   **dict(AGENT, **{field: value}))
            self.assertIn('%s holds %s' % (field, what), str(e))
            self.manager.heartbeat(self.context,
                                   **dict(AGENT, **{field: heartbeat}))
        self.assertRaises(exception.AgentNotFoundError, db_agents.get_agent,
                          self.context, INSTANCE)
        return upgrade

    def test_lone_surrogates_are_refused_before_the_database(self):
        upgrade = self.assertRefusedBeforeTheDatabase(
            '\udfff', '\ud800', '\ud800', 'a lone UTF-16 surrogate')
        self.assertEqual(upgrades.REJECTED, self.report(
            upgrade['id'], states.DOWNLOADING, detail='x\ud800')['reason'])
        self.assertEqual(states.SENT, self.upgrade(upgrade['id'])['status'])

    def test_a_nul_is_refused_before_the_database(self):
        # PostgreSQL fails any statement with one: a DBError and traceback.
        self.assertRefusedBeforeTheDatabase('v1\x00', 'a\x00', '\x00',
                                            'a NUL character')

    def test_a_nul_in_a_detail_is_replaced_not_refused(self):
        # An agent's output may hold one; the state change it explains
        # is recorded all the same.
        upgrade = self.new_upgrade()
        self.assertTrue(self.manager.start_upgrade(
            self.context, INSTANCE, upgrade['id'], 'v1.0.0')['proceed'])
        self.assertTrue(self.report(upgrade['id'], states.FAILED,
                                    detail='tar: \x00 in name')['recorded'])
        recorded = self.upgrade(upgrade['id'])
        self.assertEqual(states.FAILED, recorded['status'])
        self.assertEqual('tar: \ufffd in name', recorded['status_detail'])

    def test_labels_no_json_parser_reads_back_are_refused(self):
        deep = []
        for _ in range(100000):
            deep = [deep]
        # The nesting was once a RecursionError out of the endpoint.
        for value in (float('nan'), float('inf'), deep):
            self.assertRefused(self.manager.register_agent, self.context,
                               **dict(AGENT, labels={'zone': value}))
        self.assertRaises(exception.AgentNotFoundError, db_agents.get_agent,
                          self.context, INSTANCE)

    def test_a_huge_instance_id_is_logged_bounded(self):
        logger = self.useFixture(fixtures.FakeLogger(
            name='trove_upgrade.conductor.manager'))
        self.manager.heartbeat(self.context,
                               **dict(AGENT, instance_id='x' * 100000))
        self.assertIn('Ignored heartbeat', logger.output)
        self.assertLess(len(logger.output), 1000)


class TestMalformedSeals(test_manager_sealing.SealedTestCase):

    def test_timestamps_that_are_not_finite_times(self):
        good = self.sealed('register_agent', AGENT)
        for timestamp in (10 ** 400, -10 ** 400, float('nan'),
                          float('inf')):
            e = self.assertNotAuthenticated(
                self.manager.register_agent, self.context,
                sealed=dict(good, timestamp=timestamp), **AGENT)
            self.assertIn('the seal timestamp must be a finite time', str(e))
            self.manager.heartbeat(self.context,
                                   sealed=dict(good, timestamp=timestamp),
                                   **AGENT)
        self.assertRaises(exception.AgentNotFoundError, db_agents.get_agent,
                          self.context, INSTANCE)

    def test_arguments_no_seal_can_cover(self):
        good = self.sealed('register_agent', AGENT)
        for labels in ({'a': float('nan')}, {'a': float('-inf')},
                       {'a': '\ud800'}):
            e = self.assertNotAuthenticated(
                self.manager.register_agent, self.context, sealed=good,
                **dict(AGENT, labels=labels))
            self.assertIn('arguments cannot have been sealed', str(e))
        self.assertRaises(exception.AgentNotFoundError, db_agents.get_agent,
                          self.context, INSTANCE)

    def test_a_huge_key_id_is_quoted_bounded(self):
        sealed = dict(self.sealed('register_agent', AGENT),
                      key_id='k' * 100000)
        e = self.assertNotAuthenticated(self.manager.register_agent,
                                        self.context, sealed=sealed, **AGENT)
        self.assertIn('no key', str(e))
        self.assertLess(len(str(e)), 1000)

    def test_the_seal_module_refuses_them_with_seal_errors(self):
        # The agent opens its messages with the same function.
        good = self.sealed('register_agent', AGENT)
        self.assertRaises(
            sealing.MalformedSealError, sealing.open_sealed, self.keys,
            dict(good, timestamp=10 ** 400), 'register_agent',
            sealing.TO_CONDUCTOR, AGENT, 300, sealing.MemoryReplayCache())
