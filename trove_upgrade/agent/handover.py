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

"""The hand-over watcher: a process of its own between two agents.

An agent upgrading itself cannot restart itself and check the result: it
is what stops. It records the hand-over in the journal (the versions and a
deadline, ``agent.self_upgrade``) and starts this watcher, which holds
``handover.lock`` in the agent's install root for as long as it runs, so
there is never more than one, and any agent can tell whether one runs.

The watcher, step by step, each step idempotent so that a watcher started
again after a ``kill -9`` carries on where the killed one stopped:

1. ``handover``: a trial start of the new version
   (:meth:`AgentRestarter.start_trial`): ``current`` points at it only
   until the new agent's process runs from it, then at the previous
   version again, so that whatever ends the new agent before it confirms
   (a crash, a ``kill -9``), its service manager starts the previous one,
   which records FAILED. ``restarted`` records that the trial was made.
2. Past the deadline, unconfirmed (the new agent hangs, cannot reach the
   bus): record ``rolling_back`` with the reason, point ``current`` at
   the previous version and restart the service; the previous agent
   records FAILED when it runs.

systemd kills a unit's whole control group on restart, so there the
watcher starts outside the unit (``systemd-run``); supervisord ends only
the program's process, so the agent's program needs ``autorestart=true``:
the watcher ends the running agent and supervisord starts the one
``current`` points at.
"""

import fcntl
import os
import shlex
import signal
import subprocess
import sys
import time

from oslo_log import log as logging

from trove_upgrade.agent import child_process
from trove_upgrade.agent import init_system
from trove_upgrade.agent import install
from trove_upgrade.agent import journal as journal_mod
from trove_upgrade.agent import pause_hook
from trove_upgrade.common import exception
from trove_upgrade.common import rpc_interface

LOG = logging.getLogger(__name__)

HANDOVER = 'handover'
ROLLING_BACK = 'rolling_back'
LOCK_NAME = 'handover.lock'
LOG_NAME = 'handover.log'
# The lock file of the agent's own install root (agent.service).
AGENT_LOCK = 'agent.lock'

_spawned = []


class HandoverError(exception.TroveUpgradeError):
    """The agent's service could not be restarted."""


def _lock_path(conf):
    root = conf.self_upgrade.install_root
    os.makedirs(root, mode=0o755, exist_ok=True)
    return os.path.join(root, LOCK_NAME)


