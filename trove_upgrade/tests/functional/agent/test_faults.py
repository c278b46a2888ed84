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

"""The agent always recovers: FAILED, guest untouched, next upgrade runs.

Real RabbitMQ, conductor, agent process and pip installs. Faults are real
too: download strategies registered through a temporary ``dist-info``
entry point on the agent's PYTHONPATH (one raises an unexpected error, one
spins for ever on a core), a tmpfs of the test's own mounted on the
agent's work directory and filled by another writer, and a journal that
cannot be written.
"""

import json
import os
import subprocess
import textwrap
import time

import fixtures

from trove_upgrade.agent import journal
from trove_upgrade.common import states
from trove_upgrade.tests.functional.agent import harness

MIB = 1024 * 1024

FAULTS_MODULE = textwrap.dedent('''
    """Test-only download strategies that misbehave on purpose."""


    class _Fault:
        def __init__(self, conf):
            self.conf = conf

        def check_location(self, location):
            pass


    class RaisingStrategy(_Fault):
        name = 'raising'

        def fetch(self, location, dest_path, max_bytes):
            raise RuntimeError('injected fault in the download')


    class HangingStrategy(_Fault):
        name = 'hanging'

        def fetch(self, location, dest_path, max_bytes):
            while True:
                pass
''')

ENTRY_POINTS = textwrap.dedent('''
    [trove_upgrade.strategies]
    raising = trove_upgrade_test_faults:RaisingStrategy
    hanging = trove_upgrade_test_faults:HangingStrategy
''')


class TestFaults(harness.AgentTestCase):

    packages = {'2.0.0': 'ok'}

    def setUp(self):
        super().setUp()
        plugins = os.path.join(self.tmp, 'plugins')
        dist_info = os.path.join(plugins,
                                 'trove_upgrade_test_faults-0.dist-info')
        os.makedirs(dist_info)
        with open(os.path.join(plugins, 'trove_upgrade_test_faults.py'),
                  'w') as f:
            f.write(FAULTS_MODULE)
        with open(os.path.join(dist_info, 'METADATA'), 'w') as f:
            f.write('Metadata-Version: 2.1\nName: trove-upgrade-test-faults'
                    '\nVersion: 0\n')
        with open(os.path.join(dist_info, 'entry_points.txt'), 'w') as f:
            f.write(ENTRY_POINTS)
        path = os.environ.get('PYTHONPATH')
        self.useFixture(fixtures.EnvironmentVariable(
            'PYTHONPATH', plugins + (os.pathsep + path if path else '')))

    def start(self, **overrides):
        overrides.setdefault('allowed_strategies',
                             ['local', 'raising', 'hanging'])
        self.start_agent(**overrides)
        self.wait_for_guest('1.0.0')

    def assertFailedThenNextRuns(self, upgrade, reason):
        done = self.wait_for_status(upgrade['id'], states.FINAL_STATES)
        self.assertEqual(states.FAILED, done['status'], done['events'])
        details = ' '.join(e.get('detail') or '' for e in done['events'])
        self.assertIn(reason, details)
        self.assertLess(max(len(e.get('detail') or '')
                            for e in done['events']), 2048)
        self.assertEqual('1.0.0', self.running_guest_version())
        journal = self.journal()
        self.assertIsNone(journal['current_upgrade'])
        self.assertEqual(states.FAILED, journal['processed'][upgrade['id']])
        # The next upgrade runs without an agent restart.
        following = self.create_upgrade('2.0.0')
        done = self.wait_for_status(following['id'], states.FINAL_STATES)
        self.assertEqual(states.SUCCESS, done['status'], done['events'])
        self.assertEqual('2.0.0', self.running_guest_version())
        self.assertEqual([], os.listdir(os.path.join(self.install_root,
                                                     'work')))

    def test_unexpected_error_in_download_fails_and_next_runs(self):
        self.start()
        upgrade = self.create_upgrade('2.0.0', strategy='raising',
                                      location='anything')
        self.assertFailedThenNextRuns(upgrade, 'RuntimeError')

    def test_hang_in_download_is_stopped_and_next_runs(self):
        # Long enough for a genuine download's child on a loaded machine.
        self.start(download_step_timeout=15)
        upgrade = self.create_upgrade('2.0.0', strategy='hanging',
                                      location='anything')
        self.assertFailedThenNextRuns(upgrade, 'did not finish in 15s')

    def _mount_small_work_dir(self, size):
        work = os.path.join(self.install_root, 'work')
        os.makedirs(work, exist_ok=True)
        try:
            subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=%d' % size,
                            'tmpfs', work], check=True,
                           capture_output=True)
        except (OSError, subprocess.CalledProcessError) as e:
            self.skipTest('cannot mount a tmpfs here: %s' % (
                getattr(e, 'stderr', b'') or e,))
        self.addCleanup(subprocess.run, ['umount', '-l', work])
        return work

    def test_disk_full_during_download_fails_then_next_runs(self):
        big = self.build_package('2.1.0', 'ok', padding=3 * MIB)
        work = self._mount_small_work_dir(8 * MIB)
        self.start()
        # Another writer leaves less room than the download needs.
        filler = os.path.join(work, 'filler')
        with open(filler, 'wb') as f:
            f.write(b'\0' * (6 * MIB))
        upgrade = self.create_upgrade('2.1.0', location=big)
        done = self.wait_for_status(upgrade['id'], states.FINAL_STATES)
        self.assertEqual(states.FAILED, done['status'], done['events'])
        details = ' '.join(e.get('detail') or '' for e in done['events'])
        self.assertIn('No space left on device', details)
        self.assertEqual('1.0.0', self.running_guest_version())
        self.assertIsNone(self.journal()['current_upgrade'])
        self.assertEqual(['filler'], os.listdir(work))
        # The space comes back: the next upgrade works, no restart.
        os.unlink(filler)
        following = self.create_upgrade('2.1.0', location=big)
        done = self.wait_for_status(following['id'], states.FINAL_STATES)
        self.assertEqual(states.SUCCESS, done['status'], done['events'])
        self.assertEqual('2.1.0', self.running_guest_version())


