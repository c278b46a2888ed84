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

"""The "local" strategy: a package already on the guest's file system.

Locations are ``file:///abs/path`` or ``/abs/path``. The path, after its
symbolic links are resolved, must lie inside one of ``[local]
allowed_dirs`` and name a regular file, so that whoever can order an
upgrade cannot make the agent read ``/etc/shadow``, a device or a FIFO.
"""

import errno
import os
import stat
import urllib.parse

from trove_upgrade.agent.strategies import base
from trove_upgrade.agent.strategies import exception as exceptions
from trove_upgrade.conf import strategies as conf_strategies

_PERMANENT_ERRNOS = (errno.ENOENT, errno.ENOTDIR, errno.EACCES, errno.EPERM,
                     errno.ELOOP, errno.EISDIR)


class LocalStrategy(base.Strategy):
    name = 'local'
    serves_ranges = True
    opt_group, opts = conf_strategies.STRATEGY_OPTS['local']

    def parse_location(self, location):
        if location.startswith('file:'):
            parts = urllib.parse.urlsplit(location)
            if parts.netloc not in ('', 'localhost'):
                raise self.invalid(location, 'a file: URL must not name a '
                                             'remote host')
            if parts.query or parts.fragment:
                raise self.invalid(location, 'a query or fragment is not '
                                             'allowed')
            path = urllib.parse.unquote(parts.path)
        else:
            path = location
        if '\0' in path:
            raise self.invalid(location, 'the path contains a NUL byte')
        if not os.path.isabs(path):
            raise self.invalid(location, 'the path must be absolute')
        if '..' in path.split('/'):
            raise self.invalid(location, 'the path must not contain ".."')
        if path.endswith('/'):
            raise self.invalid(location, 'it must name a file, not a '
                                         'directory')
        return path

    def _check(self, path, deadline):
        fd = self._open(path, path)
        os.close(fd)

    def _fetch_once(self, path, part_path, max_bytes, deadline):
        fd = self._open(path, path)
        with os.fdopen(fd, 'rb') as src, open(part_path, 'wb') as out:
            size = os.fstat(src.fileno()).st_size
            if size > max_bytes:
                raise self.too_big(path, max_bytes,
                                   'the file holds %d bytes' % size)
            chunk_size = self.settings.chunk_size
            try:
                return self.write_capped(
                    iter(lambda: src.read(chunk_size), b''), out, 0, path,
                    max_bytes, deadline)
            except OSError as exc:
                raise exceptions.TransientError(
                    reason='reading %s failed: %s' % (path, exc)) from exc

    def _fetch_range_once(self, path, out, start, length, deadline):
        fd = self._open(path, path)
        with os.fdopen(fd, 'rb') as src:
            try:
                src.seek(start)
                return self.write_capped(
                    _read_at_most(src, length, self.settings.chunk_size),
                    out, 0, path, length, deadline)
            except OSError as exc:
                raise exceptions.TransientError(
                    reason='reading %s failed: %s' % (path, exc)) from exc

    def _open(self, location, path):
        """Open ``path`` read-only once it is proven safe to read."""
        real = os.path.realpath(path)
        if not any(_inside(real, allowed) for allowed in self._allowed()):
            raise exceptions.AccessDeniedError(
                location=location, strategy=self.name,
                reason='%s is outside [local] allowed_dirs (%s)'
                       % (real, ', '.join(self.settings.allowed_dirs)))
        try:
            fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
                         | os.O_CLOEXEC)
        except OSError as exc:
            error = exceptions.TransientError
            kwargs = {'reason': '%s: %s' % (real, exc.strerror)}
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                error = exceptions.ObjectNotFoundError
            elif exc.errno in _PERMANENT_ERRNOS:
                error = exceptions.AccessDeniedError
            if error is not exceptions.TransientError:
                kwargs.update(location=location, strategy=self.name)
            raise error(**kwargs) from exc
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise exceptions.AccessDeniedError(
                location=location, strategy=self.name,
                reason='%s is not a regular file' % real)
        os.set_blocking(fd, True)
        return fd

    def _allowed(self):
        return [os.path.realpath(d) for d in self.settings.allowed_dirs
                if os.path.isabs(d)]


def _read_at_most(source, length, chunk_size):
    while length > 0:
        block = source.read(min(chunk_size, length))
        if not block:
            return
        length -= len(block)
        yield block


def _inside(path, directory):
    return os.path.commonpath([path, directory]) == directory \
        and path != directory
