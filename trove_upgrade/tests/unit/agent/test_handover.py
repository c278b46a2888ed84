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

"""The hand-over watcher and the start-up check, on a real journal.

The restarts are recorded, not made: the functional tests
(``functional/agent/test_self_upgrade.py``) make them with real agents.
"""

import os
import time
from unittest import mock

import fixtures

from trove_upgrade.agent import handover
from trove_upgrade.agent import journal as journal_mod
from trove_upgrade.agent import self_upgrade
from trove_upgrade.common import states
from trove_upgrade.tests import base

UPGRADE = '00000000-0000-4000-8000-000000000001'


class FakeInstalls:
    root = '/nonexistent'

    def __init__(self):
        self.switched = []

    def switch(self, version):
        self.switched.append(version)


class FakeRestarter:
    def __init__(self, journal, on_restart=None):
        self.journal = journal
        self.calls = []
        self.pid = 1234
        self.on_restart = on_restart

    def agent_pid(self):
        return self.pid

    def start_trial(self, version, previous):
        self.calls.append(('trial', version, previous))
        if self.on_restart:
            self.on_restart()

    def restart(self, version=None):
        self.calls.append(('restart', version))
        if self.on_restart:
            self.on_restart()


class HandoverTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        root = self.useFixture(fixtures.TempDir()).path
        self.flags(group='self_upgrade', install_root=os.path.join(root, 's'),
                   enabled=True, handover_timeout=30, watch_interval=0.05)
        self.journal = journal_mod.UpgradeJournal(os.path.join(root, 'r'))

    def record(self, step, deadline=None, **more):
        entry = {'id': UPGRADE, 'component': 'upgrade-agent', 'step': step,
                 'from_version': '1.0', 'to_version': '2.0',
                 'deadline': deadline or time.time() + 30,
                 'restarted': False, 'attempts': 1, 'detail': ''}
        entry.update(more)
        with self.journal.update() as data:
            data['current_upgrade'] = entry


class TestWatcher(HandoverTestCase):

    def watcher(self, on_restart=None):
        self.installs = FakeInstalls()
        self.restarter = FakeRestarter(self.journal, on_restart)
        return handover.Watcher(self.conf, self.journal, self.installs,
                                self.restarter)

    def confirm(self):
        with self.journal.update() as data:
            data['current_upgrade'] = None

    def test_a_trial_start_once_then_the_confirmation_ends_it(self):
        self.record(handover.HANDOVER)
        watcher = self.watcher(on_restart=self.confirm)
        self.assertEqual(0, watcher.run())
        self.assertEqual([('trial', '2.0', '1.0')], self.restarter.calls)

    def test_a_restarted_hand_over_is_not_restarted_again(self):
        # A watcher started again after the first one was killed.
        self.record(handover.HANDOVER, restarted=True,
                    deadline=time.time() + 0.3)
        watcher = self.watcher(on_restart=self.confirm)
        self.assertEqual(0, watcher.run())
        # Past the deadline: the rollback's restart, nothing else.
        self.assertEqual([('restart', None)], self.restarter.calls)
        self.assertEqual(['1.0'], self.installs.switched)

    def test_past_the_deadline_it_rolls_back_with_the_reason(self):
        self.record(handover.HANDOVER, deadline=time.time() - 1)
        watcher = self.watcher(on_restart=lambda: None)
        self.restarter.pid = None
        self.flags(group='self_upgrade', handover_timeout=5)
        with mock.patch.object(time, 'monotonic',
                               side_effect=[0, 0, 100, 100]):
            self.assertEqual(1, watcher.run())
        current = self.journal.read()['current_upgrade']
        self.assertEqual(handover.ROLLING_BACK, current['step'])
        self.assertTrue(current['restarted'])
        self.assertIn('upgrade agent 2.0 is not running', current['detail'])
        self.assertEqual(['1.0'], self.installs.switched)

    def test_a_finished_hand_over_needs_nothing(self):
        with self.journal.update() as data:
            data['current_upgrade'] = None
        watcher = self.watcher()
        self.assertEqual(0, watcher.run())
        self.assertEqual([], self.restarter.calls)


