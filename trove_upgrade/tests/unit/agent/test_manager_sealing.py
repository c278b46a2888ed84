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

"""The agent endpoint refuses upgrade messages that do not authenticate."""

import time

import fixtures

from trove_upgrade.agent import manager
from trove_upgrade.common import sealing
from trove_upgrade.tests.unit.agent import test_manager

INSTANCE = test_manager.INSTANCE
U1 = test_manager.U1


class TestSealedUpgrade(test_manager.TestAgentManager):
    """Every test of the unsealed manager, and the refusals."""

    def setUp(self):
        super().setUp()
        self.keys = sealing.InstanceKeys(INSTANCE,
                                         [('k1', sealing.generate_key())])
        self.manager = manager.AgentManager(
            self.conf, self.journal, self.pipeline, self.state,
            self.conductor, None, load_strategy=self._load,
            keyring=self.keys)

    def _args(self, upgrade_id=U1, **kw):
        args = dict(upgrade_id=upgrade_id, instance_id=INSTANCE,
                    instance_version='2.0.0', strategy='local',
                    location='/p/guest.pkg', metadata={},
                    allow_downgrade=False)
        args.update(kw)
        return args

    def _upgrade(self, upgrade_id=U1, keys=None, **kw):
        args = self._args(upgrade_id, **kw)
        # 1.1, or 1.3 for a component, which 1.1 does not carry.
        version = '1.3' if 'component' in kw else '1.1'
        if 'component' in kw:
            args.setdefault('expected_manifest', None)
        sealed = sealing.seal(keys or self.keys, 'upgrade', version,
                              sealing.TO_AGENT, args)
        self.manager.upgrade(None, sealed=sealed, **args)

    def assertNothingRecorded(self, upgrade_id=U1):
        self.assertFalse(self.journal.is_known(upgrade_id))
        data = self.journal.read()
        self.assertEqual([], data['outbox'])
        self.assertEqual([], data['queue'])

    def test_unsealed_refused(self):
        self.manager.upgrade(None, **self._args())
        self.assertNothingRecorded()

    def test_a_huge_instance_id_is_logged_bounded(self):
        log = self.useFixture(fixtures.FakeLogger(
            name='trove_upgrade.agent.manager'))
        self.manager.upgrade(None, **self._args(instance_id='i' * 100000))
        self.assertIn('Refused upgrade message (upgrade id %s' % U1,
                      log.output)
        self.assertLess(len(log.output), 1000)
        self.assertNothingRecorded()

    def test_wrong_key_refused(self):
        self._upgrade(keys=sealing.InstanceKeys(
            INSTANCE, [('k1', sealing.generate_key())]))
        self.assertNothingRecorded()

    def test_modified_message_refused(self):
        sealed = sealing.seal(self.keys, 'upgrade', '1.1', sealing.TO_AGENT,
                              self._args())
        self.manager.upgrade(None, sealed=sealed, **self._args(
            instance_version='0.1.0', allow_downgrade=True))
        self.assertNothingRecorded()

    def test_replay_refused_and_remembered_across_restarts(self):
        args = self._args()
        sealed = sealing.seal(self.keys, 'upgrade', '1.1', sealing.TO_AGENT,
                              args)
        self.manager.upgrade(None, sealed=sealed, **args)
        self.assertEqual(1, len(self.journal.read()['queue']))
        self.assertIn(sealed['message_id'],
                      self.journal.read()['seen_messages'])
        restarted = manager.AgentManager(
            self.conf, self.journal, self.pipeline, self.state,
            self.conductor, None, load_strategy=self._load,
            keyring=self.keys)
        with self.journal.update() as data:
            data['queue'] = []
        restarted.upgrade(None, sealed=sealed, **args)
        self.assertEqual([], self.journal.read()['queue'])

    def test_stale_refused(self):
        self.flags(group='agent', seal_max_age=10)
        args = self._args()
        sealed = sealing.seal(self.keys, 'upgrade', '1.1', sealing.TO_AGENT,
                              args, now=time.time() - 11)
        self.manager.upgrade(None, sealed=sealed, **args)
        self.assertNothingRecorded()

    def test_expired_ids_are_pruned(self):
        cache = manager.JournalReplayCache(self.journal)
        cache.add('old', 5.0, 1.0)
        cache.add('new', 50.0, 10.0)
        self.assertEqual({'new': 50.0},
                         self.journal.read()['seen_messages'])

    # An upgrade of 1.2 names the manifest it expects; one of 1.1 cannot.

    EXPECTED = {'sha256': 'ab' * 32, 'package': 'trove-guestagent'}

    def _sealed_at(self, version, sealed_args, sent_args):
        sealed = sealing.seal(self.keys, 'upgrade', version,
                              sealing.TO_AGENT, sealed_args)
        self.manager.upgrade(None, sealed=sealed, **sent_args)

    def test_a_1_2_upgrade_keeps_its_expectation_for_the_download(self):
        args = self._args(expected_manifest=self.EXPECTED)
        self._sealed_at('1.2', args, args)
        [queued] = self.journal.read()['queue']
        self.assertEqual(self.EXPECTED, queued['expected_manifest'])

    def test_an_expectation_beside_a_1_1_seal_is_refused(self):
        # Sealed without it at 1.1, it was added by someone without the
        # key: taking it would let them choose what the agent checks.
        self._sealed_at('1.1', self._args(),
                        self._args(expected_manifest=self.EXPECTED))
        self.assertNothingRecorded()

    def test_a_1_2_seal_without_the_expectation_it_carried_is_refused(self):
        # Removing the binding from a sealed message does not verify.
        self._sealed_at('1.2', self._args(expected_manifest=self.EXPECTED),
                        self._args())
        self.assertNothingRecorded()

    def test_a_malformed_expectation_fails_the_upgrade(self):
        for upgrade_id, expected in (
                (U1, {'sha256': 'AB' * 32, 'package': None}),
                (test_manager.upgrade_id(2), {'sha256': None}),
                (test_manager.upgrade_id(3), ['ab' * 32]),
                (test_manager.upgrade_id(4),
                 {'sha256': None, 'package': 'a b'})):
            args = self._args(upgrade_id, expected_manifest=expected)
            self._sealed_at('1.2', args, args)
            data = self.journal.read()
            self.assertEqual('FAILED', data['processed'][upgrade_id])
            self.assertIn('expected_manifest',
                          data['outbox'][-1]['detail'])
        self.assertEqual([], self.journal.read()['queue'])
