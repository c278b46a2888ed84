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

Drivers: ``systemd`` (systemctl) and ``supervisord`` (supervisorctl).
systemd cannot run as PID 1 on the test machines, so the functional tests
drive supervisord, a real service manager, through the same supervisor
class, and the unit tests check the exact systemctl command lines.
"""

import os
import shlex
import subprocess

from oslo_log import log as logging

from trove_upgrade.agent import journal as journal_mod
from trove_upgrade.agent import supervisor as supervisor_mod

LOG = logging.getLogger(__name__)

DROP_IN_NAME = 'trove-upgrade.conf'
UNIT_DIRS = ('/etc/systemd/system', '/lib/systemd/system',
             '/usr/lib/systemd/system')
_OUTPUT_LIMIT = 500
_TIMEOUT = 120


class ServiceManagerError(supervisor_mod.GuestStartError):
    """The service manager refused or failed a command."""


def _run(argv, timeout=_TIMEOUT):
    try:
        proc = subprocess.run(argv, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ServiceManagerError('%s timed out after %ds'
                                  % (shlex.join(argv), timeout))
    except OSError as e:
        raise ServiceManagerError('%s cannot run: %s'
                                  % (shlex.join(argv), e))
    return proc.returncode, proc.stdout.strip()[-_OUTPUT_LIMIT:]


def _check(argv):
    status, output = _run(argv)
    if status != 0:
        raise ServiceManagerError('%s exited with %d: %s'
                                  % (shlex.join(argv), status, output))
    return output


class SystemdDriver:
    """``systemctl`` on one unit."""

    name = 'systemd'

    def __init__(self, unit, systemctl='systemctl',
                 unit_dir=UNIT_DIRS[0]):
        self.unit = unit if '.' in unit else unit + '.service'
        self.systemctl = shlex.split(systemctl)
        self.unit_dir = unit_dir

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
            raise ServiceManagerError('systemctl gave no MainPID for %s: %r'
                                      % (self.unit, output))
        return pid or None

    def unit_path(self):
        for directory in (self.unit_dir,) + UNIT_DIRS:
            path = os.path.join(directory, self.unit)
            if os.path.isfile(path):
                return path
        raise ServiceManagerError('unit %s not found in %s'
                                  % (self.unit, ', '.join(UNIT_DIRS)))

    def exec_start(self):
        """The unit's ExecStart command, split (the last one wins)."""
        path = self.unit_path()
        found = None
        section = None
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith('['):
                    section = line
                elif section == '[Service]' and line.startswith(
                        'ExecStart='):
                    found = line[len('ExecStart='):].strip() or None
        if not found:
            raise ServiceManagerError('%s has no ExecStart in [Service]'
                                      % path)
        return shlex.split(found.lstrip('-@:+!'))

    def drop_in_path(self):
        return os.path.join(self.unit_dir, self.unit + '.d', DROP_IN_NAME)

    def point_at(self, program):
        """Make the unit run ``program`` with its own arguments.

        Writes a drop-in replacing ExecStart only (User=, ExecStartPre and
        the rest of the unit stay) and reloads systemd; the running guest
        agent is not restarted. Returns the drop-in's path.
        """
        argv = [program] + self.exec_start()[1:]
        text = ('# Written by trove-upgrade: run the guest agent from the '
                'current install.\n[Service]\nExecStart=\nExecStart=%s\n'
                % shlex.join(argv))
        path = self.drop_in_path()
        _write_atomic(path, text)
        _check(self.systemctl + ['daemon-reload'])
        return path


class SupervisordDriver:
    """``supervisorctl`` on one program."""

    name = 'supervisord'

    def __init__(self, program, supervisorctl='supervisorctl'):
        self.program = program
        self.supervisorctl = shlex.split(supervisorctl)

    def start(self):
        status, output = _run(self.supervisorctl + ['start', self.program])
        if status != 0 and 'already started' not in output:
            raise ServiceManagerError('supervisorctl start %s exited with '
                                      '%d: %s' % (self.program, status,
                                                  output))

    def stop(self):
        status, output = _run(self.supervisorctl + ['stop', self.program])
        if status != 0 and 'not running' not in output:
            raise ServiceManagerError('supervisorctl stop %s exited with '
                                      '%d: %s' % (self.program, status,
                                                  output))

    def main_pid(self):
        status, output = _run(self.supervisorctl + ['pid', self.program])
        try:
            pid = int(output.splitlines()[-1])
        except (ValueError, IndexError):
            if 'no such process' in output.lower():
                raise ServiceManagerError('supervisord has no program %s'
                                          % self.program)
            return None
        return pid or None

    def point_at(self, program):
        """supervisord's program line is written by the image, not here."""
        return None


def _write_atomic(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + '.tmp'
    with open(tmp, 'w') as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    journal_mod.fsync_dir(os.path.dirname(path))


class ServiceManagedSupervisor(supervisor_mod.GuestSupervisor):
    """The built-in supervisor's contract, carried out by a driver."""

    def __init__(self, installs, driver, stop_timeout=10.0, probe=None):
        super().__init__(installs, None, stop_timeout, probe=probe)
        self.driver = driver

    def _record_pid(self, pid, version):
        start_time = supervisor_mod._proc_start_time(pid)
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
        except ServiceManagerError as e:
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
                               agent.systemd_unit_dir)
    else:
        driver = SupervisordDriver(agent.service_name,
                                   agent.supervisorctl_command)
    return ServiceManagedSupervisor(installs, driver, agent.stop_timeout,
                                    probe=probe)
