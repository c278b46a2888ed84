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

"""The "rsync" strategy: a package file served by an rsync daemon.

Locations are ``rsync://[user@]host[:port]/<module>/<path>``; the password
of ``user`` comes from ``[rsync] password_file``, never from the location.
The path may not hold wildcards, which the daemon would expand into other
files, nor ``..``.

The real ``rsync`` binary does the transfer, as the user of the step that
runs it (``[agent] untrusted_user``): the password file is read when the
strategy is loaded, while the step is still root, and handed to rsync
through a pipe (``--password-file=/dev/fd/N``), never by name or in the
environment. The size cap holds three
times: the listing must announce at most ``max_bytes``, ``--max-size``
makes rsync skip a file that grew since, and the rsync process runs with a
file-size resource limit of ``max_bytes``, so even a daemon that lies about
the size cannot make it write more.
"""

import os
import re
import resource
import time
import urllib.parse

from trove_upgrade.agent import child_process
from trove_upgrade.agent.strategies import base
from trove_upgrade.agent.strategies import exception as exceptions
from trove_upgrade.conf import strategies as conf_strategies

_UNSAFE = re.compile(r'[*?\[\]{}\\\s\x00-\x1f\x7f]')
# rsync exit statuses that a new attempt cannot fix: syntax or usage error,
# protocol incompatibility, unsupported action.
_PERMANENT_STATUSES = (1, 2, 4)
_LISTING = re.compile(r'^(\S)\S*\s+([\d,.]+)\s')
# Bytes of a listing read: one file's line, whatever the daemon sends.
_LISTING_LIMIT = 4096
# rsync reads at most 511 bytes of a password file.
_MAX_PASSWORD_FILE = 4096


class _Target:
    def __init__(self, location, url):
        self.location = location
        self.url = url


