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

"""Run the guest agent through the guest's own service manager.

Trove's images start the guest agent with systemd (``guest-agent.service``,
with ``User=`` and ``ExecStartPre`` steps that must keep running). The
agent then does not start the process itself: it asks the service manager
to start or stop the service, reads the service's main pid back, and keeps
the same pid + start-time record as the built-in supervisor, so switch,
restart, health check and rollback work unchanged. The service always runs
``<install_root>/current/...``: for systemd a drop-in replaces only
``ExecStart``, with the unit's own arguments; everything else in the unit
stays as the image made it.

Drivers: ``systemd`` (systemctl) and ``supervisord`` (its XML-RPC
interface when ``[agent] supervisord_serverurl`` is set, else supervisorctl).
Every supervisorctl run is a Python start-up on the restart's critical
path, which is why the XML-RPC interface is preferred.
systemd cannot run as PID 1 on the test machines, so the functional tests
drive supervisord, a real service manager, through the same supervisor
class, and the unit tests check the exact systemctl command lines.
"""

import http.client
import os
import shlex
import signal
import socket
import time
import xmlrpc.client

from oslo_log import log as logging

from trove_upgrade.agent import child_process
from trove_upgrade.agent import guest_files
from trove_upgrade.agent import supervisor as supervisor_mod
from trove_upgrade.common import exception as package_exc

LOG = logging.getLogger(__name__)

DROP_IN_NAME = 'trove-upgrade.conf'
UNIT_DIRS = ('/etc/systemd/system', '/lib/systemd/system',
             '/usr/lib/systemd/system')
_OUTPUT_LIMIT = 500
_TIMEOUT = 120


class InitSystemError(supervisor_mod.GuestStartError):
    """The service manager refused or failed a command."""


def _run(argv, timeout=_TIMEOUT):
    try:
        proc = child_process.run(argv, timeout=timeout, merge_stderr=True)
    except child_process.ChildTimeoutError:
        raise InitSystemError('%s timed out after %ds'
                              % (shlex.join(argv), timeout))
    except OSError as e:
        raise InitSystemError('%s cannot run: %s'
                              % (shlex.join(argv), e))
    return proc.returncode, proc.stdout.tail.strip()[-_OUTPUT_LIMIT:]


def _check(argv):
    status, output = _run(argv)
    if status != 0:
        raise InitSystemError('%s exited with %d: %s'
                              % (shlex.join(argv), status, output))
    return output


class SystemdDriver:
    """``systemctl`` on one unit."""

    name = 'systemd'

    def __init__(self, unit, systemctl='systemctl',
                 unit_dir=UNIT_DIRS[0], stop_timeout=None):
        self.unit = unit if '.' in unit else unit + '.service'
        self.systemctl = shlex.split(systemctl)
        self.unit_dir = unit_dir
        self.stop_timeout = stop_timeout

    def start(self):
        _check(self.systemctl + ['start', self.unit])

    def stop(self):
        _check(self.systemctl + ['stop', self.unit])

    def main_pid(self):
        output = _check(self.systemctl + ['show', '--property=MainPID',
                                          '--value', self.unit])
        try:
            pid = int(output.splitlines()[-1])
        except (ValueError, IndexError):
            raise InitSystemError('systemctl gave no MainPID for %s: %r'
                                  % (self.unit, output))
        return pid or None

    def unit_path(self):
        for directory in (self.unit_dir,) + UNIT_DIRS:
            path = os.path.join(directory, self.unit)
            if os.path.isfile(path):
                return path
        raise InitSystemError('unit %s not found in %s'
                              % (self.unit, ', '.join(UNIT_DIRS)))

    def exec_start(self):
        """The unit's ExecStart command, split (the last one wins)."""
        path = self.unit_path()
        try:
            text = guest_files.read_text(path)
        except guest_files.UnreadableFileError as e:
            raise InitSystemError('cannot read the unit: %s' % e)
        found = None
        section = None
        for line in text.splitlines():
            line = line.strip()
            if line.startswith('['):
                section = line
            elif section == '[Service]' and line.startswith('ExecStart='):
                found = line[len('ExecStart='):].strip() or None
        if not found:
            raise InitSystemError('%s has no ExecStart in [Service]'
                                  % path)
        try:
            return shlex.split(found.lstrip('-@:+!'))
        except ValueError as e:
            raise InitSystemError(guest_files.bounded(
                '%s: ExecStart %s cannot be split: %s'
                % (path, package_exc.quoted(found), e)))

    def drop_in_path(self):
        return os.path.join(self.unit_dir, self.unit + '.d', DROP_IN_NAME)

    def point_at(self, program):
        """Make the unit run ``program`` with its own arguments.

        Writes a drop-in replacing ExecStart (User=, ExecStartPre and the
        rest of the unit stay) and, with ``stop_timeout``, TimeoutStopSec,
        so systemd kills the guest agent after SIGTERM when the built-in
        supervisor would; then reloads systemd. A drop-in that says so
        already is left alone, without a reload: adoption runs before
        every start of the agent (``install/guest-image.rst``). The
        running guest agent is not restarted. Returns the drop-in's path.
        """
        argv = [program] + self.exec_start()[1:]
        text = ('# Written by trove-upgrade: run the guest agent from the '
                'current install.\n[Service]\nExecStart=\nExecStart=%s\n'
                % shlex.join(argv))
        if self.stop_timeout:
            text += 'TimeoutStopSec=%dms\n' % round(self.stop_timeout * 1000)
        path = self.drop_in_path()
        try:
            if guest_files.read_text(path) == text:
                return path
        except guest_files.UnreadableFileError:
            pass  # absent, or not ours to keep: written anew
        os.makedirs(os.path.dirname(path), exist_ok=True)
        guest_files.write_text(path, text)
        self.reload()
        return path

    def reload(self):
        """Make systemd read its units and drop-ins again."""
        _check(self.systemctl + ['daemon-reload'])