class TestWatcherProcess(HandoverTestCase):

    def test_the_watcher_runs_outside_a_systemd_unit(self):
        self.flags(group='self_upgrade', service_manager='systemd')
        argv = handover.watcher_argv(self.conf)
        self.assertEqual(['systemd-run', '--quiet', '--collect', '--'],
                         argv[:4])
        self.assertIn('trove_upgrade.agent.handover', argv)

    def test_one_lock_tells_whether_a_watcher_runs(self):
        self.assertFalse(handover.watcher_running(self.conf))
        fd = handover._try_lock(handover._lock_path(self.conf))
        self.addCleanup(os.close, fd)
        self.assertTrue(handover.watcher_running(self.conf))
        # Held: a second watcher is not started.
        self.assertFalse(handover.ensure_watcher(self.conf))


class TestStartUpCheck(HandoverTestCase):
    """What whichever agent starts does with an unfinished hand-over."""

    def setUp(self):
        super().setUp()
        self.pipeline = self_upgrade.SelfUpgradePipeline(
            self.conf, self.journal, None, steps=mock.Mock(),
            is_registered=lambda: True)
        self.pipeline.installs = mock.MagicMock(root='/nonexistent')
        self.pipeline.installs.path.return_value = '/nonexistent/v'
        self.ensure = self.useFixture(fixtures.MockPatchObject(
            handover, 'ensure_watcher')).mock
        self.running = self.useFixture(fixtures.MockPatchObject(
            handover, 'watcher_running', return_value=False)).mock

    def mine(self, version):
        self.useFixture(fixtures.MockPatchObject(
            self_upgrade, 'own_version', return_value=version))

    def last_report(self):
        return self.journal.read()['outbox'][-1]

    def test_the_new_agent_confirms_and_keeps_the_link(self):
        self.mine('2.0')
        self.record(handover.HANDOVER, restarted=True)
        self.assertFalse(self.pipeline.recover())
        self.pipeline.installs.switch.assert_called_once_with('2.0')
        self.assertEqual(states.SUCCESS, self.last_report()['to_state'])
        self.assertEqual(states.SUCCESS,
                         self.journal.read()['processed'][UPGRADE])

    def test_the_new_agent_does_not_confirm_before_it_registered(self):
        self.mine('2.0')
        self.pipeline.is_registered = lambda: False
        self.record(handover.HANDOVER, restarted=True)
        self.assertTrue(self.pipeline.recover())
        self.ensure.assert_called_once_with(self.conf)
        self.assertIsNotNone(self.journal.read()['current_upgrade'])

    def test_the_new_agent_does_not_confirm_past_the_deadline(self):
        self.mine('2.0')
        self.record(handover.HANDOVER, deadline=time.time() - 1)
        self.assertTrue(self.pipeline.recover())
        self.pipeline.installs.switch.assert_not_called()

    def test_the_old_agent_after_the_trial_rolls_back(self):
        self.mine('1.0')
        self.record(handover.HANDOVER, restarted=True)
        self.assertFalse(self.pipeline.recover())
        self.pipeline.installs.switch.assert_called_once_with('1.0')
        report = self.last_report()
        self.assertEqual(states.FAILED, report['to_state'])
        self.assertIn('upgrade agent 2.0 stopped before it confirmed',
                      report['detail'])
        self.assertIn('rolled back to 1.0, which is running',
                      report['detail'])

    def test_the_old_agent_before_the_trial_starts_a_watcher(self):
        self.mine('1.0')
        self.record(handover.HANDOVER)
        self.assertTrue(self.pipeline.recover())
        self.ensure.assert_called_once_with(self.conf)

    def test_the_old_agent_finishes_a_rollback(self):
        self.mine('1.0')
        self.record(handover.ROLLING_BACK, detail='it hung')
        self.assertFalse(self.pipeline.recover())
        self.assertIn('it hung; rolled back to 1.0',
                      self.last_report()['detail'])

    def test_the_new_agent_leaves_a_rollback_to_the_watcher(self):
        self.mine('2.0')
        self.record(handover.ROLLING_BACK, detail='it hung')
        self.assertTrue(self.pipeline.recover())
        self.ensure.assert_called_once_with(self.conf)
        self.pipeline.installs.switch.assert_not_called()
