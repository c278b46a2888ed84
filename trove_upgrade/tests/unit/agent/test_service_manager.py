"""Service manager drivers: the exact systemctl/supervisorctl commands.

systemd cannot run as PID 1 on the test machines: these tests check the
command lines and the unit drop-in; the functional tests in
``tests/functional/trove`` drive a real supervisord through the same
supervisor class.
"""

import os
import subprocess
from unittest import mock

import fixtures

from trove_upgrade.agent import install
from trove_upgrade.agent import journal
from trove_upgrade.agent import service_manager
from trove_upgrade.agent import supervisor
from trove_upgrade.tests import base

UNIT = """\
[Unit]
Description=OpenStack Trove Guest Agent Service

[Service]
User=ubuntu
Group=ubuntu
ExecStartPre=/bin/bash -c "sudo chown -R ubuntu:root /etc/trove"
ExecStart=/usr/local/bin/guest-agent --config-dir=/etc/trove/conf.d

[Install]
WantedBy=multi-user.target
"""


def _done(args, status=0, out=''):
    return subprocess.CompletedProcess(args, status, out)


class TestSystemdDriver(base.TestCase):

    def setUp(self):
        super().setUp()
        self.unit_dir = self.useFixture(fixtures.TempDir()).path
        with open(os.path.join(self.unit_dir, 'guest-agent.service'),
                  'w') as f:
            f.write(UNIT)
        self.run = self.useFixture(fixtures.MockPatch(
            'subprocess.run', side_effect=lambda a, **k: _done(a))).mock
        self.driver = service_manager.SystemdDriver(
            'guest-agent', 'systemctl', self.unit_dir)

    def argvs(self):
        return [c.args[0] for c in self.run.call_args_list]

    def test_start_stop_commands(self):
        self.driver.start()
        self.driver.stop()
        self.assertEqual([['systemctl', 'start', 'guest-agent.service'],
                          ['systemctl', 'stop', 'guest-agent.service']],
                         self.argvs())

    def test_main_pid(self):
        self.run.side_effect = lambda a, **k: _done(a, out='4242\n')
        self.assertEqual(4242, self.driver.main_pid())
        self.assertEqual([['systemctl', 'show', '--property=MainPID',
                           '--value', 'guest-agent.service']], self.argvs())
        self.run.side_effect = lambda a, **k: _done(a, out='0\n')
        self.assertIsNone(self.driver.main_pid())

    def test_failure_is_named(self):
        self.run.side_effect = lambda a, **k: _done(
            a, 5, 'Unit guest-agent.service not found.')
        e = self.assertRaises(service_manager.ServiceManagerError,
                              self.driver.start)
        self.assertIn('exited with 5', str(e))
        self.assertIn('not found', str(e))
        self.assertIsInstance(e, supervisor.GuestStartError)

    def test_drop_in_replaces_exec_start_only(self):
        path = self.driver.point_at('/var/lib/trove-upgrade/current/bin/'
                                    'trove-guestagent')
        self.assertEqual(os.path.join(self.unit_dir,
                                      'guest-agent.service.d',
                                      'trove-upgrade.conf'), path)
        with open(path) as f:
            text = f.read()
        self.assertIn('[Service]\nExecStart=\nExecStart=/var/lib/'
                      'trove-upgrade/current/bin/trove-guestagent '
                      '--config-dir=/etc/trove/conf.d\n', text)
        self.assertNotIn('User=', text)
        self.assertNotIn('ExecStartPre', text)
        self.assertEqual([['systemctl', 'daemon-reload']], self.argvs())
        # The unit itself, User= and ExecStartPre included, is untouched.
        with open(os.path.join(self.unit_dir, 'guest-agent.service')) as f:
            self.assertEqual(UNIT, f.read())

    def test_unit_without_exec_start_is_refused(self):
        with open(os.path.join(self.unit_dir, 'guest-agent.service'),
                  'w') as f:
            f.write('[Service]\nUser=ubuntu\n')
        self.assertRaises(service_manager.ServiceManagerError,
                          self.driver.point_at, '/x/bin/trove-guestagent')
        self.assertFalse(os.path.exists(self.driver.drop_in_path()))


class TestSupervisordDriver(base.TestCase):

    def setUp(self):
        super().setUp()
        self.run = self.useFixture(fixtures.MockPatch(
            'subprocess.run', side_effect=lambda a, **k: _done(a))).mock
        self.driver = service_manager.SupervisordDriver(
            'guest-agent', 'supervisorctl -c /etc/s.conf')

    def test_commands(self):
        self.driver.start()
        self.driver.stop()
        self.assertEqual(
            [['supervisorctl', '-c', '/etc/s.conf', 'start', 'guest-agent'],
             ['supervisorctl', '-c', '/etc/s.conf', 'stop', 'guest-agent']],
            [c.args[0] for c in self.run.call_args_list])

    def test_spawn_error_is_named(self):
        self.run.side_effect = lambda a, **k: _done(
            a, 7, 'guest-agent: ERROR (spawn error)')
        e = self.assertRaises(service_manager.ServiceManagerError,
                              self.driver.start)
        self.assertIn('spawn error', str(e))

    def test_pid(self):
        self.run.side_effect = lambda a, **k: _done(a, out='77\n')
        self.assertEqual(77, self.driver.main_pid())
        self.run.side_effect = lambda a, **k: _done(a, 0, '0\n')
        self.assertIsNone(self.driver.main_pid())


class TestServiceManagedSupervisor(base.TestCase):

    def setUp(self):
        super().setUp()
        root = self.useFixture(fixtures.TempDir()).path
        self.installs = install.InstallRoot(root,
                                            journal.InstallRootLock(root))
        os.makedirs(os.path.join(self.installs.versions_dir, '1.0'))
        with open(os.path.join(self.installs.versions_dir, '1.0',
                               install.MARKER), 'w') as f:
            f.write('1.0\n')
        self.installs.switch('1.0')
        self.driver = mock.Mock(name='driver')
        self.driver.name = 'fake'
        self.sup = service_manager.ServiceManagedSupervisor(
            self.installs, self.driver)

    def test_start_records_the_service_pid(self):
        self.driver.main_pid.return_value = os.getpid()
        self.assertEqual('1.0', self.sup.start())
        self.driver.start.assert_called_once_with()
        self.assertTrue(self.sup.is_running())
        self.assertEqual('1.0', self.sup.running_version())

    def test_start_without_a_pid_fails(self):
        self.driver.main_pid.return_value = None
        self.assertRaises(supervisor.GuestStartError, self.sup.start)

    def test_adopt_takes_the_running_service_as_current(self):
        self.driver.main_pid.return_value = os.getpid()
        self.assertTrue(self.sup.adopt())
        self.assertEqual('1.0', self.sup.running_version())
        self.assertEqual([], self.sup.sweep_orphans())

    def test_probe_decides_health(self):
        self.driver.main_pid.return_value = os.getpid()
        self.sup.start()
        answers = iter(['no answer', 'no answer', None])
        self.sup.probe = lambda: next(answers)
        self.assertIsNone(self.sup.check_health(None, 0, 30))
        self.sup.probe = lambda: 'the guest agent did not answer'
        self.assertEqual('the guest agent did not answer',
                         self.sup.check_health(None, 0, 0.3))
