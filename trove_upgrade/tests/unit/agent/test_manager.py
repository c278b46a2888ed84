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

"""Message handling: validation, idempotency, deferral and the claim."""

import os

import fixtures

from trove_upgrade.agent import journal as journal_mod
from trove_upgrade.agent import manager
from trove_upgrade.agent import self_upgrade
from trove_upgrade.agent.strategies import exception as strategy_exc
from trove_upgrade.common import states
from trove_upgrade.tests import base

INSTANCE = '2b7f9a4e-8c1d-4e3f-9a0b-1c2d3e4f5a6b'


def upgrade_id(number):
    """The UUID of upgrade ``number``; agents refuse any other id."""
    return '00000000-0000-4000-8000-%012d' % number


U1 = upgrade_id(1)


class FakeInstalls:
    def current_version(self):
        return '1.0.0'


class FakePipeline:
    """Records the upgrades it is asked to run and finishes them."""

    def __init__(self, journal):
        self.journal = journal
        self.installs = FakeInstalls()
        self.ran = []

    def run(self, entry):
        self.ran.append(entry)
        with self.journal.update() as data:
            data['current_upgrade'] = None
            data['processed'][entry['id']] = states.SUCCESS


class FakeConductor:
    def __init__(self):
        self.answer = {'proceed': True, 'status': 'DOWNLOADING',
                       'reason': None}
        self.claims = []

    def start_upgrade(self, context, instance_id, upgrade_id, from_version):
        self.claims.append(upgrade_id)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


class FakeState:
    state = 'running'

    def get_state(self):
        return self.state


class FakeStrategy:
    def __init__(self):
        self.checked = []

    def check_location(self, location):
        self.checked.append(location)


class TestAgentManager(base.TestCase):

    def setUp(self):
        super().setUp()
        root = self.useFixture(fixtures.TempDir()).path
        self.flags(group='agent', instance_id=INSTANCE,
                   guest_automatic_updates=True)
        self.journal = journal_mod.UpgradeJournal(os.path.join(root, 'r'))
        self.pipeline = FakePipeline(self.journal)
        self.conductor = FakeConductor()
        self.state = FakeState()
        self.strategy = FakeStrategy()
        self.manager = manager.AgentManager(
            self.conf, self.journal, self.pipeline, self.state,
            self.conductor, None, load_strategy=self._load)

    def _load(self, name):
        if name != 'local':
            raise strategy_exc.StrategyNotAllowedError(
                name=name, allowed='local')
        return self.strategy

    def _upgrade(self, upgrade_id=U1, **kw):
        args = dict(upgrade_id=upgrade_id, instance_id=INSTANCE,
                    instance_version='2.0.0', strategy='local',
                    location='/p/guest.pkg', metadata={},
                    allow_downgrade=False)
        args.update(kw)
        self.manager.upgrade(None, **args)

    def _last_report(self):
        return self.journal.read()['outbox'][-1]

    def test_valid_upgrade_is_queued_then_claimed_and_run(self):
        self._upgrade()
        self.assertEqual([U1], [u['id'] for u in
                                self.journal.read()['queue']])
        self.assertTrue(self.manager.work_available.is_set())
        self.assertTrue(self.manager.run_next())
        self.assertEqual([U1], self.conductor.claims)
        entry = self.pipeline.ran[0]
        self.assertEqual('1.0.0', entry['from_version'])
        self.assertEqual('2.0.0', entry['to_version'])
        self.assertEqual([], self.journal.read()['queue'])

    def test_duplicate_delivery_runs_once(self):
        self._upgrade()
        self._upgrade()
        self.assertEqual(1, len(self.journal.read()['queue']))
        self.manager.run_next()
        self._upgrade()
        self.assertFalse(self.manager.run_next())
        self.assertEqual(1, len(self.pipeline.ran))

    def _assert_refused(self, reason, **kw):
        self._upgrade(**kw)
        data = self.journal.read()
        self.assertEqual([], data['queue'])
        self.assertEqual(states.FAILED, data['processed'][U1])
        report = self._last_report()
        self.assertEqual(states.FAILED, report['to_state'])
        self.assertIn(reason, report['detail'])

    def test_disabled_automatic_updates_fail_with_the_reason(self):
        self.flags(group='agent', guest_automatic_updates=False)
        self._assert_refused('guest_automatic_updates is disabled')

    def test_other_instance_is_refused(self):
        other = '00000000-0000-0000-0000-000000000000'
        self._assert_refused('this agent serves', instance_id=other)

    def test_bad_version_is_refused(self):
        self._assert_refused('invalid version', instance_version='../x')

    def test_strategy_not_allowed_is_refused(self):
        self._assert_refused('not allowed', strategy='swift')

    def test_unknown_component_is_refused(self):
        self._assert_refused("component 'trove' is none of",
                             component='trove')

    def test_self_upgrade_needs_it_enabled(self):
        self._assert_refused('[self_upgrade] enabled is false',
                             component='upgrade-agent')

    def test_self_upgrade_starts_from_the_agent_s_own_version(self):
        self.flags(group='self_upgrade', enabled=True)
        self._upgrade(component='upgrade-agent')
        self.assertTrue(self.manager.run_next())
        entry = self.pipeline.ran[0]
        self.assertEqual('upgrade-agent', entry['component'])
        self.assertEqual(self_upgrade.own_version(), entry['from_version'])

    def test_guest_agent_is_the_default_component(self):
        self._upgrade()
        self.manager.run_next()
        self.assertEqual('guest-agent', self.pipeline.ran[0]['component'])

    def test_location_is_not_checked_under_the_accept_lock(self):
        # Its server may hang: the download step asks it, not the RPC call.
        self._upgrade()
        self.assertEqual([], self.strategy.checked)
        self.assertEqual([U1], [u['id'] for u in
                                self.journal.read()['queue']])

    def test_busy_guest_defers_once_and_runs_when_running(self):
        self.state.state = 'backup'
        self._upgrade()
        self.assertFalse(self.manager.run_next())
        self.assertFalse(self.manager.run_next())
        reports = self.journal.read()['outbox']
        self.assertEqual([states.DEFERRED], [r['to_state'] for r in reports])
        self.assertIn('the guest is backup', reports[0]['detail'])
        self.assertEqual([], self.conductor.claims)
        self.state.state = 'running'
        self.assertTrue(self.manager.run_next())
        self.assertEqual([U1], [e['id'] for e in self.pipeline.ran])

    def test_unknown_guest_state_is_not_upgradeable(self):
        self.state.state = 'unknown'
        self._upgrade()
        self.assertFalse(self.manager.run_next())
        self.assertEqual([], self.pipeline.ran)

    def test_cancelled_upgrade_is_skipped(self):
        self.conductor.answer = {'proceed': False, 'status': 'CANCELLED',
                                 'reason': 'Upgrade %s is CANCELLED.' % U1}
        self._upgrade()
        self.assertFalse(self.manager.run_next())
        data = self.journal.read()
        self.assertEqual([], data['queue'])
        self.assertEqual(states.CANCELLED, data['processed'][U1])
        self.assertEqual([], self.pipeline.ran)

    def test_unreachable_conductor_keeps_the_upgrade_queued(self):
        self.conductor.answer = RuntimeError('MessagingTimeout')
        self._upgrade()
        self.assertFalse(self.manager.run_next())
        self.assertEqual([U1], [u['id'] for u in
                                self.journal.read()['queue']])
        self.conductor.answer = {'proceed': True, 'status': 'DOWNLOADING',
                                 'reason': None}
        self.assertTrue(self.manager.run_next())
