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

"""Start, stop and health-check the guest agent process.

The guest agent runs in its own session, so it survives the upgrade agent:
a ``kill -9`` of the updater must not take the guest down. Its pid, start
time and version go to ``guest.pid`` in the install root, so a restarted
updater adopts the running guest agent instead of starting a second one;
the start time (from ``/proc``) protects against a recycled pid.

Healthy means alive for ``health_grace`` seconds and then the health
command passing, and the ``probe`` (for a Trove guest agent, the RPC ping of
its topic, ``agent/trove_guest.py``) answering, within ``health_timeout``:
a guest agent that starts but does not work is as bad as one that does not
start. A probe that got an answer other than healthy (a :class:`Refused`
reason) ends the check at once: asking again gets the same answer.
"""

import json
import os
import signal
import subprocess
import time

from oslo_log import log as logging

from trove_upgrade.agent import child_process
from trove_upgrade.agent import guest_files
from trove_upgrade.agent import install
from trove_upgrade.common import exception

LOG = logging.getLogger(__name__)

PIDFILE = 'guest.pid'
LOG_DIR = 'logs'
# guest.pid holds one small JSON object; anything larger is not ours.
MAX_PIDFILE_SIZE = 4096
_POLL = 0.05
# The guest agent is down from SIGTERM on: its exit is watched closely, so
# the next start follows it at once.
_EXIT_POLL = 0.005


class GuestStartError(exception.TroveUpgradeError):
    """The guest agent did not start or did not become healthy."""


class Refused(str):
    """A probe's reason from a guest agent that answered: final."""


def signal_group(pid, signum):
    """Signal the process group ``pid`` leads, else the process alone."""
    try:
        os.killpg(pid, signum)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass


