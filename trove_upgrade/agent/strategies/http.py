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

"""The "http" strategy: a package on an HTTPS server, resumed after a break.

Locations are ``https://host[:port]/path`` (``http://`` only with
``[http] allow_insecure_http``), without credentials, query or fragment, so
that ``location + '.manifest'`` names the manifest. Redirects are not
followed: a redirect could leave TLS or the host the operator chose.

Each attempt ends at ``[agent] download_timeout``: the socket timeout
bounds one read, not their sum, so a watchdog shuts the connection down at
the attempt's deadline, and a server dripping its headers or body a byte a
time cannot hold the download (or the control plane's manifest fetch) for
longer. Text the server chose (status reason, Location) is quoted, bounded,
in the reasons.

A transfer broken mid-body resumes with ``Range: bytes=N-`` (and
``If-Range`` when the server gave a validator). A 206 is accepted only when
its Content-Range starts at N; a 200 restarts the file from zero.

Part of a package (``fetch_ranges``) is asked for with ``Range:
bytes=A-B``; only a 206 whose Content-Range is exactly ``A-B`` is read, at
most ``B - A + 1`` bytes of it. A 200 (a server that ignores ranges) is
:class:`~.exceptions.RangesNotServedError`, and the agent downloads the whole
package instead.
"""

import contextlib
import http.client
import re
import socket
import ssl
import urllib.parse

from trove_upgrade.agent.strategies import base
from trove_upgrade.agent.strategies import exception as exceptions
from trove_upgrade.conf import strategies as conf_strategies

_CONTENT_RANGE = re.compile(r'^bytes (\d+)-(\d+)/(\d+|\*)$')
_RETRIED_STATUSES = (408, 425, 429, 500, 502, 503, 504)
# RFC 3986 path characters, and '%' to keep the location's own escapes.
_PATH_SAFE = "/%:@!$&'()*+,;=~"


class _Target:
    def __init__(self, location, scheme, host, port, path):
        self.location = location
        self.scheme = scheme
        self.host = host
        self.port = port
        self.path = path
        self.validator = None


