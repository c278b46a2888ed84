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

"""The pipeline in one process: real packages, venvs and guest processes.

Only the download is replaced, by a strategy copying local files; the
functional tests use the real strategies, RabbitMQ and the conductor.
"""

import datetime
import os
import shutil
from unittest import mock

import fixtures

from tools.testbed import sample_guest
from trove_upgrade.agent import install
from trove_upgrade.agent import journal as journal_mod
from trove_upgrade.agent import pipeline
from trove_upgrade.agent.strategies import exception as strategy_exc
from trove_upgrade.agent import supervisor
from trove_upgrade.agent import untrusted
from trove_upgrade.agent import verifier
from trove_upgrade.common import states
from trove_upgrade.package_format import build
from trove_upgrade.package_format import keys
from trove_upgrade.package_format import manifest as manifest_mod
from trove_upgrade.tests import base
from trove_upgrade.tests.unit.agent import test_manager

STATE_DIR = '../../guest-run'
U1 = test_manager.U1


class CopyStrategy:
    """Copies local files; counts fetches; can be told to fail."""

    def __init__(self):
        self.fetched = []
        self.fail = None
        self.missing = None

    def check_location(self, location):
        if self.missing:
            raise strategy_exc.ObjectNotFoundError(
                location=location, strategy='copy', reason=self.missing)

    def fetch(self, location, dest_path, max_bytes):
        # A missing location has no manifest either, as in a real store.
        self.check_location(location)
        if self.fail:
            raise strategy_exc.LocationUnreachableError(
                location=location, strategy='copy', reason=self.fail)
        self.fetched.append(location)
        shutil.copyfile(location, dest_path)
        return os.path.getsize(dest_path)