class SupervisordDriver:
    """``supervisorctl`` on one program."""

    name = 'supervisord'

    def __init__(self, program, supervisorctl='supervisorctl'):
        self.program = program
        self.supervisorctl = shlex.split(supervisorctl)

    def start(self):
        status, output = _run(self.supervisorctl + ['start', self.program])
        if status != 0 and 'already started' not in output:
            raise InitSystemError('supervisorctl start %s exited with '
                                  '%d: %s' % (self.program, status,
                                              output))

    def stop(self):
        status, output = _run(self.supervisorctl + ['stop', self.program])
        if status != 0 and 'not running' not in output:
            raise InitSystemError('supervisorctl stop %s exited with '
                                  '%d: %s' % (self.program, status,
                                              output))

    def main_pid(self):
        status, output = _run(self.supervisorctl + ['pid', self.program])
        try:
            pid = int(output.splitlines()[-1])
        except (ValueError, IndexError):
            if 'no such process' in output.lower():
                raise InitSystemError('supervisord has no program %s'
                                      % self.program)
            return None
        return pid or None

    def point_at(self, program):
        """supervisord's program line is written by the image, not here."""
        return None


# supervisord's fault codes (supervisor/xmlrpc.py).
_ALREADY_STARTED = 60
_NOT_RUNNING = 70
# STOPPED, EXITED, FATAL, UNKNOWN (supervisor/states.py).
_STOPPED_STATES = (0, 100, 200, 1000)
_STOP_POLL = 0.005


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__('localhost', timeout=timeout)
        self.socket_path = path

    def connect(self):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self.socket_path)
        self.sock = sock


class _Transport(xmlrpc.client.Transport):
    """HTTP to a UNIX socket or a TCP port, with a timeout."""

    def __init__(self, socket_path, timeout):
        super().__init__()
        self.socket_path = socket_path
        self.timeout = timeout

    def make_connection(self, host):
        if self.socket_path:
            return _UnixConnection(self.socket_path, self.timeout)
        return http.client.HTTPConnection(host, timeout=self.timeout)


