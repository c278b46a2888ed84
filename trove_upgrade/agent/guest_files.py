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
"""Read a small text file that the instance's owner controls.

Trove's guest configuration, a guest agent's virtualenv and its systemd
unit are files on the tenant's instance. Whatever is in their place, a
reader gets the text or :class:`UnreadableFileError` with a bounded reason:

* a FIFO or a device (``/dev/zero``) would block or never end: only
  regular files are read, opened non-blocking;
* a file of gigabytes would exhaust memory: at most ``limit`` bytes are
  read, and a longer file is refused, not truncated;
* bytes that are not UTF-8, or a NUL, would raise deep inside a parser:
  they are refused here, naming the file.

:func:`write_text` replaces such a file durably and atomically (fsync,
rename, fsync of the directory), whatever stood at its temporary name: a
FIFO or a symlink planted there is removed, never opened or followed.

This module imports no other module of the agent: the untrusted child
(``trove_upgrade.agent.untrusted``) writes its result with it.
"""

import contextlib
import os
import stat

from trove_upgrade.common import exception
from trove_upgrade.common import exception as package_exc
from trove_upgrade.package_format import writeback

MAX_TEXT_FILE_SIZE = 1024 * 1024
MAX_REASON_LENGTH = 500


class UnreadableFileError(exception.TroveUpgradeError):
    """The file is missing, not a regular file, too big or not text."""

    def __init__(self, path, reason):
        super().__init__(bounded('%s: %s' % (package_exc.quoted(path),
                                             reason)))


def bounded(text):
    """``text`` cut to a reason short enough for one line of a log."""
    return package_exc.bounded(text, MAX_REASON_LENGTH)


def read_text(path, limit=MAX_TEXT_FILE_SIZE):
    """The UTF-8 text of the regular file ``path``, of at most ``limit``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise UnreadableFileError(path, e.strerror or str(e))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnreadableFileError(path, 'not a regular file')
        os.set_blocking(fd, True)
        with os.fdopen(fd, 'rb', closefd=False) as f:
            data = f.read(limit + 1)
    except OSError as e:
        raise UnreadableFileError(path, e.strerror or str(e))
    finally:
        os.close(fd)
    if len(data) > limit:
        raise UnreadableFileError(path, 'larger than %d bytes' % limit)
    try:
        text = data.decode('utf-8')
    except UnicodeDecodeError as e:
        raise UnreadableFileError(path, 'not UTF-8 text (byte %d)' % e.start)
    if '\x00' in text:
        raise UnreadableFileError(path, 'holds a NUL byte')
    return text


def write_text(path, text):
    """Replace ``path`` with ``text`` (mode 0644), durably and atomically.

    A FIFO left at the temporary name would block the open for ever, so
    whatever is there is removed first, and the file is created anew. On
    failure the temporary file is removed and the OSError raised.
    """
    tmp = path + '.tmp'
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        with open(tmp, 'x') as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
        writeback.fsync_directory(os.path.dirname(path))
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
