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

"""The user the untrusted steps run as, and root's take-over of their work.

A TLS, HTTP or rsync client talking to a hostile server, or a parser bug
in the package's checks, must not land as root. The download and verify
steps (:mod:`.untrusted`) start as root only to read what root alone may
read (the keys, the strategy's settings and secrets), then
:func:`drop` switches the process to ``[agent] untrusted_user`` for good,
non-dumpable, in a directory that user owns (:func:`give`). Root then
takes over only what it needs of that directory, checked in order:

1. :func:`open_owned` opens a file without following a link, without
   blocking on a FIFO, and only when it is a regular file with one link,
   owned by the untrusted user, of at most the size allowed;
2. :func:`copy_verified` copies a wheel into root's own directory and
   compares the copy's size and SHA-256 with the signed manifest's, so
   that a file changed after its check (by any process of that user) is
   refused, not installed.
"""

import ctypes
import hashlib
import os
import pwd
import stat

from trove_upgrade.common import exception

_PR_SET_DUMPABLE = 4
_COPY_SIZE = 1024 * 1024


class UntrustedUserError(exception.TroveUpgradeError):
    msg_fmt = '[agent] untrusted_user %(user)s cannot be used: %(reason)s'


class TakeOverError(exception.TroveUpgradeError):
    msg_fmt = 'refused %(path)s from the unprivileged step: %(reason)s'


def ids(conf):
    """``(uid, gid)`` of ``[agent] untrusted_user``, or None.

    None when the option is empty or the agent is not root: it then has
    no privilege to give up.
    """
    name = conf.agent.untrusted_user
    if not name or os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise UntrustedUserError(user=name, reason='no such user')
    if entry.pw_uid == 0 or entry.pw_gid == 0:
        raise UntrustedUserError(user=name,
                                 reason='its user or group is root')
    return entry.pw_uid, entry.pw_gid


def give(path, user_ids):
    """Make the directory ``path`` the untrusted user's, private."""
    if user_ids is not None:
        os.chown(path, *user_ids, follow_symlinks=False)
    os.chmod(path, 0o700, follow_symlinks=False)


def drop(user_ids):
    """Become the untrusted user for good; nothing else may trace us.

    Not dumpable: another process of the same user cannot read this one's
    memory (the decryption key) through ptrace or ``/proc``.
    """
    uid, gid = user_ids
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), 'prctl(PR_SET_DUMPABLE) failed')
    try:
        os.setuid(0)
    except PermissionError:
        return
    raise UntrustedUserError(user=uid, reason='root could be regained')


def open_owned(dir_fd, name, owner, max_size):
    """A read-only fd of regular file ``name`` in ``dir_fd``, checked.

    ``owner`` is the uid that must own it (None: this process's).
    """
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
                     | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError as e:
        raise TakeOverError(path=name, reason=e.strerror)
    try:
        st = os.fstat(fd)
        expected = os.geteuid() if owner is None else owner
        if not stat.S_ISREG(st.st_mode):
            reason = 'not a regular file'
        elif st.st_nlink != 1:
            reason = 'it has %d links' % st.st_nlink
        elif st.st_uid != expected:
            reason = 'owned by uid %d, not %d' % (st.st_uid, expected)
        elif st.st_size > max_size:
            reason = '%d bytes, more than the %d allowed' % (st.st_size,
                                                             max_size)
        else:
            return fd
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)
    raise TakeOverError(path=name, reason=reason)


def open_dir(path, owner, dir_fd=None):
    """An fd of directory ``path`` (not a link) owned by ``owner``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
                     | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError as e:
        raise TakeOverError(path=path, reason=e.strerror)
    expected = os.geteuid() if owner is None else owner
    uid = os.fstat(fd).st_uid
    if uid != expected:
        os.close(fd)
        raise TakeOverError(path=path, reason='owned by uid %d, not %d'
                            % (uid, expected))
    return fd


def left(dir_fd, name):
    """Whether the child left an entry ``name`` (copy_verified checks it)."""
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def copy_verified(dir_fd, entry, owner, dest):
    """Copy file ``entry`` (a manifest's) from ``dir_fd`` to new ``dest``.

    The copy must have the size and SHA-256 the signed manifest gives;
    ``dest`` is root's, made with ``O_EXCL`` and synced.
    """
    if os.path.basename(entry.name) != entry.name:
        raise TakeOverError(path=entry.name, reason='not a file name')
    source = open_owned(dir_fd, entry.name, owner, entry.size)
    try:
        digest = hashlib.sha256()
        size = 0
        with open(os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL
                          | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644),
                  'wb') as out:
            while size <= entry.size:
                block = os.read(source, _COPY_SIZE)
                if not block:
                    break
                size += len(block)
                digest.update(block)
                out.write(block)
            out.flush()
            os.fsync(out.fileno())
    finally:
        os.close(source)
    if size != entry.size or digest.hexdigest() != entry.sha256.lower():
        raise TakeOverError(path=entry.name,
                            reason='it changed after its verification')