class TestUpgradePipeline(base.TestCase):

    def setUp(self):
        super().setUp()
        tmp = self.useFixture(fixtures.TempDir()).path
        self.tmp = tmp
        self.root = os.path.join(tmp, 'root')
        self.repo = os.path.join(tmp, 'repo')
        os.makedirs(self.repo)
        signing = keys.generate_signing_key()
        self.sign_path = os.path.join(tmp, 'sign.key')
        keys.write_signing_key(self.sign_path, signing)
        self.signing = signing
        self.enc_key = keys.generate_encryption_key()
        self.enc_path = keys.write_encryption_key(
            os.path.join(tmp, 'enc.key'), self.enc_key)
        self.flags(group='agent', install_root=self.root,
                   guest_command=sample_guest.guest_command(STATE_DIR),
                   health_grace=0.2, health_timeout=3, restart_retries=2,
                   keep_versions=2, max_resume_attempts=2)
        self.journal = journal_mod.UpgradeJournal(self.root)
        self.installs = install.InstallRoot(self.root, self.journal.lock)
        self.sup = supervisor.GuestSupervisor(
            self.installs, self.conf.agent.guest_command, stop_timeout=5)
        self.addCleanup(self.sup.stop)
        self.strategy = CopyStrategy()
        self.pipeline = pipeline.UpgradePipeline(
            self.conf, self.journal, self.installs, self.sup,
            verifier.PackageVerifier([self.sign_path + '.pub'], 1,
                                     [self.enc_path]),
            load_strategy=lambda name: self.strategy)
        wheel = sample_guest.build_wheel(os.path.join(tmp, 'w1'), '1.0.0')
        self.installs.install('1.0.0', [wheel])
        self.installs.switch('1.0.0')
        self.assertTrue(self.pipeline.ensure_guest_running())

    def _package(self, version, behaviour='ok'):
        wheel = sample_guest.build_wheel(
            os.path.join(self.tmp, 'w-%s-%s' % (version, behaviour)),
            version, behaviour)
        path = os.path.join(self.repo, '%s-%s.pkg' % (version, behaviour))
        build.build_package(
            [wheel], path, version=version, signing_keys=[self.signing],
            encryption_key=self.enc_key,
            expires=datetime.datetime.now(datetime.timezone.utc)
            + datetime.timedelta(days=1),
            health_check=manifest_mod.HealthCheck(
                tuple(sample_guest.health_command(STATE_DIR).split()), 10))
        return path

    def _entry(self, location, version, upgrade_id=U1):
        entry = {'id': upgrade_id, 'instance_version': version,
                 'to_version': version, 'strategy': 'copy',
                 'location': location, 'allow_downgrade': False,
                 'step': pipeline.ACCEPTED, 'attempts': 1, 'detail': '',
                 'from_version': self.installs.current_version()}
        with self.journal.update() as data:
            data['current_upgrade'] = entry
        return entry

    def _reports(self):
        return [(r['to_state'], r['detail'])
                for r in self.journal.read()['outbox']]

    def test_success_reports_every_stage(self):
        result = self.pipeline.run(self._entry(self._package('2.0.0'),
                                               '2.0.0'))
        self.assertEqual(states.SUCCESS, result)
        # DOWNLOADING is the claim's, not a report.
        self.assertEqual([states.VERIFYING,
                          states.INSTALLING, states.RESTARTING,
                          states.SUCCESS],
                         [s for s, _ in self._reports()])
        data = self.journal.read()
        self.assertEqual('2.0.0', data['last_known_good'])
        self.assertIsNone(data['current_upgrade'])
        self.assertEqual('2.0.0', self.sup.running_version())
        self.assertEqual(
            (sample_guest.health_command(STATE_DIR), 10),
            self.installs.health_check('2.0.0'))

    def test_wrong_version_is_rejected_before_the_switch(self):
        pid = self.sup._record['pid']
        result = self.pipeline.run(self._entry(self._package('2.0.0'),
                                               '2.5.0'))
        self.assertEqual(states.FAILED, result)
        state, detail = self._reports()[-1]
        self.assertIn('WrongVersionError', detail)
        self.assertIn('was not touched', detail)
        self.assertEqual(pid, self.sup._record['pid'])
        self.assertEqual(['1.0.0'], self.installs.installed_versions())

    def test_an_id_that_is_a_path_fails_without_touching_it(self):
        # The work directory was join(work_root, id): an id of /etc made
        # it /etc, removed and made again as root. A directory of the
        # test stands for /etc.
        victim = self.useFixture(fixtures.TempDir()).path
        with open(os.path.join(victim, 'passwd'), 'w') as f:
            f.write('root:x:0:0::/root:/bin/sh\n')
        result = self.pipeline.run(self._entry(self._package('2.0.0'),
                                               '2.0.0', upgrade_id=victim))
        self.assertEqual(states.FAILED, result)
        detail = self._reports()[-1][1]
        self.assertIn('Upgrade ids are UUIDs, not %r' % victim, detail)
        self.assertEqual(['passwd'], os.listdir(victim))
        self.assertEqual('1.0.0', self.sup.running_version())
        self.assertEqual([], self.strategy.fetched)

    def test_download_failure_leaves_the_guest_alone(self):
        self.strategy.fail = 'connection refused'
        result = self.pipeline.run(self._entry('/nowhere', '2.0.0'))
        self.assertEqual(states.FAILED, result)
        detail = self._reports()[-1][1]
        self.assertIn('download failed', detail)
        self.assertIn('connection refused', detail)
        self.assertEqual('1.0.0', self.sup.running_version())

    def test_unreachable_location_fails_the_download_step(self):
        self.strategy.missing = 'no such file'
        result = self.pipeline.run(self._entry('/nowhere', '2.0.0'))
        self.assertEqual(states.FAILED, result)
        detail = self._reports()[-1][1]
        self.assertIn('does not exist: no such file', detail)
        self.assertEqual([], self.strategy.fetched)
        self.assertEqual('1.0.0', self.sup.running_version())

    def test_unexpected_error_before_the_switch_fails_and_clears(self):
        self.strategy.fetch = mock.Mock(
            side_effect=ZeroDivisionError('x' * 100000))
        result = self.pipeline.run(self._entry('/nowhere', '2.0.0'))
        self.assertEqual(states.FAILED, result)
        detail = self._reports()[-1][1]
        self.assertIn('internal error: ZeroDivisionError', detail)
        self.assertLess(len(detail), 2048)
        data = self.journal.read()
        self.assertIsNone(data['current_upgrade'])
        self.assertEqual(states.FAILED, data['processed'][U1])
        self.assertEqual('1.0.0', self.sup.running_version())
        self.assertEqual([], os.listdir(self.pipeline.work_root))

    def test_a_stopped_step_leaves_the_upgrade_for_the_next_start(self):
        path = self._package('2.0.0')
        # As the child process's steps raise it when the agent stops.
        with mock.patch.object(
                self.pipeline.steps, 'download',
                side_effect=untrusted.StepStopped(untrusted.DOWNLOAD)):
            self.assertRaises(untrusted.StepStopped, self.pipeline.run,
                              self._entry(path, '2.0.0'))
        data = self.journal.read()
        self.assertEqual(pipeline.DOWNLOADING,
                         data['current_upgrade']['step'])
        self.assertEqual([], self._reports())
        self.assertEqual('1.0.0', self.sup.running_version())

        self.assertEqual(states.SUCCESS, self.pipeline.recover())
        self.assertEqual('2.0.0', self.sup.running_version())

    def test_unexpected_error_after_the_switch_rolls_back(self):
        path = self._package('2.0.0')
        real_restart = self.pipeline._restart

        def restart(version, upgrading=False, **kwargs):
            if upgrading:
                raise KeyError('injected')
            return real_restart(version, upgrading, **kwargs)

        self.pipeline._restart = restart
        result = self.pipeline.run(self._entry(path, '2.0.0'))
        self.assertEqual(states.FAILED, result)
        detail = self._reports()[-1][1]
        self.assertIn('internal error: KeyError', detail)
        self.assertIn('rolled back to 1.0.0', detail)
        self.assertIsNone(self.journal.read()['current_upgrade'])
        self.assertEqual('1.0.0', self.sup.running_version())
        self.assertEqual('1.0.0', self.installs.current_version())

    def test_failure_of_the_failure_path_still_finishes(self):
        self.strategy.fetch = mock.Mock(side_effect=RuntimeError('first'))
        self.pipeline._fail_before_switch = mock.Mock(
            side_effect=OSError('second'))
        result = self.pipeline.run(self._entry('/nowhere', '2.0.0'))
        self.assertEqual(states.FAILED, result)
        self.assertIn('cleaning up failed', self._reports()[-1][1])
        self.assertIsNone(self.journal.read()['current_upgrade'])

    def test_no_keys_fails_before_anything_is_fetched(self):
        self.pipeline.verifier = None
        result = self.pipeline.run(self._entry(self._package('2.0.0'),
                                               '2.0.0'))
        self.assertEqual(states.FAILED, result)
        self.assertIn('no trusted keys are configured',
                      self._reports()[-1][1])
        self.assertEqual([], self.strategy.fetched)

    def test_broken_install_fails_its_preflight_before_the_switch(self):
        result = self.pipeline.run(self._entry(
            self._package('2.0.0', 'broken'), '2.0.0'))
        self.assertEqual(states.FAILED, result)
        self.assertIn('preflight', self._reports()[-1][1])
        self.assertEqual('1.0.0', self.installs.current_version())
        self.assertFalse(os.path.exists(self.installs.path('2.0.0')))

    def test_crash_after_switch_rolls_back(self):
        result = self.pipeline.run(self._entry(
            self._package('3.0.0', 'crash'), '3.0.0'))
        self.assertEqual(states.FAILED, result)
        detail = self._reports()[-1][1]
        self.assertIn('exited with status 3', detail)
        self.assertIn('rolled back to 1.0.0', detail)
        self.assertEqual('1.0.0', self.installs.current_version())
        self.assertEqual('1.0.0', self.sup.running_version())
        self.assertEqual('1.0.0', self.journal.read()['last_known_good'])

    def _refuse(self, version, times=None):
        """A probe refusing ``version`` (``times`` times, else always)."""
        refusals = []

        def probe():
            if self.sup.running_version() != version:
                return None
            if times is not None and len(refusals) >= times:
                return None
            refusals.append(1)
            return supervisor.Refused('refused the ping: KeyError: x')

        self.sup.probe = probe
        return refusals

    def test_rollback_judged_by_the_old_release_answering_after_it(self):
        # 1.0.0 fails both checks of its restart, then answers: it runs.
        self._refuse('1.0.0', times=2)
        result = self.pipeline.run(self._entry(
            self._package('3.0.0', 'crash'), '3.0.0'))
        self.assertEqual(states.FAILED, result)
        detail = self._reports()[-1][1]
        self.assertTrue(detail.endswith(
            '; rolled back to 1.0.0, which is running'), detail)
        self.assertNotIn('failed too', detail)
        self.assertEqual('1.0.0', self.sup.running_version())

    def test_rollback_to_a_release_that_runs_unhealthy_says_so(self):
        self._refuse('1.0.0')
        self.pipeline.run(self._entry(
            self._package('3.0.0', 'crash'), '3.0.0'))
        detail = self._reports()[-1][1]
        self.assertIn('; rolled back to 1.0.0, which is running but not '
                      'healthy: guest agent 1.0.0 failed 2 start '
                      'attempt(s): refused the ping: KeyError: x', detail)
        self.assertNotIn('failed too', detail)
        # Left running: the last known good unhealthy beats none.
        self.assertEqual('1.0.0', self.sup.running_version())

    def test_rollback_that_leaves_nothing_running_says_so(self):
        switch = self.installs.switch

        def switch_but_not_back(version):
            if version == '1.0.0':
                raise install.InstallError('disk full')
            return switch(version)

        self.installs.switch = switch_but_not_back
        self.pipeline.run(self._entry(
            self._package('3.0.0', 'crash'), '3.0.0'))
        detail = self._reports()[-1][1]
        self.assertTrue(detail.endswith(
            '; rolling back to 1.0.0 failed too: disk full; no guest agent '
            'is running'), detail)
        self.assertIsNone(self.sup.running_version())

    def test_already_running_version_succeeds_at_once(self):
        result = self.pipeline.run(self._entry('/unused', '1.0.0'))
        self.assertEqual(states.SUCCESS, result)
        self.assertEqual([], self.strategy.fetched)
        self.assertIn('already running', self._reports()[-1][1])

    def test_recover_resumes_an_upgrade_interrupted_before_the_switch(self):
        entry = self._entry(self._package('2.0.0'), '2.0.0')
        entry['step'] = pipeline.INSTALLING
        with self.journal.update() as data:
            data['current_upgrade'] = entry
        os.makedirs(self.installs.path('2.0.0'))
        self.assertEqual(states.SUCCESS, self.pipeline.recover())
        self.assertEqual('2.0.0', self.sup.running_version())

    def test_recover_finishes_an_upgrade_interrupted_after_switch(self):
        entry = self._entry(self._package('2.0.0'), '2.0.0')
        wheel = sample_guest.build_wheel(os.path.join(self.tmp, 'w2'),
                                         '2.0.0')
        self.installs.install('2.0.0', [wheel],
                              sample_guest.health_command(STATE_DIR))
        self.installs.switch('2.0.0')
        entry['step'] = pipeline.RESTARTING
        with self.journal.update() as data:
            data['current_upgrade'] = entry
        self.assertEqual(states.SUCCESS, self.pipeline.recover())
        self.assertEqual([], self.strategy.fetched)
        self.assertEqual('2.0.0', self.sup.running_version())

    def test_recover_gives_up_after_too_many_restarts(self):
        entry = self._entry(self._package('2.0.0'), '2.0.0')
        entry['step'] = pipeline.DOWNLOADING
        entry['attempts'] = 2
        with self.journal.update() as data:
            data['current_upgrade'] = entry
        self.assertEqual(states.FAILED, self.pipeline.recover())
        self.assertIn('the agent restarted 2 times', self._reports()[-1][1])
        self.assertEqual('1.0.0', self.sup.running_version())

    def test_recover_completes_an_interrupted_rollback(self):
        wheel = sample_guest.build_wheel(os.path.join(self.tmp, 'w3'),
                                         '3.0.0', 'crash')
        self.installs.install('3.0.0', [wheel])
        self.installs.switch('3.0.0')
        self.sup.stop()
        entry = self._entry('/unused', '3.0.0')
        entry.update(step=pipeline.ROLLING_BACK, detail='it crashed',
                     from_version='1.0.0')
        with self.journal.update() as data:
            data['current_upgrade'] = entry
        self.assertEqual(states.FAILED, self.pipeline.recover())
        self.assertIn('it crashed; rolled back to 1.0.0',
                      self._reports()[-1][1])
        self.assertEqual('1.0.0', self.sup.running_version())

    def test_recover_without_a_good_version_survives_a_failing_stop(self):
        # Nothing to roll back to, and the service manager cannot stop the
        # guest agent: recovery still ends the upgrade FAILED, with both
        # reasons, instead of raising out of the agent's start-up.
        entry = self._entry('/unused', '3.0.0')
        entry.update(step=pipeline.ROLLING_BACK, detail='it crashed',
                     from_version=None)
        with self.journal.update() as data:
            data['current_upgrade'] = entry
            data['last_known_good'] = None
        self.sup.stop = mock.Mock(side_effect=OSError('stop refused'))
        self.assertEqual(states.FAILED, self.pipeline.recover())
        detail = self._reports()[-1][1]
        self.assertIn('it crashed; no previous version to roll back to',
                      detail)
        self.assertIn('stopping the guest agent failed too', detail)
        self.assertIn('stop refused', detail)
        self.assertIsNone(self.journal.read()['current_upgrade'])

    def test_prune_keeps_last_known_good_after_success(self):
        for number, version in enumerate(('2.0.0', '2.1.0')):
            self.assertEqual(states.SUCCESS, self.pipeline.run(
                self._entry(self._package(version), version,
                            test_manager.upgrade_id(number))))
        self.assertEqual(['2.0.0', '2.1.0'],
                         self.installs.installed_versions())

    def _trove_gate(self, wait):
        gate = {'gate': True, 'before': 'healthy', 'timeout': 5.0}
        self.pipeline.trove_health = mock.Mock()
        self.pipeline.trove_health.baseline.return_value = gate
        self.pipeline.trove_health.wait.return_value = wait
        return gate

    def test_trove_health_gate_failure_rolls_back_with_trove_reason(self):
        gate = self._trove_gate(('Trove\'s health gate did not pass within '
                                 '5s: Trove recorded no heartbeat', None))
        result = self.pipeline.run(self._entry(self._package('2.0.0'),
                                               '2.0.0'))
        self.assertEqual(states.FAILED, result)
        detail = self._reports()[-1][1]
        self.assertIn('Trove recorded no heartbeat', detail)
        self.assertIn('rolled back to 1.0.0, which is running', detail)
        self.assertEqual('1.0.0', self.sup.running_version())
        # Asked after the new release ran: the baseline came first.
        upgrade = self.pipeline.trove_health.wait.call_args[0][0]
        self.assertEqual(gate, upgrade['trove_health'])
        self.pipeline.trove_health.baseline.assert_called_once()

    def test_trove_health_gate_pass_is_in_the_success_report(self):
        self._trove_gate((None, 'Trove recorded status healthy'))
        result = self.pipeline.run(self._entry(self._package('2.0.0'),
                                               '2.0.0'))
        self.assertEqual(states.SUCCESS, result)
        self.assertIn('; Trove recorded status healthy',
                      self._reports()[-1][1])

    def test_recovery_keeps_the_trove_baseline_taken_before_the_switch(self):
        gate = self._trove_gate((None, 'ok'))
        entry = self._entry(self._package('2.0.0'), '2.0.0')
        wheel = sample_guest.build_wheel(os.path.join(self.tmp, 'w2'),
                                         '2.0.0')
        self.installs.install('2.0.0', [wheel],
                              sample_guest.health_command(STATE_DIR))
        self.installs.switch('2.0.0')
        entry.update(step=pipeline.RESTARTING, trove_health=dict(
            gate, before='running'))
        with self.journal.update() as data:
            data['current_upgrade'] = entry
        self.assertEqual(states.SUCCESS, self.pipeline.recover())
        self.pipeline.trove_health.baseline.assert_not_called()
        self.assertEqual('running', self.pipeline.trove_health.wait
                         .call_args[0][1]['before'])
