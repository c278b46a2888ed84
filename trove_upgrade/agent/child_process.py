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

"""Run a program the agent does not control, in bounded time and memory.

The agent runs a package's health command (written by whoever built the
package), pip and the new install's interpreter, the service manager, the
guest state command and rsync. ``subprocess.run(stdout=PIPE)`` keeps all
they print until they end and kills only the direct child, so a broken or
hostile one could:

1. print without end (``yes``) until its timeout, hundreds of MiB or more
   held by the agent: each stream is read while the child runs and only
   its first ``head`` and last ``tail`` bytes are kept;
2. outlive its timeout through children it forked, which may also keep
   its output open: it runs in a session of its own, and its process
   group is killed when the call ends, whether by the timeout, by an
   exception (the agent stopping, say) or by the child's exit, so nothing
   it started is left running. A descendant that moves itself into a
   session of its own escapes, as from any process group;
3. outlive the agent: a ``kill -9`` of the agent leaves the child's
   session running. The programs the agent runs in an install (the guest
   agent, health commands, the virtualenv's creation, pip) have their
   install as working directory, so the next start finds them again
   (:func:`kill_orphans`);
4. put control characters (terminal escapes, NULs) into a reason the agent
   logs and reports: the text kept is decoded as UTF-8 with replacement
   and control characters other than newline and tab become ``?``
   (a carriage return, a newline).
"""

import os
import selectors
import signal
import subprocess
import time

from oslo_log import log as logging

from trove_upgrade.common import exception

LOG = logging.getLogger(__name__)

# Bytes kept from the end of each stream: enough for the last lines of a
# pip error or a traceback, whatever the child wrote before.
TAIL_BYTES = 8192
_READ_SIZE = 65536
_EXIT_POLL = 0.01
_KILL_WAIT = 10
# A carriage return (pip's progress bars, CRLF line ends) is a new line.
_UNPRINTABLE = {**{c: '?' for c in [*range(0x20), *range(0x7f, 0xa0)]
                   if chr(c) not in '\n\t'}, ord('\r'): '\n'}


class ChildTimeoutError(exception.TroveUpgradeError):
    msg_fmt = '%(program)s did not finish within %(timeout)gs'


def printable(data):
    """``data`` (bytes) as text that is safe to log and report."""
    return data.decode('utf-8', 'replace').translate(_UNPRINTABLE)


class Output:
    """The start and the end of what a child wrote on one stream."""

    def __init__(self, head, tail):
        self._head_limit = head
        self._tail_limit = tail
        self._head = bytearray()
        self._tail = bytearray()
        self.size = 0

    def feed(self, data):
        self.size += len(data)
        room = self._head_limit - len(self._head)
        if room > 0:
            self._head += data[:room]
        self._tail += data
        extra = len(self._tail) - self._tail_limit
        if extra > 0:
            del self._tail[:extra]

    @property
    def complete(self):
        """Whether the head holds everything the child wrote."""
        return self.size <= self._head_limit

    @property
    def head(self):
        return printable(self._head)

    @property
    def tail(self):
        return printable(self._tail)


class Finished:
    """A child that exited: its status and what it wrote, bounded."""

    def __init__(self, returncode, stdout, stderr):
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr


def run(argv, timeout, merge_stderr=False, head=0, tail=TAIL_BYTES,
        **popen_args):
    """Run ``argv`` with no input for at most ``timeout`` seconds.

    Returns a :class:`Finished` whose ``stdout`` and ``stderr`` are
    :class:`Output` (``stderr`` is empty with ``merge_stderr``, which sends
    it to stdout). Raises :class:`ChildTimeoutError` when the child has not
    exited and closed its output by then, ``OSError`` when it cannot run.
    ``popen_args`` (``env``, ``cwd``, ``preexec_fn``) go to ``Popen``.
    """
    deadline = time.monotonic() + timeout
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
        start_new_session=True, **popen_args)
    try:
        stdout, stderr = Output(head, tail), Output(head, tail)
        streams = {proc.stdout: stdout}
        if not merge_stderr:
            streams[proc.stderr] = stderr
        if not (_read(streams, deadline) and _exited(proc, deadline)):
            raise ChildTimeoutError(program=os.path.basename(str(argv[0])),
                                    timeout=timeout)
    finally:
        _kill_group(proc)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    return Finished(proc.returncode, stdout, stderr)


def _read(streams, deadline):
    """Feed each pipe into its Output until all close; False on deadline."""
    with selectors.DefaultSelector() as selector:
        for pipe in streams:
            selector.register(pipe, selectors.EVENT_READ)
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            for key, _ in selector.select(left):
                data = os.read(key.fd, _READ_SIZE)
                if data:
                    streams[key.fileobj].feed(data)
                else:
                    selector.unregister(key.fileobj)
    return True


def _exited(proc, deadline):
    """Wait for ``proc`` to exit, leaving it unreaped; False on deadline.

    Unreaped, its pid cannot be reused, so killing its process group
    afterwards cannot reach another program's.
    """
    while True:
        if os.waitid(os.P_PID, proc.pid,
                     os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(_EXIT_POLL)


def _kill_group(proc):
    """Kill ``proc`` and what it started, then reap ``proc``."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(_KILL_WAIT)
    except subprocess.TimeoutExpired:
        LOG.error('Child process %d does not die', proc.pid)


def proc_start_time(pid):
    """Start time of a live, non-zombie process, or None.

    With the pid, it names one process: a pid the kernel gave again has
    another start time.
    """
    try:
        with open('/proc/%d/stat' % pid) as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError, ValueError):
        return None
    fields = stat[stat.rindex(')') + 2:].split()
    if fields[0] in ('Z', 'X'):
        return None
    return int(fields[19])


def kill_orphans(directory, keep=()):
    """SIGKILL every process working in ``directory``; return their pids.

    Never this process nor the pids in ``keep``.
    """
    skip = set(keep) | {os.getpid()}
    killed = []
    for name in os.listdir('/proc'):
        if not name.isdigit() or int(name) in skip:
            continue
        pid = int(name)
        try:
            cwd = os.readlink('/proc/%d/cwd' % pid)
        except OSError:
            continue
        if cwd != directory and not cwd.startswith(directory + os.sep):
            continue
        if proc_start_time(pid) is None:
            continue
        LOG.warning('Killing orphaned process %d running in %s', pid, cwd)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
        killed.append(pid)
    return killed