class RsyncStrategy(base.Strategy):
    name = 'rsync'
    opt_group, opts = conf_strategies.STRATEGY_OPTS['rsync']

    def __init__(self, conf):
        super().__init__(conf)
        self._password = None
        if self.settings.password_file:
            self._password = self._read_password(self.settings.password_file)

    def _read_password(self, path):
        """The password file's bytes, checked as rsync checks it."""
        try:
            with open(path, 'rb') as f:
                mode = os.fstat(f.fileno()).st_mode
                data = f.read(_MAX_PASSWORD_FILE + 1)
        except OSError as exc:
            reason = 'cannot read the password file: %s' % exc.strerror
        else:
            if mode & 0o006:
                reason = 'the password file must not be other-accessible'
            elif len(data) > _MAX_PASSWORD_FILE:
                reason = ('the password file holds more than %d bytes'
                          % _MAX_PASSWORD_FILE)
            else:
                return data
        raise exceptions.StrategyConfigError(
            name=self.name, path=path, reason=reason)

    def parse_location(self, location):
        parts = urllib.parse.urlsplit(location)
        if parts.scheme != 'rsync':
            raise self.invalid(location, 'the scheme must be rsync')
        if parts.password is not None:
            raise self.invalid(location, 'a password does not belong in the '
                                         'location; use [rsync] '
                                         'password_file')
        try:
            parts.port
        except ValueError as exc:
            raise self.invalid(location, 'bad port (%s)' % exc)
        if not parts.hostname:
            raise self.invalid(location, 'it names no host')
        if parts.query or parts.fragment or location.endswith(('?', '#')):
            raise self.invalid(location, 'a query or fragment is not allowed')
        if _UNSAFE.search(location):
            raise self.invalid(location, 'wildcards, backslashes, spaces and '
                                         'control characters are not '
                                         'allowed')
        segments = parts.path.split('/')[1:]
        if len(segments) < 2 or '' in segments:
            raise self.invalid(location, 'it must read rsync://host/'
                                         '<module>/<path to a file>')
        if '..' in segments or '.' in segments:
            raise self.invalid(location, 'the path must not contain "." or '
                                         '".." segments')
        return _Target(location, location)

    def _check(self, target, deadline):
        return self._listed_size(target, deadline)

    def _fetch_once(self, target, part_path, max_bytes, deadline):
        size = self._listed_size(target, deadline)
        if size > max_bytes:
            raise self.too_big(target.location, max_bytes,
                               'the daemon lists %d bytes' % size)
        base.remove_quietly(part_path)
        # Written from its directory: its parents may not be rsync's to
        # look up (the download step's /proc/self/fd/N is not rsync's).
        self._run(target, deadline,
                  ['--max-size=%d' % max_bytes, target.url,
                   os.path.basename(part_path)],
                  max_bytes=max_bytes, cwd=os.path.dirname(part_path))
        if not os.path.isfile(part_path):
            raise self.too_big(target.location, max_bytes,
                               'rsync skipped it as larger than the limit')
        written = os.path.getsize(part_path)
        if written > max_bytes:
            raise self.too_big(target.location, max_bytes,
                               'rsync wrote %d bytes' % written)
        return written

    def _listed_size(self, target, deadline):
        listing = self._run(target, deadline, ['--list-only', target.url])
        output = listing.head
        lines = output.splitlines()
        match = (_LISTING.match(lines[0])
                 if len(lines) == 1 and listing.complete else None)
        if match is None:
            raise exceptions.RequestRejectedError(
                location=target.location, strategy=self.name,
                reason='unexpected listing %r' % output[:200])
        if match.group(1) != '-':
            raise exceptions.RequestRejectedError(
                location=target.location, strategy=self.name,
                reason='it is not a regular file (%s)' % lines[0].strip())
        return int(re.sub(r'[,.]', '', match.group(2)))

    def _run(self, target, deadline, args, max_bytes=None, cwd=None):
        settings = self.settings
        io_timeout = str(max(1, int(self.timeout)))
        command = [settings.rsync_path, '--no-motd',
                   '--timeout=' + io_timeout, '--contimeout=' + io_timeout]
        self.check_deadline(deadline)
        try:
            with _PasswordPipe(self._password) as password:
                result = child_process.run(
                    command + password.args() + list(settings.extra_args)
                    + args, max(0.1, deadline - time.monotonic()),
                    head=_LISTING_LIMIT, env=_environment(),
                    preexec_fn=_file_size_limit(max_bytes),
                    pass_fds=password.fds(), cwd=cwd or None)
        except child_process.ChildTimeoutError as exc:
            raise exceptions.TransientError(
                reason='rsync did not finish within [agent] '
                       'download_timeout (%s s)' % self.timeout) from exc
        except OSError as exc:
            raise exceptions.RequestRejectedError(
                location=target.location, strategy=self.name,
                reason='cannot run %s: %s' % (settings.rsync_path, exc))
        if result.returncode != 0:
            self._raise_for(target, result.returncode, result.stderr.tail,
                            max_bytes)
        return result.stdout

    def _raise_for(self, target, status, stderr, max_bytes):
        detail = ' '.join(stderr.split())[:500]
        reason = 'rsync exited with status %d: %s' % (status, detail)
        kwargs = {'location': target.location, 'strategy': self.name,
                  'reason': reason}
        if 'File too large' in stderr and max_bytes is not None:
            raise self.too_big(target.location, max_bytes,
                               'the daemon sent more than it listed')
        if status == 23 and 'No such file or directory' in stderr:
            raise exceptions.ObjectNotFoundError(**kwargs)
        if status == 5:
            if '@ERROR: Unknown module' in stderr:
                raise exceptions.ObjectNotFoundError(**kwargs)
            if '@ERROR: auth failed' in stderr:
                raise exceptions.AccessDeniedError(**kwargs)
            if '@ERROR: max connections' not in stderr:
                raise exceptions.RequestRejectedError(**kwargs)
        if status in _PERMANENT_STATUSES:
            raise exceptions.RequestRejectedError(**kwargs)
        raise exceptions.TransientError(reason=reason)


class _PasswordPipe:
    """The password in a pipe rsync reads as ``/dev/fd/N``; closed after.

    The pipe is this process's: after the switch to the untrusted user,
    that user's, so rsync may open it, and nobody else.
    """

    def __init__(self, password):
        self._fd = None
        if password is None:
            return
        self._fd, writer = os.pipe()
        try:
            os.write(writer, password)
        finally:
            os.close(writer)

    def args(self):
        return [] if self._fd is None else [
            '--password-file=/dev/fd/%d' % self._fd]

    def fds(self):
        return () if self._fd is None else (self._fd,)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        if self._fd is not None:
            os.close(self._fd)


def _environment():
    """rsync must not pick a password or a remote shell from our env."""
    return {key: value for key, value in os.environ.items()
            if key not in ('RSYNC_PASSWORD', 'RSYNC_RSH', 'RSYNC_CONNECT_PROG',
                           'RSYNC_PROXY')}


def _file_size_limit(max_bytes):
    if max_bytes is None:
        return None

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, max_bytes))
    return limit