class SupervisordRpcDriver:
    """supervisord's XML-RPC interface, on one program.

    ``serverurl`` is supervisorctl's: ``unix:///path/to/supervisor.sock``
    or ``http://host:port``. ``stop`` asks supervisord for the program's
    stop signal, watches until supervisord has reaped the process, and
    kills the process group itself after ``stop_timeout`` (supervisord's
    own ``stopwaitsecs`` is whole seconds, and the image's choice).
    ``start`` returns once the process is spawned, without supervisord's
    ``startsecs`` wait: the agent's own health check follows.
    """

    name = 'supervisord'

    def __init__(self, program, serverurl, stop_timeout=10.0,
                 timeout=_TIMEOUT):
        self.program = program
        self.serverurl = serverurl
        self.stop_timeout = stop_timeout
        if serverurl.startswith('unix://'):
            transport = _Transport(serverurl[len('unix://'):], timeout)
            url = 'http://localhost/RPC2'
        elif serverurl.startswith(('http://', 'https://')):
            transport = _Transport(None, timeout)
            url = serverurl.rstrip('/') + '/RPC2'
        else:
            raise InitSystemError(
                'supervisord_serverurl %r is neither unix:// nor http://'
                % serverurl)
        try:
            self.proxy = xmlrpc.client.ServerProxy(url, transport=transport)
        # urllib's, for an unclosed "[": it ended adoption in a traceback.
        except ValueError as e:
            raise InitSystemError('supervisord_serverurl %r is not a '
                                  'URL: %s' % (serverurl, e))

    def _call(self, method, *args, accept=()):
        try:
            return getattr(self.proxy.supervisor, method)(*args)
        except xmlrpc.client.Fault as e:
            if e.faultCode in accept:
                return None
            raise InitSystemError('supervisord %s(%s) failed: %s'
                                  % (method, self.program,
                                     e.faultString))
        except (OSError, xmlrpc.client.Error, http.client.HTTPException) as e:
            raise InitSystemError('cannot reach supervisord at %s: %s'
                                  % (self.serverurl, e))

    def start(self):
        self._call('startProcess', self.program, False,
                   accept=(_ALREADY_STARTED,))

    def stop(self):
        pid = self.main_pid()
        if self._call('stopProcess', self.program, False,
                      accept=(_NOT_RUNNING,)) is None:
            return
        deadline = time.monotonic() + self.stop_timeout
        killed = False
        while self._call('getProcessInfo',
                         self.program)['state'] not in _STOPPED_STATES:
            if pid and not killed and time.monotonic() >= deadline:
                LOG.warning('Guest agent pid %d still runs %.1fs after its '
                            'stop signal, killing it', pid,
                            self.stop_timeout)
                supervisor_mod.signal_group(pid, signal.SIGKILL)
                killed = True
            time.sleep(_STOP_POLL)

    def main_pid(self):
        info = self._call('getProcessInfo', self.program)
        return info.get('pid') or None

    def point_at(self, program):
        """supervisord's program line is written by the image, not here."""
        return None


class InitSystemSupervisor(supervisor_mod.GuestSupervisor):
    """The built-in supervisor's contract, carried out by a driver."""

    def __init__(self, installs, driver, stop_timeout=10.0, probe=None):
        super().__init__(installs, None, stop_timeout, probe=probe)
        self.driver = driver

    def _record_pid(self, pid, version):
        start_time = child_process.proc_start_time(pid)
        if start_time is None:
            return None
        record = {'pid': pid, 'start_time': start_time, 'version': version}
        self._record = record
        self._write_pidfile(record)
        return record

    def adopt(self):
        """Take over the guest agent the service manager runs now.

        The service runs ``current``: a process the record does not know
        (started at boot, or restarted by the service manager) is the
        current version.
        """
        try:
            pid = self.driver.main_pid()
        except InitSystemError as e:
            LOG.warning('Cannot ask %s for the guest agent: %s',
                        self.driver.name, e)
            return False
        if pid is None:
            return False
        record = self._read_pidfile()
        if record and record['pid'] == pid and self._alive(record):
            self._record = record
        else:
            version = self.installs.current_version()
            if version is None or self._record_pid(pid, version) is None:
                return False
        LOG.info('Adopted guest agent %s (pid %d) run by %s',
                 self._record['version'], pid, self.driver.name)
        return True

    def sweep_orphans(self):
        """The service manager owns the guest agent's processes."""
        return []

    def exit_status(self):
        return None

    def start(self):
        version = self.installs.current_version()
        if version is None:
            raise supervisor_mod.GuestStartError(
                'no guest agent is installed (%s does not exist)'
                % self.installs.current_link)
        self.driver.start()
        pid = self.driver.main_pid()
        if pid is None or self._record_pid(pid, version) is None:
            raise supervisor_mod.GuestStartError(
                '%s started the guest agent %s but it is not running'
                % (self.driver.name, version))
        LOG.info('%s started guest agent %s (pid %d)', self.driver.name,
                 version, pid)
        return version

    def stop(self):
        self.driver.stop()
        self._forget()


def load(conf, installs, probe=None):
    """The supervisor ``[agent] service_manager`` names."""
    agent = conf.agent
    if agent.service_manager == 'builtin':
        return supervisor_mod.GuestSupervisor(
            installs, agent.guest_command, agent.stop_timeout, probe=probe)
    if agent.service_manager == 'systemd':
        driver = SystemdDriver(agent.service_name, agent.systemctl_command,
                               agent.systemd_unit_dir, agent.stop_timeout)
    elif agent.supervisord_serverurl:
        driver = SupervisordRpcDriver(agent.service_name,
                                      agent.supervisord_serverurl,
                                      agent.stop_timeout)
    else:
        driver = SupervisordDriver(agent.service_name,
                                   agent.supervisorctl_command)
    return InitSystemSupervisor(installs, driver, agent.stop_timeout,
                                probe=probe)