class TestJournalWriteFails(harness.AgentTestCase):
    """The journal refuses writes for a while, as a full disk does."""

    packages = {'2.0.0': 'crash', '3.0.0': 'ok'}

    def _step(self):
        # Without the install-root lock, looked at this often: the journal
        # is replaced by rename, never seen half written.
        path = os.path.join(self.install_root, journal.JOURNAL_NAME)
        try:
            with open(path) as f:
                return (json.load(f)['current_upgrade'] or {}).get('step')
        except FileNotFoundError:
            return None

    def test_upgrade_ends_once_the_journal_takes_writes_again(self):
        self.start_agent()
        self.wait_for_guest('1.0.0')
        upgrade = self.create_upgrade('2.0.0')
        deadline = time.monotonic() + harness.WAIT
        while self._step() != 'restarting':
            self.assertLess(time.monotonic(), deadline, self._log('agent'))
            time.sleep(0.005)
        # Every journal write fails from now on: a directory stands where
        # it writes its temporary copy. (A full disk fails them the same
        # way; a tmpfs filled once lets them through again as soon as the
        # agent removes a file.) The new guest agent crashes: the rollback
        # can record neither its step nor FAILED.
        blocker = os.path.join(self.install_root, journal.JOURNAL_NAME
                               + journal.TMP_SUFFIX)
        while True:
            try:
                os.mkdir(blocker)
                break
            except FileExistsError:
                # A write in flight (the outbox's): renamed in a moment.
                self.assertLess(time.monotonic(), deadline)
                time.sleep(0.001)
        self.wait_for_log('recording the failure failed too')
        self.assertEqual('restarting', self._step())
        os.rmdir(blocker)
        # No restart of the agent: its runner takes the upgrade up.
        done = self.wait_for_status(upgrade['id'], states.FINAL_STATES)
        self.assertEqual(states.FAILED, done['status'], done['events'])
        self.assertIn('rolled back to 1.0.0', done['events'][-1]['detail'])
        self.assertEqual('1.0.0', self.current_version())
        self.wait_for_guest('1.0.0')
        following = self.create_upgrade('3.0.0')
        done = self.wait_for_status(following['id'], states.FINAL_STATES)
        self.assertEqual(states.SUCCESS, done['status'], done['events'])
        self.wait_for_guest('3.0.0')