def _try_lock(path):
    """An fd holding ``path``'s exclusive lock, or None when taken."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def watcher_running(conf):
    fd = _try_lock(_lock_path(conf))
    if fd is None:
        return True
    os.close(fd)
    return False


def watcher_argv(conf):
    """The watcher's command line: this agent's interpreter and files."""
    argv = [sys.executable, '-m', 'trove_upgrade.agent.handover']
    # Registered when the command line is parsed, as the agent's is.
    for path in getattr(conf, 'config_file', None) or ():
        argv += ['--config-file', path]
    if getattr(conf, 'config_dir', None):
        argv += ['--config-dir', conf.config_dir]
    if conf.self_upgrade.service_manager == 'systemd':
        argv = ['systemd-run', '--quiet', '--collect', '--'] + argv
    return argv


def ensure_watcher(conf):
    """Start the watcher unless one runs; True when this call started it."""
    # One this agent started may not hold the lock yet.
    _spawned[:] = [p for p in _spawned if p.poll() is None]
    if _spawned or watcher_running(conf):
        return False
    log_path = os.path.join(conf.self_upgrade.install_root, LOG_NAME)
    with open(log_path, 'ab') as log:
        _spawned.append(subprocess.Popen(
            watcher_argv(conf), stdin=subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True,
            close_fds=True))
    LOG.info('Started the hand-over watcher (pid %d)', _spawned[-1].pid)
    return True


def _alive(pid, start_time):
    return child_process.proc_start_time(pid) == start_time


def terminate(pid, timeout):
    """SIGTERM ``pid``, SIGKILL it after ``timeout`` s; wait for its end."""
    start_time = child_process.proc_start_time(pid)
    if start_time is None:
        return
    for signum, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10)):
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not _alive(pid, start_time):
                return
            time.sleep(0.1)


def _cmdline(pid):
    try:
        with open('/proc/%d/cmdline' % pid, 'rb') as f:
            return f.read().decode(errors='replace')
    except OSError:
        return ''


class AgentRestarter:
    """Restarts trove-upgrade-agent by ``[self_upgrade] service_manager``.

    A trial start (:meth:`start_trial`) starts a version once: the program
    link points at it only until the new process runs from it, so that
    the service manager's next start of the agent, whatever ended the new
    one, starts the previous version; the new agent points the link at
    itself when it confirms (``agent.self_upgrade``).
    """

    def __init__(self, conf, installs):
        self.conf = conf
        self.installs = installs
        self.kind = conf.self_upgrade.service_manager
        name = conf.self_upgrade.service_name
        agent = conf.agent
        self.driver = None
        if self.kind == 'systemd':
            self.unit = name if '.' in name else name + '.service'
            self.systemctl = shlex.split(agent.systemctl_command)
        elif self.kind == 'supervisord':
            if agent.supervisord_serverurl:
                self.driver = init_system.SupervisordRpcDriver(
                    name, agent.supervisord_serverurl, agent.stop_timeout)
            else:
                self.driver = init_system.SupervisordDriver(
                    name, agent.supervisorctl_command)

    def agent_pid(self):
        """The running agent's pid, or None: the holder of its lock."""
        path = os.path.join(self.conf.agent.install_root, AGENT_LOCK)
        fd = _try_lock(path)
        if fd is not None:
            os.close(fd)
            return None
        try:
            with open(path) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return None

    def _service_pid(self):
        if self.driver is not None:
            return self.driver.main_pid()
        return self.agent_pid()

    def restart(self, version=None):
        """Stop the running agent and start ``version`` (None: current)."""
        if self.kind == 'systemd':
            self._systemctl('restart')
            return
        pid = self._service_pid()
        if pid is not None:
            terminate(pid, self.conf.agent.stop_timeout)
        if self.kind == 'builtin':
            self._start_builtin(version)
        elif pid is None:
            # Not restarted by supervisord: it was not running.
            self.driver.start()

    def start_trial(self, version, previous):
        """Start ``version`` once; the link stays at ``previous``."""
        if self.kind == 'builtin':
            self.restart(version)
            return
        old = self._service_pid()
        self.installs.switch(version)
        try:
            self.restart()
            self._wait_started(version, old)
        finally:
            self.installs.switch(previous)

    def _wait_started(self, version, old):
        """Until a new agent process runs from ``version``'s install."""
        where = self.installs.path(version) + os.sep
        deadline = time.monotonic() + self.conf.agent.stop_timeout + 60
        while time.monotonic() < deadline:
            try:
                pid = self._service_pid()
            except init_system.InitSystemError:
                pid = None
            if pid and pid != old and where in _cmdline(pid):
                return
            time.sleep(0.05)
        LOG.warning('No agent of %s started; the next start of the '
                    'service starts the previous version', version)

    def _systemctl(self, action):
        argv = self.systemctl + [action, self.unit]
        try:
            proc = child_process.run(argv, timeout=120, merge_stderr=True)
        except (child_process.ChildTimeoutError, OSError) as e:
            raise HandoverError('%s: %s' % (shlex.join(argv), e))
        if proc.returncode != 0:
            raise HandoverError('%s exited with %d: %s' % (
                shlex.join(argv), proc.returncode,
                proc.stdout.tail.strip()[-500:]))

    def _start_builtin(self, version):
        command = self.conf.self_upgrade.agent_command
        if not command:
            raise HandoverError('[self_upgrade] agent_command must be set '
                                'with service_manager = builtin')
        where = (self.installs.path(version) if version
                 else self.installs.current_link)
        subprocess.Popen(install.resolve_command(command, where),
                         stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True,
                         close_fds=True)


def unfinished(upgrade):
    """Whether ``upgrade`` is a hand-over the watcher carries on."""
    return (bool(upgrade)
            and upgrade.get('component') == rpc_interface.UPGRADE_AGENT
            and upgrade.get('step') in (HANDOVER, ROLLING_BACK))


