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

"""Adoption is all or nothing: a failed step leaves the instance as it was.

Every step is failed in turn, before and after it acts, and the whole
temporary tree (file bytes, modes, symlink targets) must then be what it
was before adoption began. A run stopped at a step without undoing (what
``kill -9`` does) must be undone by the next run, which then adopts.
"""

import errno
import os
import subprocess
import sys

import fixtures

from trove_upgrade.agent import adopt
from trove_upgrade.agent import child_process
from trove_upgrade.agent import guest_files
from trove_upgrade.agent import init_system
from trove_upgrade.agent import install
from trove_upgrade.agent import journal
from trove_upgrade.agent import service as agent_service
from trove_upgrade.agent import supervisor
from trove_upgrade.agent import trove_guest
from trove_upgrade.agent import undo_log
from trove_upgrade.tests import base
from trove_upgrade.tests import file_tree
from trove_upgrade.tests.fixtures import trove_venv

UNIT = """\
[Unit]
Description=OpenStack Trove Guest Agent Service

[Service]
User=ubuntu
ExecStart=/usr/local/bin/guest-agent --config-dir=/etc/trove/conf.d
"""


class FakeSystemctl(fixtures.Fixture):
    """systemctl: MainPID is this process; reloads fail while asked to."""

    reload_failures = 0

    def _setUp(self):
        self.argvs = []
        self.useFixture(fixtures.MockPatch(
            'trove_upgrade.agent.child_process.run', side_effect=self._run))

    def _run(self, argv, **kwargs):
        self.argvs.append(argv)
        status, out = 0, ''
        if 'show' in argv:
            out = '%d\n' % os.getpid()
        elif 'daemon-reload' in argv and self.reload_failures:
            self.reload_failures -= 1
            status, out = 1, 'Failed to reload daemon:\nAccess denied'
        output = child_process.Output(0, child_process.TAIL_BYTES)
        output.feed(out.encode())
        return child_process.Finished(status, output,
                                      child_process.Output(0, 0))

    def reloads(self):
        return self.argvs.count(['systemctl', 'daemon-reload'])


class Guest(fixtures.Fixture):
    """An instance as a Trove image leaves it, in one temporary directory."""

    def _setUp(self):
        self.top = self.useFixture(fixtures.TempDir()).path
        self.venv = os.path.join(self.top, 'opt', 'guest-agent-venv')
        script = trove_venv.make(self.venv)
        self.link = os.path.join(self.top, 'usr', 'local', 'bin',
                                 'guest-agent')
        os.makedirs(os.path.dirname(self.link))
        os.symlink(script, self.link)
        unit_dir = os.path.join(self.top, 'etc', 'systemd', 'system')
        file_tree.write(os.path.join(unit_dir, 'guest-agent.service'), UNIT)
        self.conf_dir = os.path.join(self.top, 'etc', 'trove', 'conf.d')
        file_tree.write(os.path.join(self.conf_dir, 'guest_info.conf'),
                        '[DEFAULT]\nguest_id = inst-1\n', 0o600)
        self.root = os.path.join(self.top, 'var', 'lib', 'trove-upgrade')
        self.journal = journal.UpgradeJournal(self.root)
        self.journal.read()  # the lock file, as trove-upgrade-adopt makes
        self.installs = install.InstallRoot(self.root, self.journal.lock)
        self.driver = init_system.SystemdDriver(
            'guest-agent', 'systemctl', unit_dir)
        self.supervisor = init_system.InitSystemSupervisor(
            self.installs, self.driver)

    def adopt(self):
        return adopt.adopt(
            self.installs, self.journal, self.venv, 'trove-guestagent',
            supervisor=self.supervisor, program_link=self.link,
            trove_config_dir=self.conf_dir)

    def snapshot(self):
        return file_tree.snapshot(self.top)


# (step, what its error names, the function it calls, which of the calls).
STEPS = [
    ('marker', 'writing the install marker', guest_files, 'write_text',
     lambda path, text: path.endswith(install.MARKER)),
    ('version-link', 'linking', adopt, 'point_link',
     lambda link, target: link.endswith('25.1.0')),
    ('current', 'current at 25.1.0', install.InstallRoot, 'switch',
     lambda installs, version: True),
    ('journal', 'last known good version', journal.UpgradeJournal, '_save',
     lambda jour, data: True),
    ('program-link', 'guest-agent at', adopt, 'point_link',
     lambda link, target: link.endswith('guest-agent')),
    ('drop-in', 'systemd drop-in', init_system.SystemdDriver,
     'point_at', lambda driver, program: True),
    ('pid', "guest agent's pid", supervisor.GuestSupervisor,
     '_write_pidfile', lambda sup, record: True),
    ('trove-config', 'RPC ping', trove_guest, 'write_managed_config',
     lambda config_dir: True),
]


