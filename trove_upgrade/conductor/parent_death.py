"""Make a forked helper process end with the process that forked it.

The conductor's worker forks the rollout reconciler. When the worker dies
without stopping it (SIGKILL, the OOM killer, a crash), the service
launcher starts a new worker with a new reconciler, and the old one, now a
child of init, went on dispatching beside it. Linux's ``PR_SET_PDEATHSIG``
has the kernel signal the child when its parent dies, however it dies.
"""

import ctypes
import os
import signal
import sys

try:
    import setproctitle
except ImportError:  # cotyledon uses it when present; it is optional
    setproctitle = None

PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid, sig=signal.SIGTERM):
    """Have ``sig`` sent to this process when ``parent_pid`` dies.

    Call it first thing in the child: a parent that died before the
    request was in place is noticed by comparing ``getppid`` with the pid
    the parent had, and ``sig`` is sent at once.

    :returns: False where the platform has no such request (not Linux).
    :raises: OSError when the kernel refuses it.
    """
    if not sys.platform.startswith('linux'):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, 'prctl(PR_SET_PDEATHSIG): %s'
                      % os.strerror(errno))
    if os.getppid() != parent_pid:
        os.kill(os.getpid(), sig)
    return True


def set_title(title):
    """Name the process in ``ps`` so that operators can tell it apart."""
    if setproctitle is not None:
        setproctitle.setproctitle(title)