class GuestSupervisor:
    """Runs ``guest_command`` from the current install."""

    def __init__(self, installs, guest_command, stop_timeout=10.0,
                 probe=None):
        self.installs = installs
        self.probe = probe
        self.guest_command = guest_command
        self.stop_timeout = stop_timeout
        self.pidfile = os.path.join(installs.root, PIDFILE)
        self.log_dir = os.path.join(installs.root, LOG_DIR)
        self._proc = None
        self._record = None

    # Process bookkeeping.

    def _read_pidfile(self):
        try:
            record = json.loads(guest_files.read_text(self.pidfile,
                                                      MAX_PIDFILE_SIZE))
            return {'pid': int(record['pid']),
                    'start_time': int(record['start_time']),
                    'version': install.check_version_name(
                        record['version'])}
        # RecursionError: JSON nested thousands deep; OverflowError: a
        # pid of 1e999.
        except (guest_files.UnreadableFileError, ValueError, KeyError,
                TypeError, RecursionError, OverflowError,
                install.InstallError):
            return None

    def _write_pidfile(self, record):
        guest_files.write_text(self.pidfile, json.dumps(record))

    def _alive(self, record):
        if record is None:
            return False
        if self._proc is not None and self._proc.pid == record['pid']:
            if self._proc.poll() is not None:
                return False
        return (child_process.proc_start_time(record['pid'])
                == record['start_time'])

    def adopt(self):
        """Take over a guest agent left running by a previous updater."""
        record = self._read_pidfile()
        if self._alive(record):
            self._record = record
            LOG.info('Adopted running guest agent %s (pid %d)',
                     record['version'], record['pid'])
            return True
        return False

    def sweep_orphans(self):
        """Kill processes left in an install by a killed updater.

        The guest agent and the health commands run with their install as
        working directory (``child_process.kill_orphans``). One that is
        not the recorded guest agent was started by an updater killed
        before it could record or reap it (between starting a guest agent
        and writing ``guest.pid``, say); left alone, it would run beside
        the one this agent starts.
        """
        keep = [self._record['pid']] if self.is_running() else []
        return child_process.kill_orphans(self.installs.versions_dir, keep)

    def is_running(self):
        return self._alive(self._record)

    def running_version(self):
        """Version of the running guest agent, or None."""
        return self._record['version'] if self.is_running() else None

    def exit_status(self):
        """Exit status of a guest agent this process started and lost."""
        if self._proc is not None:
            return self._proc.poll()
        return None

    # Start and stop.

    def start(self):
        """Start the guest agent from ``current``; return its version."""
        version = self.installs.current_version()
        if version is None:
            raise GuestStartError('no guest agent is installed '
                                  '(%s does not exist)'
                                  % self.installs.current_link)
        if not self.guest_command:
            raise GuestStartError('[agent] guest_command is not set')
        install_dir = self.installs.path(version)
        argv = install.resolve_command(self.guest_command, install_dir)
        os.makedirs(self.log_dir, exist_ok=True)
        log_path = os.path.join(self.log_dir, 'guest-agent.log')
        with open(log_path, 'ab') as log_file:
            try:
                proc = subprocess.Popen(
                    argv, cwd=install_dir, stdin=subprocess.DEVNULL,
                    stdout=log_file, stderr=subprocess.STDOUT,
                    start_new_session=True)
            except OSError as e:
                raise GuestStartError('cannot start the guest agent %s: %s'
                                      % (version, e))
        start_time = child_process.proc_start_time(proc.pid)
        self._proc = proc
        self._record = {'pid': proc.pid, 'start_time': start_time or 0,
                        'version': version}
        self._write_pidfile(self._record)
        LOG.info('Started guest agent %s (pid %d)', version, proc.pid)
        return version

    def stop(self):
        """Stop the guest agent: SIGTERM, then SIGKILL after stop_timeout."""
        record = self._record or self._read_pidfile()
        if record is None or not self._alive(record):
            self._forget()
            return
        pid = record['pid']
        LOG.info('Stopping guest agent %s (pid %d)', record['version'], pid)
        signal_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + self.stop_timeout
        while self._alive(record) and time.monotonic() < deadline:
            time.sleep(_EXIT_POLL)
        if self._alive(record):
            LOG.warning('Guest agent pid %d still runs %.1fs after SIGTERM, '
                        'killing it', pid, self.stop_timeout)
            signal_group(pid, signal.SIGKILL)
            while self._alive(record):
                time.sleep(_EXIT_POLL)
        self._forget()

    def _forget(self):
        if self._proc is not None:
            self._proc.poll()
        self._proc = None
        self._record = None
        try:
            os.unlink(self.pidfile)
        except FileNotFoundError:
            pass

    # Health.

    def check_health(self, health_command, grace, timeout):
        """Return None when the running guest agent is healthy, else why."""
        record = self._record
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if not self._alive(record):
                return self._died_reason(grace)
            time.sleep(_POLL)
        if not self._alive(record):
            return self._died_reason(grace)
        if not health_command and self.probe is None:
            return None
        install_dir = self.installs.path(record['version'])
        deadline = time.monotonic() + timeout
        failure = None
        command_passed = not health_command
        while True:
            left = deadline - time.monotonic()
            if not command_passed:
                reason = install.run_health_command(
                    health_command, install_dir, install.RUNNING,
                    max(left, 0.1))
                command_passed = reason is None
            if command_passed:
                reason = self.probe() if self.probe is not None else None
            if reason is None:
                if self._alive(record):
                    return None
                return self._died_reason(grace)
            if isinstance(reason, Refused):
                return reason
            if not reason.startswith(install.HEALTH_TIMED_OUT) or not failure:
                failure = reason
            if time.monotonic() >= deadline:
                return failure
            if not self._alive(record):
                return self._died_reason(grace)
            time.sleep(min(0.2, max(deadline - time.monotonic(), 0)))

    def _died_reason(self, grace):
        status = self.exit_status()
        if status is None:
            return 'the guest agent exited within %.1fs of its start' % grace
        return ('the guest agent exited with status %d within %.1fs of its '
                'start' % (status, grace))

    def restart(self, health_command, grace, timeout, retries,
                on_started=None, keep_unhealthy=False):
        """Restart from ``current`` until healthy, at most ``retries`` times.

        ``on_started`` is called after each start, before the health check.

        Returns the version now running; raises GuestStartError with the
        last reason when every attempt failed, leaving nothing running,
        unless ``keep_unhealthy`` (a rollback: the last known good running
        unhealthy is better than none) leaves the last start running.
        """
        reason = None
        for attempt in range(1, retries + 1):
            self.stop()
            version = self.start()
            if on_started is not None:
                on_started()
            reason = self.check_health(health_command, grace, timeout)
            if reason is None:
                return version
            LOG.warning('Guest agent %s unhealthy (attempt %d of %d): %s',
                        version, attempt, retries, reason)
        if not keep_unhealthy:
            self.stop()
        raise GuestStartError('guest agent %s failed %d start attempt(s): '
                              '%s' % (version, retries, reason))
