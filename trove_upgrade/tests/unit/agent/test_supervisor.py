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

"""The supervisor against real sample guest-agent processes."""

import os
import signal
import subprocess
import threading

import fixtures

from tools.testbed import sample_guest
from trove_upgrade.agent import install
from trove_upgrade.agent import journal
from trove_upgrade.agent import supervisor
from trove_upgrade.tests import base


class TestGuestSupervisor(base.TestCase):

    def setUp(self):
        super().setUp()
        tmp = self.useFixture(fixtures.TempDir()).path
        self.root = os.path.join(tmp, 'root')
        self.wheels = os.path.join(tmp, 'wheels')
        self.state = os.path.join(tmp, 'state')
        os.makedirs(self.root)
        self.installs = install.InstallRoot(
            self.root, journal.InstallRootLock(self.root))
        self.health = sample_guest.health_command(self.state)
        self.sup = self._supervisor()
        self.addCleanup(self.sup.stop)

    def _supervisor(self):
        return supervisor.GuestSupervisor(
            self.installs, sample_guest.guest_command(self.state),
            stop_timeout=5)

    def _install(self, version, behaviour='ok'):
        wheel = sample_guest.build_wheel(
            os.path.join(self.wheels, version), version, behaviour)
        self.installs.install(version, [wheel])
        self.installs.switch(version)

    def test_restart_healthy(self):
        self._install('1.0.0')
        self.assertEqual('1.0.0', self.sup.restart(self.health, 0.2, 10, 2))
        self.assertTrue(self.sup.is_running())
        self.assertEqual('1.0.0', self.sup.running_version())
        self.assertIsNone(self.sup.check_health(self.health, 0, 5))
        self.sup.stop()
        self.assertFalse(self.sup.is_running())
        self.assertFalse(os.path.exists(self.sup.pidfile))

    def test_crash_at_start_fails_after_retries(self):
        self._install('3.0.0', 'crash')
        started = []
        e = self.assertRaises(supervisor.GuestStartError, self.sup.restart,
                              self.health, 0.5, 5, 2,
                              on_started=lambda: started.append(1))
        self.assertIn('exited with status 3', str(e))
        self.assertIn('2 start attempt(s)', str(e))
        self.assertEqual(2, len(started))
        self.assertFalse(self.sup.is_running())

    def test_unhealthy_guest_fails_and_is_stopped(self):
        self._install('4.0.0', 'unhealthy')
        # Time enough for the health command to run to its failure even on
        # a loaded machine; a timed-out run would only say it timed out.
        e = self.assertRaises(supervisor.GuestStartError, self.sup.restart,
                              self.health, 0.1, 5, 1)
        self.assertIn('unhealthy', str(e))
        self.assertFalse(self.sup.is_running())

    def test_a_refusal_ends_the_check_at_once(self):
        # The guest agent answered: asking again until the health timeout
        # would get the same answer.
        self._install('1.0.0')
        asked = []

        def probe():
            asked.append(1)
            return supervisor.Refused('refused the ping: KeyError')

        self.sup.probe = probe
        e = self.assertRaises(supervisor.GuestStartError, self.sup.restart,
                              self.health, 0.1, 600, 2)
        self.assertIn('2 start attempt(s): refused the ping: KeyError',
                      str(e))
        self.assertEqual(2, len(asked))
        self.assertFalse(self.sup.is_running())

    def test_keep_unhealthy_leaves_the_last_start_running(self):
        self._install('1.0.0')
        self.sup.probe = lambda: supervisor.Refused('refused')
        self.assertRaises(supervisor.GuestStartError, self.sup.restart,
                          self.health, 0.1, 600, 1, keep_unhealthy=True)
        self.assertEqual('1.0.0', self.sup.running_version())

    def test_a_new_supervisor_adopts_the_running_guest(self):
        self._install('1.0.0')
        self.sup.restart(self.health, 0.1, 10, 1)
        pid = self.sup._record['pid']
        other = self._supervisor()
        self.assertTrue(other.adopt())
        self.assertEqual('1.0.0', other.running_version())
        other.stop()
        self.assertFalse(self.sup.is_running())
        self.assertRaises(ProcessLookupError, os.kill, pid, 0)

    def test_adopt_ignores_a_dead_or_recycled_pid(self):
        self._install('1.0.0')
        self.sup.restart(self.health, 0.1, 10, 1)
        record = dict(self.sup._record)
        record['start_time'] += 1
        self.sup._write_pidfile(record)
        self.assertFalse(self._supervisor().adopt())

    def test_a_fifo_at_the_pidfiles_temporary_name_blocks_nothing(self):
        # Left there by anyone: opened for writing, it would block the
        # supervisor until a reader came. Replaced instead.
        record = {'pid': os.getpid(), 'start_time': 1, 'version': '1.0.0'}
        os.mkfifo(self.sup.pidfile + '.tmp')
        writer = threading.Thread(target=self.sup._write_pidfile,
                                  args=(record,), daemon=True)
        writer.start()
        # A hang detector, not a timing: the write takes milliseconds.
        writer.join(60)
        if writer.is_alive():
            # Unblock the old code's open so that the thread ends.
            os.close(os.open(self.sup.pidfile + '.tmp',
                             os.O_RDONLY | os.O_NONBLOCK))
            self.fail('the pidfile write blocked on a FIFO')
        self.assertEqual(record, self.sup._read_pidfile())
        self.assertFalse(os.path.lexists(self.sup.pidfile + '.tmp'))

    def test_sweep_kills_orphans_but_not_the_guest(self):
        self._install('1.0.0')
        self.sup.restart(self.health, 0.1, 10, 1)
        orphan = subprocess.Popen(['sleep', '60'],
                                  cwd=self.installs.path('1.0.0'))
        self.addCleanup(orphan.kill)
        elsewhere = subprocess.Popen(['sleep', '60'], cwd=self.root)
        self.addCleanup(elsewhere.kill)
        self.assertEqual([orphan.pid], self.sup.sweep_orphans())
        self.assertEqual(-signal.SIGKILL, orphan.wait(10))
        self.assertIsNone(elsewhere.poll())
        self.assertTrue(self.sup.is_running())

    def test_stop_kills_a_guest_ignoring_sigterm(self):
        self._install('1.0.0')
        sup = supervisor.GuestSupervisor(
            self.installs, "/bin/sh -c 'trap \"\" TERM; sleep 60'",
            stop_timeout=0.3)
        sup.start()
        pid = sup._record['pid']
        sup.stop()
        self.assertFalse(sup.is_running())
        self.assertRaises(ProcessLookupError, os.kill, pid, 0)

    def test_start_without_install_is_a_clear_error(self):
        e = self.assertRaises(supervisor.GuestStartError, self.sup.start)
        self.assertIn('no guest agent is installed', str(e))

    def test_health_notices_a_guest_dying_after_start(self):
        self._install('1.0.0')
        self.sup.restart(self.health, 0, 10, 1)
        os.kill(self.sup._record['pid'], signal.SIGKILL)
        reason = self.sup.check_health(self.health, 0.2, 1)
        self.assertIn('exited', reason)
