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

"""Upgrade casts of the wrong types: dropped or FAILED, the runner free.

An integer upgrade id was once queued, and every later journal write of
the runner failed on it, so that no upgrade after it ever ran.
"""

import os

import fixtures

from trove_upgrade.agent import journal as journal_mod
from trove_upgrade.agent import manager
from trove_upgrade.common import states
from trove_upgrade.tests import base
from trove_upgrade.tests.unit.agent import test_manager

U1 = test_manager.U1


def _other(number):
    """An upgrade id that is not U1."""
    return test_manager.upgrade_id(100 + number)


class TestMalformedUpgrades(base.TestCase):

    _load = test_manager.TestAgentManager._load
    _upgrade = test_manager.TestAgentManager._upgrade

    def setUp(self):
        super().setUp()
        root = self.useFixture(fixtures.TempDir()).path
        self.flags(group='agent', instance_id=test_manager.INSTANCE,
                   guest_automatic_updates=True)
        self.journal = journal_mod.UpgradeJournal(os.path.join(root, 'r'))
        self.pipeline = test_manager.FakePipeline(self.journal)
        self.strategy = test_manager.FakeStrategy()
        self.manager = manager.AgentManager(
            self.conf, self.journal, self.pipeline, test_manager.FakeState(),
            test_manager.FakeConductor(), None, load_strategy=self._load)

    def _run_queue(self):
        while self.manager.run_next():
            pass

    def test_upgrade_ids_that_are_not_ids_are_dropped(self):
        for upgrade_id in (5, 2 ** 70, 1.5, True, None, [], {'a': 1}, '',
                           'x' * 256, '\ud800', 'u1\nERROR forged', '/etc',
                           'u\x00', '\x1b[31m'):
            self._upgrade(upgrade_id=upgrade_id)
        data = self.journal.read()
        self.assertEqual(([], {}, []), (data['queue'], data['processed'],
                                        data['outbox']))
        # The runner still serves the next genuine upgrade.
        self._upgrade(upgrade_id=U1)
        self._run_queue()
        self.assertEqual([U1], [e['id'] for e in self.pipeline.ran])

    def test_allow_downgrade_must_be_a_boolean(self):
        for i, value in enumerate(('false', 'no', 1, [], {'a': 1})):
            self._upgrade(upgrade_id=_other(i), allow_downgrade=value)
            report = self.journal.read()['outbox'][-1]
            self.assertEqual(states.FAILED, report['to_state'])
            self.assertIn('allow_downgrade must be a boolean',
                          report['detail'])
        self._run_queue()
        self.assertEqual([], self.pipeline.ran)

    def test_metadata_must_be_an_object(self):
        for i, value in enumerate((5, 'x', ['a'], True)):
            self._upgrade(upgrade_id=_other(i), metadata=value)
            report = self.journal.read()['outbox'][-1]
            self.assertEqual(states.FAILED, report['to_state'])
            self.assertIn('the metadata must be an object', report['detail'])
        self._upgrade(upgrade_id=U1, metadata=None)
        self._run_queue()
        self.assertEqual([(U1, {})], [(e['id'], e['metadata'])
                                      for e in self.pipeline.ran])

    def test_metadata_the_api_would_not_send_is_refused(self):
        # Metadata nested 800 deep was once queued: the journal was
        # written, but could not be parsed back, and the agent could
        # neither serve another message nor start again.
        deep = []
        for _ in range(800):
            deep = [deep]
        for i, value in enumerate((
                {'a': deep}, {'a': {'b': 1}}, {'a': [1]}, {'': 1},
                {'k' * 256: 1}, {'a': 'v' * 1025}, {'a': '\ud800'},
                {'\ud800': 1}, {str(n): n for n in range(65)})):
            self._upgrade(upgrade_id=_other(i), metadata=value)
            report = self.journal.read()['outbox'][-1]
            self.assertEqual((_other(i), states.FAILED),
                             (report['upgrade_id'], report['to_state']))
            self.assertIn('the metadata', report['detail'])
        self.assertEqual([], self.journal.read()['queue'])
        flat = {'s': 'v' * 1024, 'n': 1.5, 'i': 2, 'b': True, 'z': None,
                'e': ''}
        self._upgrade(upgrade_id=U1, metadata=flat)
        self._run_queue()
        self.assertEqual([(U1, flat)], [(e['id'], e['metadata'])
                                        for e in self.pipeline.ran])

    def test_a_refused_version_is_not_reported_as_the_target(self):
        # The conductor refuses a report whose to_version is not a
        # string, and the outbox kept it, and every report after it.
        for i, value in enumerate((5, ['2.0'], {'a': 1}, 'x' * 100000,
                                   '../2.0')):
            self._upgrade(upgrade_id=_other(i), instance_version=value)
            report = self.journal.read()['outbox'][-1]
            self.assertEqual(states.FAILED, report['to_state'])
            self.assertIsNone(report['to_version'])
            self.assertLessEqual(len(report['detail']), 1024)

    def test_a_strategy_that_is_not_a_name_is_quoted_bounded(self):
        self._upgrade(strategy='s' * 100000)
        report = self.journal.read()['outbox'][-1]
        self.assertEqual(states.FAILED, report['to_state'])
        self.assertIn('strategy ', report['detail'])
        self.assertLessEqual(len(report['detail']), 1024)
