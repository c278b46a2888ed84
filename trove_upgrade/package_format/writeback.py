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

"""Getting written bytes to disk: a head start, and a directory's names.

:func:`fsync_directory` makes the names created or renamed in a directory
durable, for every atomic rename of the packaging code and of the agent.

:func:`start` starts writing a file's new pages without waiting for them.

Linux holds written pages in memory until a flusher thread or ``fsync``
takes them, and with the default dirty ratios a package of a few GiB
stays entirely in memory until its ``fsync``: the disk then works only
after the CPU has finished. ``sync_file_range(SYNC_FILE_RANGE_WRITE)``
starts the writeback of a range at once and returns, so the disk writes
one part while the next is decrypted, and the ``fsync`` that makes the
file durable finds little left. It is only a head start: durability still
comes from ``fsync`` alone, so where the call is missing (not Linux, not
glibc) or fails, nothing but speed is lost, and its errors are ignored
(a real I/O error is reported by the ``fsync``).

Python's ``os`` has no ``sync_file_range``; ctypes calls libc's, and
releases the GIL while it runs.
"""

import ctypes
import os

SYNC_FILE_RANGE_WRITE = 2


def _load():
    try:
        # The process's own symbols, libc's among them: no library search.
        function = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError, TypeError):
        return None
    function.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64,
                         ctypes.c_uint)
    function.restype = ctypes.c_int
    return function


_sync_file_range = _load()
AVAILABLE = _sync_file_range is not None


def start(fd, offset, length):
    """Start writing ``length`` bytes of ``fd`` from ``offset`` to disk."""
    if _sync_file_range is not None:
        _sync_file_range(fd, offset, length, SYNC_FILE_RANGE_WRITE)


def fsync_directory(path):
    """Make the names created or renamed in directory ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