class TestAllOrNothing(base.TestCase):

    def setUp(self):
        super().setUp()
        self.systemctl = self.useFixture(FakeSystemctl())
        self.guest = self.useFixture(Guest())

    def assert_undone(self, before, names):
        e = self.assertRaises(adopt.AdoptionStepError, self.guest.adopt)
        self.assertIn(names, str(e))
        self.assertIn('every change was undone', str(e))
        self.assertEqual(1, len(str(e).splitlines()))
        self.assertEqual(before, self.guest.snapshot())
        return e

    def test_adopts_every_step(self):
        before = self.guest.snapshot()
        self.assertEqual(('25.1.0', True), self.guest.adopt())
        after = self.guest.snapshot()
        self.assertEqual('@/var/lib/trove-upgrade/current/bin/'
                         'trove-guestagent',
                         after['usr/local/bin/guest-agent'][1])
        self.assertIn('etc/systemd/system/guest-agent.service.d/'
                      'trove-upgrade.conf', after)
        self.assertIn('etc/trove/conf.d/' + trove_guest.MANAGED_FILE, after)
        self.assertIn('var/lib/trove-upgrade/' + supervisor.PIDFILE, after)
        self.assertNotIn('var/lib/trove-upgrade/' + adopt.UNDO_LOG, after)
        self.assertEqual([], [p for p in after
                              if undo_log.BACKUP_SUFFIX in p])
        self.assertNotEqual(before, after)
        self.assertEqual(('25.1.0', False), self.guest.adopt())
        self.assertEqual(after, self.guest.snapshot())

    def _test_step(self, after):
        drop_in = [s[0] for s in STEPS].index('drop-in')
        for i, (step, names, owner, name, which) in enumerate(STEPS):
            with self.subTest(step=step):
                self.guest = self.useFixture(Guest())
                before = self.guest.snapshot()
                reloads = self.systemctl.reloads()
                with fixtures.MonkeyPatch('%s.%s' % _where(owner, name),
                                          _failing(getattr(owner, name),
                                                   which, after)):
                    self.assert_undone(before, names)
                # A drop-in systemd read is put back and read again.
                wrote = i > drop_in or (i == drop_in and after)
                self.assertEqual(reloads + (2 if wrote else 0),
                                 self.systemctl.reloads())
                self.assertEqual(('25.1.0', True), self.guest.adopt())

    def test_a_step_that_fails_before_it_acts_is_undone(self):
        self._test_step(after=False)

    def test_a_step_that_fails_after_it_acted_is_undone(self):
        self._test_step(after=True)

    def test_a_failure_at_the_commit_is_undone(self):
        before = self.guest.snapshot()
        with fixtures.MonkeyPatch('trove_upgrade.agent.pause_hook.pause_at',
                                  _raise_at(adopt.CHECKPOINT_PREFIX
                                            + adopt.COMMIT)):
            self.assert_undone(before, 'committing failed')
        self.assertEqual(2, self.systemctl.reloads())

    def test_a_reload_that_fails_is_undone(self):
        before = self.guest.snapshot()
        self.systemctl.reload_failures = 1
        e = self.assert_undone(before, 'systemd drop-in')
        self.assertIn('Failed to reload daemon: Access denied', str(e))

    def test_an_undo_that_fails_is_finished_by_the_next_run(self):
        before = self.guest.snapshot()
        self.systemctl.reload_failures = 2
        e = self.assertRaises(adopt.AdoptionStepError, self.guest.adopt)
        self.assertIn('undoing the adoption failed too', str(e))
        self.assertIn('run trove-upgrade-adopt again', str(e))
        self.assertTrue(os.path.exists(os.path.join(self.guest.root,
                                                    adopt.UNDO_LOG)))
        # The next run undoes what is left, then adopts.
        self.assertEqual(('25.1.0', True), self.guest.adopt())
        self.assertNotEqual(before, self.guest.snapshot())

    def test_a_refused_adoption_changes_nothing(self):
        before = self.guest.snapshot()
        os.unlink(os.path.join(self.guest.venv, 'bin', 'trove-guestagent'))
        self.assertRaises(adopt.AdoptionRefusedError, self.guest.adopt)
        del before['opt/guest-agent-venv/bin/trove-guestagent']
        self.assertEqual(before, self.guest.snapshot())


