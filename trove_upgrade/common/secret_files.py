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

"""The one way a key file is read and the one way it is written.

Every secret this project keeps in a file (instance keys, the master key
of the instance keys, package signing and decryption keys) goes through
here, so each is held to the same rules:

* **Reading** refuses, with :class:`InsecureKeyFileError`, a file that
  another user could have planted or can read: a symbolic link (opened
  with ``O_NOFOLLOW``, so no race between a check and the open), anything
  but a regular file, a file owned by another user than the reader or
  root, or one whose mode gives the group, others or execution any bit
  (0600 and 0400 pass). The checks are made on the open descriptor.
* **Writing** never opens a name someone else could have created: the
  data goes to a new file made by ``tempfile.mkstemp`` beside the target
  (``O_EXCL``, owned by the writer), given mode 0600 by its descriptor,
  fsynced, then renamed over the target (or linked to it, when an
  existing file must not be replaced), and the directory fsynced, so a
  crash leaves the old file or the new one, never a part.
"""

import contextlib
import errno
import os
import stat
import tempfile

from trove_upgrade.common import exception as exceptions

MAX_SECRET_FILE_SIZE = 64 * 1024
SECRET_FILE_MODE = 0o600

# Group, others, and the owner's execution bit: none may be set.
_FORBIDDEN_MODE_BITS = 0o177


class InsecureKeyFileError(exceptions.KeyFileError):
    """A key file is a link, or not owned or not kept private as required."""


def _refuse_unsafe(path, status):
    if not stat.S_ISREG(status.st_mode):
        raise InsecureKeyFileError('key file %s is not a regular file' % path)
    uid = os.geteuid()
    if status.st_uid not in (uid, 0):
        raise InsecureKeyFileError(
            'key file %s is owned by uid %d, not by uid %d or root: another '
            'user may have planted it' % (path, status.st_uid, uid))
    mode = stat.S_IMODE(status.st_mode)
    if mode & _FORBIDDEN_MODE_BITS:
        raise InsecureKeyFileError(
            'key file %s has mode %04o; it must be 0600 or 0400'
            % (path, mode))


def read_secret_file(path, max_size=MAX_SECRET_FILE_SIZE):
    """The bytes of the key file ``path`` once it passed the checks.

    :raises: InsecureKeyFileError for a link, a special file, another
        user's file or a file others may read; KeyFileError when it
        cannot be read or holds more than ``max_size`` bytes.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
                     | os.O_CLOEXEC)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise InsecureKeyFileError(
                'key file %s is a symbolic link; give the file itself'
                % path)
        raise exceptions.KeyFileError('cannot read key file %s: %s'
                                      % (path, e.strerror or e))
    with os.fdopen(fd, 'rb') as source:
        _refuse_unsafe(path, os.fstat(source.fileno()))
        try:
            data = source.read(max_size + 1)
        except OSError as e:
            raise exceptions.KeyFileError('cannot read key file %s: %s'
                                          % (path, e.strerror or e))
    if len(data) > max_size:
        raise exceptions.KeyFileError('%s is too large for a key file'
                                      % path)
    return data


def _fsync_directory(directory):
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def secret_file_writer(path, replace=True):
    """Yield ``write(data)``, which puts the bytes ``data`` at ``path``.

    The temporary file is created before the block runs, so a path that
    cannot be written (a missing directory, a directory) fails before the
    block does anything a file should record. It is removed unless
    ``write`` moved it to ``path``. With ``replace`` false an existing
    ``path`` is kept and :class:`KeyFileExistsError` raised.
    """
    if os.path.isdir(path or os.curdir):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR),
                                path)
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(
            prefix='.%s.' % os.path.basename(path), suffix='.tmp',
            dir=directory)
    except OSError as e:
        # Named by the path given, not by the temporary file's.
        raise type(e)(e.errno, e.strerror, path) from None
    out = os.fdopen(fd, 'wb')

    def write(data):
        with out:
            os.fchmod(out.fileno(), SECRET_FILE_MODE)
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        if replace:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)
            except FileExistsError:
                raise exceptions.KeyFileExistsError(
                    '%s already exists; refusing to overwrite a key file'
                    % path) from None
            os.unlink(tmp)
        _fsync_directory(directory)

    try:
        yield write
    finally:
        out.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def write_secret_file(path, data, replace=True):
    """Put the bytes ``data`` at ``path``, mode 0600, crash-safely."""
    with secret_file_writer(path, replace=replace) as write:
        write(data)