class Watcher:
    """Carries one hand-over through to its confirmation or its rollback."""

    def __init__(self, conf, journal, installs, restarter):
        self.conf = conf
        self.journal = journal
        self.installs = installs
        self.restarter = restarter

    def _mark(self, upgrade, **changes):
        """Apply ``changes`` when the journal still holds ``upgrade``."""
        with self.journal.update() as data:
            current = data['current_upgrade']
            if not (current and current['id'] == upgrade['id']
                    and current['step'] == upgrade['step']):
                return False
            current.update(changes)
        return True

    def _why(self, upgrade):
        limit = self.conf.self_upgrade.handover_timeout
        if self.restarter.agent_pid() is None:
            return ('upgrade agent %s is not running %ds after the '
                    'hand-over' % (upgrade['to_version'], limit))
        return ('upgrade agent %s did not register and confirm the upgrade '
                'within %ds' % (upgrade['to_version'], limit))

    def run(self):
        """Watch until the hand-over ends; the exit status."""
        interval = self.conf.self_upgrade.watch_interval
        rollback_deadline = None
        while True:
            upgrade = self.journal.read()['current_upgrade']
            if not unfinished(upgrade):
                LOG.info('The hand-over ended')
                return 0
            step = upgrade['step']
            if step == HANDOVER and time.time() > upgrade['deadline']:
                reason = self._why(upgrade)
                LOG.warning('Upgrade %s: %s; rolling back to %s',
                            upgrade['id'], reason, upgrade['from_version'])
                self._mark(upgrade, step=ROLLING_BACK, detail=reason,
                           restarted=False)
                continue
            if upgrade.get('restarted'):
                if step == ROLLING_BACK:
                    rollback_deadline = rollback_deadline or (
                        time.monotonic()
                        + self.conf.self_upgrade.handover_timeout)
                    if time.monotonic() > rollback_deadline:
                        LOG.error('Upgrade %s: the previous agent %s did '
                                  'not record the rollback; the next one '
                                  'to start does', upgrade['id'],
                                  upgrade['from_version'])
                        return 1
                time.sleep(interval)
                continue
            pause_hook.pause_once(self.installs.root, 'watcher-' + step)
            try:
                if step == HANDOVER:
                    LOG.info('Upgrade %s: starting upgrade agent %s',
                             upgrade['id'], upgrade['to_version'])
                    self.restarter.start_trial(upgrade['to_version'],
                                               upgrade['from_version'])
                else:
                    self.installs.switch(upgrade['from_version'])
                    LOG.info('Upgrade %s: restarting upgrade agent %s',
                             upgrade['id'], upgrade['from_version'])
                    self.restarter.restart()
            except Exception as e:
                LOG.error('Upgrade %s: restarting the agent failed: %s',
                          upgrade['id'], e)
                time.sleep(interval)
                continue
            self._mark(upgrade, restarted=True)


def main(argv=None):
    """``python -m trove_upgrade.agent.handover --config-file ...``."""
    # The agent's configuration, its log on stderr (handover.log).
    from trove_upgrade import conf as conf_mod
    from trove_upgrade.conf import agent as agent_conf
    conf = conf_mod.CONF
    agent_conf.set_defaults(conf)
    conf(sys.argv[1:] if argv is None else argv, project='trove-upgrade',
         prog='trove-upgrade-handover')
    conf.set_override('log_file', None)
    conf.set_override('use_stderr', True)
    logging.setup(conf, 'trove-upgrade-handover')
    fd = _try_lock(_lock_path(conf))
    if fd is None:
        LOG.info('Another hand-over watcher runs')
        return 0
    journal = journal_mod.UpgradeJournal(conf.agent.install_root)
    installs = install.InstallRoot(conf.self_upgrade.install_root,
                                   journal.lock)
    watcher = Watcher(conf, journal, installs,
                      AgentRestarter(conf, installs))
    try:
        return watcher.run()
    finally:
        os.close(fd)


if __name__ == '__main__':
    sys.exit(main())