class Killed(BaseException):
    """What ``kill -9`` does: the run stops, undoing nothing."""


class TestKilled(base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(FakeSystemctl())
        reference = self.useFixture(Guest())
        reference.adopt()
        self.adopted = reference.snapshot()

    def test_a_killed_run_is_undone_and_redone_by_the_next(self):
        checkpoints = [s[0] for s in STEPS] + [adopt.COMMIT]
        for checkpoint in checkpoints:
            with self.subTest(checkpoint=checkpoint):
                guest = self.useFixture(Guest())
                before = guest.snapshot()
                with fixtures.MonkeyPatch(
                        'trove_upgrade.agent.pause_hook.pause_at',
                        _raise_at(adopt.CHECKPOINT_PREFIX + checkpoint,
                                  Killed)), fixtures.MonkeyPatch(
                        'trove_upgrade.agent.adopt._fail', _reraise):
                    self.assertRaises(Killed, guest.adopt)
                self.assertTrue(os.path.exists(os.path.join(
                    guest.root, adopt.UNDO_LOG)))
                self.assertNotEqual(before, guest.snapshot())
                self.assertEqual(('25.1.0', True), guest.adopt())
                self.assertEqual(self.adopted, guest.snapshot())


class TestAdoptCommand(base.TestCase):
    """trove-upgrade-adopt when its last step meets a real failure."""

    def setUp(self):
        super().setUp()
        self.guest = self.useFixture(Guest())
        self.conf = os.path.join(self.guest.top, 'agent.conf')
        file_tree.write(
            self.conf, '[agent]\ninstance_id = i1\ninstall_root = %s\n'
            'guest_program_link = %s\n[trove_guest]\nconfig_dir = %s\n'
            % (self.guest.root, self.guest.link, self.guest.conf_dir))

    def _run(self):
        return subprocess.run(
            [os.path.join(os.path.dirname(sys.executable),
                          'trove-upgrade-adopt'),
             '--config-file', self.conf, '--venv', self.guest.venv],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            timeout=60)

    def _snapshot(self):
        tree = self.guest.snapshot()
        # The command's own lock, written with its pid before adopting.
        tree.pop('var/lib/trove-upgrade/' + agent_service.AGENT_LOCK, None)
        return tree

    def test_a_failed_last_step_exits_2_naming_it_with_all_undone(self):
        # A directory where the atomic writer's temporary file must go.
        managed = os.path.join(self.guest.conf_dir, trove_guest.MANAGED_FILE)
        os.mkdir(managed + '.tmp')
        before = self._snapshot()
        proc = self._run()
        self.assertEqual(2, proc.returncode, proc.stderr)
        self.assertEqual('', proc.stdout)
        self.assertEqual(1, len(proc.stderr.strip().splitlines()),
                         proc.stderr)
        self.assertNotIn('Traceback', proc.stderr)
        self.assertIn('trove-upgrade-adopt: error: enabling the RPC ping in '
                      '%s failed' % managed, proc.stderr)
        self.assertIn('every change was undone', proc.stderr)
        self.assertEqual(before, self._snapshot())
        os.rmdir(managed + '.tmp')
        proc = self._run()
        self.assertEqual(0, proc.returncode, proc.stderr)
        self.assertIn('adopted', proc.stdout)


def _where(owner, name):
    if isinstance(owner, type):
        return owner.__module__, '%s.%s' % (owner.__qualname__, name)
    return owner.__name__, name


def _failing(real, which, after):
    def fake(*args, **kwargs):
        if which(*args, **kwargs):
            if after:
                real(*args, **kwargs)
            raise OSError(errno.EIO, 'injected failure')
        return real(*args, **kwargs)
    return fake


def _raise_at(checkpoint, error=OSError):
    def pause_at(root, name):
        if name == checkpoint:
            raise error('injected at %s' % name)
    return pause_at


def _reraise(steps, driver, error):
    raise error
