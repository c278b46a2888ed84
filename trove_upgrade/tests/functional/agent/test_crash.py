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

"""kill -9 of the agent at each step, then a restart: it converges.

The agent is stopped at a known step with its documented test hook
(``TROVE_UPGRADE_AGENT_TEST_PAUSE``, see ``trove_upgrade.agent.pipeline``):
it records the step in the journal as usual, then waits at the checkpoint
until the test kills its whole process group with SIGKILL. A second agent,
started without the hook, must finish the job: the new version running and
SUCCESS, or the previous version running and FAILED, and never a
half-installed ``current``.

Between the checkpoints, the programs the agent runs on its own (the
virtualenv's creation, uv and pip) are frozen with SIGSTOP at the moment
they run and the agent killed then: the next agent must end them before it
builds the install again.
"""

import contextlib
import os
import signal
import time

from trove_upgrade.common import states
from trove_upgrade.tests.functional.agent import harness


class TestKillDuringUpgrade(harness.AgentTestCase):

    packages = {'2.0.0': 'ok', '3.0.0': 'crash'}

    def _kill_at(self, checkpoint, version='2.0.0'):
        self.start_agent(pause_at=checkpoint)
        self.wait_for_guest('1.0.0')
        upgrade = self.create_upgrade(version)
        self.wait_for_paused(checkpoint)
        self.kill_agent()
        self.assertIsNotNone(self.journal()['current_upgrade'])
        self.start_agent()
        done = self.wait_for_status(upgrade['id'], states.FINAL_STATES)
        journal = self.wait_for_outbox_empty()
        self.assertIsNone(journal['current_upgrade'])
        versions = os.listdir(os.path.join(self.install_root, 'versions'))
        for name in versions:
            self.assertTrue(os.path.exists(os.path.join(
                self.install_root, 'versions', name,
                '.trove-upgrade-installed')), 'half-built install %s' % name)
        return done

    def _assert_upgraded(self, done):
        self.assertEqual(states.SUCCESS, done['status'], done['events'])
        self.assertEqual('2.0.0', self.current_version())
        self.wait_for_guest('2.0.0')
        self.assertEqual('2.0.0', self.journal()['last_known_good'])

    def test_kill_during_download(self):
        self._assert_upgraded(self._kill_at('downloading'))

    def test_kill_during_verification(self):
        self._assert_upgraded(self._kill_at('verifying'))

    def test_kill_during_install(self):
        self._assert_upgraded(self._kill_at('installing'))

    def test_kill_during_switch(self):
        self._assert_upgraded(self._kill_at('switching'))

    def test_kill_during_restart_before_the_old_guest_stopped(self):
        self._assert_upgraded(self._kill_at('restarting'))

    def test_kill_during_restart_with_the_new_guest_started(self):
        self._assert_upgraded(self._kill_at('health-check'))

    def test_kill_during_restart_of_a_crashing_version_rolls_back(self):
        done = self._kill_at('health-check', version='3.0.0')
        self.assertEqual(states.FAILED, done['status'], done['events'])
        self.assertIn('rolled back to 1.0.0', done['events'][-1]['detail'])
        self.assertEqual('1.0.0', self.current_version())
        self.wait_for_guest('1.0.0')

    def _builder(self, version, uv=False):
        """The pid of the virtualenv creation or pip building ``version``.

        Each runs as ``python -m venv|pip`` with an argument in the
        install, in a session (process group) of its own; with ``uv``, the
        ``uv pip install`` filling it.
        """
        dest = os.path.join(self.install_root, 'versions', version)
        for name in os.listdir('/proc'):
            if not name.isdigit():
                continue
            try:
                with open('/proc/%s/cmdline' % name, 'rb') as f:
                    argv = f.read().decode(errors='replace').split('\0')
                leader = os.getpgid(int(name)) == int(name)
            except OSError:
                continue
            if uv:
                builder = (os.path.basename(argv[0]) == 'uv'
                           and argv[1:3] == ['pip', 'install'])
            else:
                builder = argv[1:3] in (['-m', 'venv'], ['-m', 'pip'])
            if (leader and builder
                    and any(arg.startswith(dest) for arg in argv)):
                return int(name)
        return None

    def _freeze_builder(self, version, uv=False):
        """SIGSTOP the first builder of ``version`` seen; its group's pids."""
        deadline = time.monotonic() + harness.WAIT
        while time.monotonic() < deadline:
            pid = self._builder(version, uv)
            if pid is not None:
                break
            # It may run for a tenth of a second only: look often.
            time.sleep(0.002)
        else:
            self.fail('no virtualenv creation or pip install of %s seen'
                      % version)
        os.killpg(pid, signal.SIGSTOP)
        self.addCleanup(self._kill_group, pid)
        group = [int(n) for n in os.listdir('/proc') if n.isdigit()
                 and self._pgid(int(n)) == pid]
        return group

    @staticmethod
    def _pgid(pid):
        try:
            return os.getpgid(pid)
        except OSError:
            return None

    @staticmethod
    def _kill_group(pgid):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)

    def test_kill_during_the_install_ends_what_it_started(self):
        self.start_agent()
        self.wait_for_guest('1.0.0')
        upgrade = self.create_upgrade('2.0.0')
        builders = self._freeze_builder('2.0.0')
        self.kill_agent()
        self.start_agent()
        self.assertProcessesDie(builders)
        done = self.wait_for_status(upgrade['id'], states.FINAL_STATES)
        self._assert_upgraded(done)

    def test_kill_during_uv_s_install_ends_it(self):
        self.start_agent()
        self.wait_for_guest('1.0.0')
        upgrade = self.create_upgrade('2.0.0')
        builders = self._freeze_builder('2.0.0', uv=True)
        self.kill_agent()
        self.start_agent()
        self.assertProcessesDie(builders)
        done = self.wait_for_status(upgrade['id'], states.FINAL_STATES)
        self._assert_upgraded(done)
