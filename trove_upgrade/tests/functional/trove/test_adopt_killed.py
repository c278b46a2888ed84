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

"""``kill -9`` of trove-upgrade-adopt mid-adoption, then a rerun: adopted.

The image's virtualenv is a real one, with Trove 25.1.0 installed by real
pip from the cached wheelhouse (``guest.make_venv``), its program link
and Trove's configuration directory laid out as an image leaves them, and
a real supervisord running the service. trove-upgrade-adopt is stopped at
a known step with the crash tests' hook (``TROVE_UPGRADE_AGENT_TEST_PAUSE``,
see ``trove_upgrade.agent.pause_hook``) and killed with SIGKILL, undoing
nothing; the next run must undo what the killed one left and adopt.
"""

import os
import signal
import subprocess
import time

import fixtures

from tools.testbed import conffile
from tools.testbed import guest
from tools.testbed import trove_release
from trove_upgrade.agent import adopt
from trove_upgrade.agent import install
from trove_upgrade.agent import journal as journal_mod
from trove_upgrade.agent import pause_hook
from trove_upgrade.agent import supervisor as supervisor_mod
from trove_upgrade.agent import trove_guest
from trove_upgrade.agent import undo_log
from trove_upgrade.tests import base

VERSION = '25.1.0'
# Bounds a broken test only.
PAUSE_WAIT = 60


class TestKillDuringAdoption(base.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # Read before the tests' fixtures point HOME elsewhere.
        cls.cache = trove_release.cache_dir()
        guest.wheelhouse(VERSION, cls.cache)

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.layout = self.useFixture(guest.TroveGuestLayout(
            os.path.join(self.tmp, 'guest'), 'inst-adopt-killed',
            'rabbit://guest:guest@127.0.0.1:5672/', 'trove_unused'))
        guest.make_venv(self.layout.venv, VERSION, self.cache)
        self.program_link = guest.program_link(
            os.path.join(self.tmp, 'guest'), self.layout.venv)
        # The service: a process of the image's virtualenv; adoption
        # records it and never restarts it.
        self.supervisord = self.useFixture(guest.Supervisord(
            os.path.join(self.tmp, 'supervisor'),
            '%s -c "import time; time.sleep(3600)"'
            % os.path.join(self.layout.venv, 'bin', 'python'),
            {'TROVE_UPGRADE_TEST': '1'}))
        self.root = os.path.join(self.tmp, 'install-root')
        self.conf = os.path.join(self.tmp, 'agent.conf')
        conffile.write_conf(self.conf, {
            'agent': {'install_root': self.root,
                      'service_manager': 'supervisord',
                      'service_name': guest.PROGRAM,
                      'supervisord_serverurl': self.supervisord.serverurl,
                      'guest_program_link': self.program_link},
            'trove_guest': {'config_dir': self.layout.conf_dir},
        })

    def _adopt(self, pause_at=None):
        env = dict(os.environ)
        env.pop(pause_hook.ENV, None)
        if pause_at:
            env[pause_hook.ENV] = adopt.CHECKPOINT_PREFIX + pause_at
        return subprocess.Popen(
            [os.path.join(guest.BIN, 'trove-upgrade-adopt'),
             '--config-file', self.conf, '--venv', self.layout.venv],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env=env, start_new_session=True)

    def _kill_at(self, checkpoint):
        proc = self._adopt(checkpoint)
        self.addCleanup(proc.stdout.close)
        self.addCleanup(self._reap, proc)
        marker = os.path.join(self.root, pause_hook.MARKER_PREFIX
                              + adopt.CHECKPOINT_PREFIX + checkpoint)
        deadline = time.monotonic() + PAUSE_WAIT
        while not os.path.exists(marker):
            if proc.poll() is not None:
                self.fail('adoption exited with %d before %s: %s'
                          % (proc.returncode, checkpoint, proc.stdout.read()))
            self.assertLess(time.monotonic(), deadline,
                            'adoption did not reach %s' % checkpoint)
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)
        self.assertEqual(-signal.SIGKILL, proc.wait())
        os.unlink(marker)
        self.assertTrue(os.path.exists(os.path.join(self.root,
                                                    adopt.UNDO_LOG)))

    @staticmethod
    def _reap(proc):
        """A run the test did not kill, paused for ever, is killed here."""
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def _leftovers(self):
        found = []
        for dirpath, dirnames, filenames in os.walk(self.tmp):
            found += [os.path.join(dirpath, name)
                      for name in dirnames + filenames
                      if name.endswith(undo_log.BACKUP_SUFFIX)]
        return found

    def test_killed_twice_then_adopted(self):
        image_pid = self.supervisord.pid()
        # Killed with current switched and the program link about to be.
        self._kill_at('program-link')
        self.assertEqual(VERSION, os.path.basename(os.readlink(
            os.path.join(self.root, install.CURRENT_LINK))))
        # Killed again with every step done, before the commit.
        self._kill_at(adopt.COMMIT)
        self.assertTrue(os.path.exists(os.path.join(
            self.layout.conf_dir, trove_guest.MANAGED_FILE)))

        proc = self._adopt()
        out = proc.communicate()[0]
        self.assertEqual(0, proc.returncode, out)
        self.assertIn('adopted %s as version %s' % (self.layout.venv,
                                                    VERSION), out)
        self.assertFalse(os.path.exists(os.path.join(self.root,
                                                     adopt.UNDO_LOG)))
        self.assertEqual([], self._leftovers())

        installs = install.InstallRoot(
            self.root, journal_mod.InstallRootLock(self.root))
        self.assertEqual(VERSION, installs.current_version())
        self.assertTrue(installs.is_installed(VERSION))
        self.assertEqual(self.layout.venv,
                         os.path.realpath(installs.path(VERSION)))
        self.assertEqual(
            os.path.join(self.root, 'current', 'bin', guest.CONSOLE_SCRIPT),
            os.readlink(self.program_link))
        self.assertEqual(os.path.join(self.layout.venv, 'bin',
                                      guest.CONSOLE_SCRIPT),
                         os.path.realpath(self.program_link))
        self.assertEqual(VERSION, journal_mod.UpgradeJournal(
            self.root).read()['last_known_good'])
        sup = supervisor_mod.GuestSupervisor(installs, None)
        self.assertEqual(image_pid, sup._read_pidfile()['pid'])
        self.assertTrue(os.path.exists(os.path.join(
            self.layout.conf_dir, trove_guest.MANAGED_FILE)))
        # Never restarted; a further run changes nothing.
        self.assertEqual(image_pid, self.supervisord.pid())
        proc = self._adopt()
        out = proc.communicate()[0]
        self.assertEqual(0, proc.returncode, out)
        self.assertIn('already adopted', out)