class HttpStrategy(base.Strategy):
    name = 'http'
    serves_ranges = True
    opt_group, opts = conf_strategies.STRATEGY_OPTS['http']

    def __init__(self, conf):
        super().__init__(conf)
        self._ssl_context = self._make_ssl_context()

    def parse_location(self, location):
        allowed = ('https', 'http') if self.settings.allow_insecure_http \
            else ('https',)
        parts = urllib.parse.urlsplit(location)
        if parts.scheme not in allowed:
            raise self.invalid(location, 'the scheme must be %s' % (
                ' or '.join(allowed) if len(allowed) > 1 else
                'https (plain http needs [http] allow_insecure_http)'))
        if parts.username is not None or parts.password is not None:
            raise self.invalid(location, 'credentials do not belong in the '
                                         'location; use a client '
                                         'certificate')
        try:
            port = parts.port
        except ValueError as exc:
            raise self.invalid(location, 'bad port (%s)' % exc)
        if not parts.hostname:
            raise self.invalid(location, 'it names no host')
        if parts.query or parts.fragment or location.endswith(('?', '#')):
            raise self.invalid(location, 'a query or fragment is not allowed '
                                         '(the manifest is fetched at '
                                         '<location>.manifest)')
        if not parts.path or parts.path.endswith('/'):
            raise self.invalid(location, 'it must name a file, not a '
                                         'directory')
        return _Target(location, parts.scheme, parts.hostname, port,
                       parts.path)

    def _check(self, target, deadline):
        conn = self._connection(target)
        with base.Watchdog(deadline) as watchdog, contextlib.closing(conn):
            watchdog.watch(conn)
            resp = self._request(conn, target, 'HEAD', {}, deadline)
        self._raise_for_status(target, resp)

    def _fetch_once(self, target, part_path, max_bytes, deadline):
        with open(part_path, 'ab') as out:
            offset = out.tell()
            headers = {}
            if offset:
                headers['Range'] = 'bytes=%d-' % offset
                if target.validator:
                    headers['If-Range'] = target.validator
            conn = self._connection(target)
            with base.Watchdog(deadline) as watchdog, \
                    contextlib.closing(conn):
                watchdog.watch(conn)
                resp = self._request(conn, target, 'GET', headers, deadline)
                offset = self._start_offset(target, resp, out, offset)
                announced = base.content_length(
                    resp.getheader('Content-Length'))
                if announced is not None and offset + announced > max_bytes:
                    raise self.too_big(
                        target.location, max_bytes,
                        'the server announced %d bytes'
                        % (offset + announced))
                chunk_size = self.settings.chunk_size
                chunks = iter(lambda: resp.read(chunk_size), b'')
                try:
                    written = self.write_capped(chunks, out, offset,
                                                target.location, max_bytes,
                                                deadline)
                except (http.client.HTTPException, OSError) as exc:
                    self.check_deadline(deadline)
                    raise exceptions.TransientError(
                        reason='the transfer broke after %d bytes: %s'
                               % (out.tell(), _describe(exc))) from exc
                # The watchdog's shutdown reads as the end of the body.
                self.check_deadline(deadline)
                if resp.length:
                    # http.client ends a body cut short of its
                    # Content-Length silently; resume it.
                    raise exceptions.TransientError(
                        reason='the connection closed after %d bytes, %d '
                               'bytes short of the announced length'
                               % (written, resp.length))
                return written

    def _fetch_range_once(self, target, out, start, length, deadline):
        end = start + length - 1
        conn = self._connection(target)
        with base.Watchdog(deadline) as watchdog, contextlib.closing(conn):
            watchdog.watch(conn)
            resp = self._request(conn, target, 'GET',
                                 {'Range': 'bytes=%d-%d' % (start, end)},
                                 deadline)
            self._raise_for_status(target, resp)
            if resp.status != 206:
                raise exceptions.RangesNotServedError(
                    location=target.location, strategy=self.name,
                    reason='it answered a range request with HTTP %d'
                           % resp.status)
            match = _CONTENT_RANGE.match(resp.getheader('Content-Range', ''))
            if not match or (int(match.group(1)),
                             int(match.group(2))) != (start, end):
                raise exceptions.RequestRejectedError(
                    location=target.location, strategy=self.name,
                    reason='it answered the range %d-%d with Content-Range '
                           '"%s"' % (start, end, base.server_text(
                               resp.getheader('Content-Range'))))
            chunk_size = self.settings.chunk_size
            chunks = iter(lambda: resp.read(chunk_size), b'')
            try:
                written = self.write_capped(chunks, out, 0, target.location,
                                            length, deadline)
            except (http.client.HTTPException, OSError) as exc:
                self.check_deadline(deadline)
                raise exceptions.TransientError(
                    reason='the transfer broke in the range at %d: %s'
                           % (start, _describe(exc))) from exc
            self.check_deadline(deadline)
            return written

    def _start_offset(self, target, resp, out, offset):
        """Position ``out`` where the response body starts."""
        if resp.status == 206 and offset:
            match = _CONTENT_RANGE.match(
                resp.getheader('Content-Range', ''))
            if match and int(match.group(1)) == offset:
                return offset
            out.truncate(0)
            content_range = base.server_text(resp.getheader('Content-Range'))
            raise exceptions.TransientError(
                reason='the server answered the resume request with '
                       'Content-Range "%s" instead of bytes %d-; starting '
                       'over' % (content_range, offset))
        if resp.status == 416 and offset:
            out.truncate(0)
            raise exceptions.TransientError(
                reason='the server refused to resume at byte %d; starting '
                       'over' % offset)
        self._raise_for_status(target, resp)
        if resp.status != 200:
            raise exceptions.RequestRejectedError(
                location=target.location, strategy=self.name,
                reason='unexpected HTTP status %d %s'
                       % (resp.status, base.server_text(resp.reason)))
        out.truncate(0)
        out.seek(0)
        target.validator = _strong_validator(resp)
        return 0

    def _connection(self, target):
        if target.scheme == 'https':
            return http.client.HTTPSConnection(
                target.host, target.port, timeout=self.timeout,
                context=self._ssl_context)
        return http.client.HTTPConnection(target.host, target.port,
                                          timeout=self.timeout)

    def _request(self, conn, target, method, headers, deadline):
        self.check_deadline(deadline)
        try:
            conn.request(method, urllib.parse.quote(target.path,
                                                    safe=_PATH_SAFE),
                         headers=headers)
            resp = conn.getresponse()
        except ssl.SSLError as exc:
            self.check_deadline(deadline)
            if 'CERTIFICATE' in (exc.reason or ''):
                raise exceptions.AccessDeniedError(
                    location=target.location, strategy=self.name,
                    reason='TLS certificate check failed: %s'
                           % _describe(exc)) from exc
            raise exceptions.TransientError(
                reason='TLS error: %s' % _describe(exc)) from exc
        except (http.client.HTTPException, OSError) as exc:
            self.check_deadline(deadline)
            raise exceptions.TransientError(
                reason='cannot reach %s: %s'
                       % (target.host, _describe(exc))) from exc
        # Headers the watchdog cut short parse as a whole response.
        self.check_deadline(deadline)
        return resp

    def _raise_for_status(self, target, resp):
        status = resp.status
        if status in (200, 206):
            return
        reason = 'HTTP %d %s' % (status, base.server_text(resp.reason))
        kwargs = {'location': target.location, 'strategy': self.name,
                  'reason': reason}
        if status in (404, 410):
            raise exceptions.ObjectNotFoundError(**kwargs)
        if status in (401, 403):
            raise exceptions.AccessDeniedError(**kwargs)
        if status in _RETRIED_STATUSES:
            raise exceptions.TransientError(reason=reason)
        if 300 <= status < 400:
            kwargs['reason'] = '%s to %s; redirects are not followed' % (
                reason, base.server_text(resp.getheader('Location')))
        raise exceptions.RequestRejectedError(**kwargs)

    def _make_ssl_context(self):
        settings = self.settings
        try:
            context = ssl.create_default_context(cafile=settings.ca_file)
            if settings.cert_file:
                context.load_cert_chain(settings.cert_file, settings.key_file)
        except (OSError, ssl.SSLError) as exc:
            raise exceptions.StrategyConfigError(
                name=self.name, path=self.conf.agent.strategy_config_dir,
                reason='cannot load the TLS files: %s' % _describe(exc))
        return context


def _strong_validator(resp):
    etag = resp.getheader('ETag')
    if etag and not etag.startswith('W/'):
        return etag
    return resp.getheader('Last-Modified')


def _describe(exc):
    if isinstance(exc, socket.timeout):
        return 'timed out'
    # http.client quotes what the server sent (a status line, say).
    return base.server_text(str(exc)) or exc.__class__.__name__
