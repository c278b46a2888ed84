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

"""Service manager drivers: the exact systemctl/supervisorctl commands.

systemd cannot run as PID 1 on the test machines: these tests check the
command lines and the unit drop-in; the functional tests in
``tests/functional/trove`` drive a real supervisord through the same
supervisor class.
"""

import os
import signal
import socket
import threading
from unittest import mock
import xmlrpc.client
import xmlrpc.server

import fixtures

from trove_upgrade.agent import child_process
from trove_upgrade.agent import init_system
from trove_upgrade.agent import install
from trove_upgrade.agent import journal
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
    output = child_process.Output(0, child_process.TAIL_BYTES)
    output.feed(out.encode())
    return child_process.Finished(status, output, child_process.Output(0, 0))


class TestSystemdDriver(base.TestCase):

    def setUp(self):
        super().setUp()
        self.unit_dir = self.useFixture(fixtures.TempDir()).path
        with open(os.path.join(self.unit_dir, 'guest-agent.service'),
                  'w') as f:
            f.write(UNIT)
        self.run = self.useFixture(fixtures.MockPatch(
            'trove_upgrade.agent.child_process.run',
            side_effect=lambda a, **k: _done(a))).mock
        self.driver = init_system.SystemdDriver(
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
        e = self.assertRaises(init_system.InitSystemError,
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
        self.assertNotIn('TimeoutStopSec', text)
        self.assertEqual([['systemctl', 'daemon-reload']], self.argvs())
        # The unit itself, User= and ExecStartPre included, is untouched.
        with open(os.path.join(self.unit_dir, 'guest-agent.service')) as f:
            self.assertEqual(UNIT, f.read())

    def test_drop_in_that_says_so_already_is_not_written_again(self):
        # Adoption before every agent start reloaded systemd each time.
        path = self.driver.point_at('/a/bin/trove-guestagent')
        written = os.stat(path)
        self.assertEqual(path, self.driver.point_at('/a/bin/trove-guestagent'))
        self.assertEqual(written, os.stat(path))
        self.assertEqual([['systemctl', 'daemon-reload']], self.argvs())
        self.driver.point_at('/b/bin/trove-guestagent')
        with open(path) as f:
            self.assertIn('ExecStart=/b/bin/trove-guestagent ', f.read())
        self.assertEqual([['systemctl', 'daemon-reload']] * 2, self.argvs())

    def test_drop_in_sets_the_stop_timeout(self):
        driver = init_system.SystemdDriver(
            'guest-agent', 'systemctl', self.unit_dir, stop_timeout=1.5)
        path = driver.point_at('/x/bin/trove-guestagent')
        with open(path) as f:
            text = f.read()
        self.assertIn('\nTimeoutStopSec=1500ms\n', text)
        self.assertEqual([['systemctl', 'daemon-reload']], self.argvs())

    def test_unit_without_exec_start_is_refused(self):
        with open(os.path.join(self.unit_dir, 'guest-agent.service'),
                  'w') as f:
            f.write('[Service]\nUser=ubuntu\n')
        self.assertRaises(init_system.InitSystemError,
                          self.driver.point_at, '/x/bin/trove-guestagent')
        self.assertFalse(os.path.exists(self.driver.drop_in_path()))


class TestSupervisordDriver(base.TestCase):

    def setUp(self):
        super().setUp()
        self.run = self.useFixture(fixtures.MockPatch(
            'trove_upgrade.agent.child_process.run',
            side_effect=lambda a, **k: _done(a))).mock
        self.driver = init_system.SupervisordDriver(
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
        e = self.assertRaises(init_system.InitSystemError,
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
        self.sup = init_system.InitSystemSupervisor(
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


class _UnixHandler(xmlrpc.server.SimpleXMLRPCRequestHandler):
    disable_nagle_algorithm = False  # TCP only


class _UnixXMLRPCServer(xmlrpc.server.SimpleXMLRPCServer):
    address_family = socket.AF_UNIX

    def __init__(self, path):
        super().__init__(path, _UnixHandler, logRequests=False)


class FakeSupervisord:
    """supervisord's calls the driver makes, with its faults and states.

    ``stops_after`` is how many ``getProcessInfo`` calls a stopping
    process stays STOPPING (40) before it is STOPPED (0); None: until
    killed.
    """

    def __init__(self):
        self.calls = []
        self.pid = 0
        self.state = 0
        self.stops_after = 1

    def startProcess(self, name, wait):
        self.calls.append(('startProcess', name, wait))
        if self.pid:
            raise xmlrpc.client.Fault(60, 'ALREADY_STARTED: %s' % name)
        self.pid, self.state = os.getpid(), 20
        return True

    def stopProcess(self, name, wait):
        self.calls.append(('stopProcess', name, wait))
        if not self.pid:
            raise xmlrpc.client.Fault(70, 'NOT_RUNNING: %s' % name)
        self.state = 40
        return True

    def getProcessInfo(self, name):
        self.calls.append(('getProcessInfo', name))
        if name != 'guest-agent':
            raise xmlrpc.client.Fault(10, 'BAD_NAME: %s' % name)
        if self.state == 40 and self.stops_after is not None:
            if self.stops_after == 0:
                self.pid, self.state = 0, 0
            self.stops_after -= 1
        return {'name': name, 'pid': self.pid, 'state': self.state}


class TestSupervisordRpcDriver(base.TestCase):
    """The XML-RPC driver against a real XML-RPC server on a UNIX socket."""

    def setUp(self):
        super().setUp()
        sock = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'supervisor.sock')
        server = _UnixXMLRPCServer(sock)
        self.supervisord = FakeSupervisord()
        server.register_instance(_Namespace(self.supervisord))
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        self.url = 'unix://' + sock
        self.driver = init_system.SupervisordRpcDriver('guest-agent',
                                                       self.url)

    def test_start_stop_pid(self):
        self.assertIsNone(self.driver.main_pid())
        self.driver.start()
        self.assertEqual(os.getpid(), self.driver.main_pid())
        self.driver.stop()
        self.assertIsNone(self.driver.main_pid())
        # Start returns once spawned; stop asks without waiting, then
        # watches the state until supervisord has reaped the process.
        self.assertEqual(
            [('getProcessInfo', 'guest-agent'),
             ('startProcess', 'guest-agent', False),
             ('getProcessInfo', 'guest-agent'),
             ('getProcessInfo', 'guest-agent'),
             ('stopProcess', 'guest-agent', False),
             ('getProcessInfo', 'guest-agent'),
             ('getProcessInfo', 'guest-agent'),
             ('getProcessInfo', 'guest-agent')], self.supervisord.calls)

    def test_already_started_and_not_running_are_fine(self):
        self.driver.start()
        self.driver.start()
        self.driver.stop()
        self.driver.stop()
        self.assertIsNone(self.driver.main_pid())

    def test_stop_kills_the_group_after_stop_timeout(self):
        killed = self.useFixture(fixtures.MockPatch(
            'trove_upgrade.agent.supervisor.signal_group')).mock
        killed.side_effect = lambda pid, signum: setattr(
            self.supervisord, 'stops_after', 0)
        self.driver.stop_timeout = 0.05
        self.driver.start()
        self.supervisord.stops_after = None
        self.driver.stop()
        killed.assert_called_once_with(os.getpid(), signal.SIGKILL)
        self.assertIsNone(self.driver.main_pid())

    def test_unknown_program_is_named(self):
        driver = init_system.SupervisordRpcDriver('nope', self.url)
        e = self.assertRaises(init_system.InitSystemError,
                              driver.main_pid)
        self.assertIn('BAD_NAME: nope', str(e))
        self.assertIsInstance(e, supervisor.GuestStartError)

    def test_unreachable_supervisord_is_named(self):
        driver = init_system.SupervisordRpcDriver(
            'guest-agent', self.url + '.missing')
        e = self.assertRaises(init_system.InitSystemError,
                              driver.stop)
        self.assertIn('cannot reach supervisord at %s.missing' % self.url,
                      str(e))

    def test_url_scheme_is_checked(self):
        e = self.assertRaises(init_system.InitSystemError,
                              init_system.SupervisordRpcDriver,
                              'guest-agent', '/var/run/supervisor.sock')
        self.assertIn('neither unix:// nor http://', str(e))

    def test_a_url_urllib_cannot_split_is_named(self):
        # ValueError: Invalid IPv6 URL, a traceback of trove-upgrade-adopt.
        e = self.assertRaises(init_system.InitSystemError,
                              init_system.SupervisordRpcDriver,
                              'guest-agent', 'http://[::1')
        self.assertEqual("supervisord_serverurl 'http://[::1' is not a URL: "
                         "Invalid IPv6 URL", str(e))


class _Namespace:
    """Serves ``supervisor.<method>`` as supervisord does."""

    def __init__(self, supervisord):
        self.supervisor = supervisord

    def _dispatch(self, method, params):
        prefix, _, name = method.partition('.')
        if prefix != 'supervisor':
            raise xmlrpc.client.Fault(1, 'UNKNOWN_METHOD')
        return getattr(self.supervisor, name)(*params)


class TestLoad(base.TestCase):

    def setUp(self):
        super().setUp()
        root = self.useFixture(fixtures.TempDir()).path
        self.installs = install.InstallRoot(root,
                                            journal.InstallRootLock(root))

    def driver(self, **overrides):
        self.flags(service_manager='supervisord', group='agent', **overrides)
        return init_system.load(self.conf, self.installs).driver

    def test_supervisord_serverurl_selects_xml_rpc(self):
        driver = self.driver(supervisord_serverurl='unix:///run/s.sock',
                             stop_timeout=0.5)
        self.assertIsInstance(driver, init_system.SupervisordRpcDriver)
        self.assertEqual('guest-agent', driver.program)
        self.assertEqual(0.5, driver.stop_timeout)

    def test_supervisorctl_without_serverurl(self):
        driver = self.driver()
        self.assertIsInstance(driver, init_system.SupervisordDriver)

    def test_systemd_gets_the_stop_timeout(self):
        self.flags(service_manager='systemd', stop_timeout=2.0,
                   group='agent')
        driver = init_system.load(self.conf, self.installs).driver
        self.assertEqual(2.0, driver.stop_timeout)
