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

"""The "swift" strategy: a package object in the operator's Swift account.

Locations:

* ``swift://<container>/<object>``: the object in the account of the
  credentials of ``swift.conf``;
* ``swift:<object>``: the same in ``[swift] default_container``;
* ``http(s)://<host>/v1/<account>/<container>/<object>``, the form of the
  Trove design, accepted only when it lies under the storage URL the
  credentials authenticate to: the token is never sent anywhere else.

Credentials come from Keystone v3 through a keystoneauth session, or from
Swift's own v1 auth (tempauth). Each attempt authenticates afresh and makes
one request to the object with swiftclient's functions; the base class
retries. Part of a package (``fetch_ranges``) is a ranged GET, read only
when Swift answers 206 with exactly the range asked for.

Each attempt ends at ``[agent] download_timeout``: every connection the
attempt opens (to Keystone, to the v1 auth URL, to the object server) goes
through a requests transport that hands it to a :class:`~.base.Watchdog`
and closes it when the attempt ends, so a server dripping its status line,
headers or body a byte at a time cannot hold the download for longer. The
same transport bounds every body read whole (swiftclient reads an error's,
keystoneauth the token's) at :data:`~.bounded_body.MAX_WHOLE_BODY`: a
longer one fails the attempt, not retried, with nothing more read. Text the
server chose (status reason, error messages) is quoted, bounded, in the
reasons.
"""

import contextlib
import functools
import re
import socket
import urllib.parse

from keystoneauth1 import exceptions as ksa_exc
from keystoneauth1.identity import v3
from keystoneauth1 import session as ksa_session
import requests
from swiftclient import client as swift_client
import urllib3

from trove_upgrade.agent.strategies import base
from trove_upgrade.agent.strategies import bounded_body
from trove_upgrade.agent.strategies import exception as exceptions
from trove_upgrade.conf import strategies as conf_strategies

_MAX_CONTAINER = 256
_MAX_OBJECT = 1024
# Transport errors quote URLs and causes: room for them, but bounded.
_MAX_ERROR_TEXT = 300
_CONTENT_RANGE = re.compile(r'^bytes (\d+)-(\d+)/(\d+|\*)$')


class _Target:
    def __init__(self, location, container, obj, storage_url=None):
        self.location = location
        self.container = container
        self.obj = obj
        self.storage_url = storage_url


class SwiftStrategy(base.Strategy):
    name = 'swift'
    serves_ranges = True
    opt_group, opts = conf_strategies.STRATEGY_OPTS['swift']

    def __init__(self, conf):
        super().__init__(conf)
        missing = [opt for opt in ('auth_url', 'user', 'key')
                   if not getattr(self.settings, opt)]
        if missing:
            raise exceptions.StrategyConfigError(
                name=self.name, path=conf.agent.strategy_config_dir,
                reason='[swift] %s must be set' % ', '.join(missing))

    def parse_location(self, location):
        parts = urllib.parse.urlsplit(location)
        if parts.query or parts.fragment or location.endswith(('?', '#')):
            raise self.invalid(location, 'a query or fragment is not allowed '
                                         '(the manifest is object '
                                         '<object>.manifest)')
        if parts.scheme == 'swift' and location.startswith('swift://'):
            container = urllib.parse.unquote(parts.netloc)
            obj = parts.path[1:]
            storage_url = None
        elif parts.scheme == 'swift':
            container = self.settings.default_container
            if not container:
                raise self.invalid(location, 'it names no container and '
                                             '[swift] default_container is '
                                             'not set')
            obj = parts.path
            storage_url = None
        elif parts.scheme in ('http', 'https'):
            segments = parts.path.split('/', 4)
            if len(segments) != 5 or segments[0] or segments[1] != 'v1' \
                    or not segments[2]:
                raise self.invalid(location, 'an http(s) location must read '
                                             'http(s)://host/v1/<account>/'
                                             '<container>/<object>')
            container, obj = urllib.parse.unquote(segments[3]), segments[4]
            storage_url = '%s://%s/v1/%s' % (parts.scheme, parts.netloc,
                                             segments[2])
        else:
            raise self.invalid(location, 'the scheme must be swift, or '
                                         'http(s) for a Swift storage URL')
        obj = urllib.parse.unquote(obj)
        if not container or '/' in container or \
                len(container.encode()) > _MAX_CONTAINER:
            raise self.invalid(location, 'the container name must be 1 to '
                                         '%d bytes without "/"'
                               % _MAX_CONTAINER)
        if not obj or obj.endswith('/') or len(obj.encode()) > _MAX_OBJECT:
            raise self.invalid(location, 'the object name must be 1 to %d '
                                         'bytes and not end with "/"'
                               % _MAX_OBJECT)
        return _Target(location, container, obj, storage_url)

    def _check(self, target, deadline):
        with self._attempt(target, deadline) as (url, token, http_conn):
            swift_client.head_object(url, token, target.container,
                                     target.obj, http_conn=http_conn)

    def _fetch_once(self, target, part_path, max_bytes, deadline):
        with self._attempt(target, deadline) as (url, token, http_conn), \
                open(part_path, 'wb') as out:
            headers, body = swift_client.get_object(
                url, token, target.container, target.obj,
                http_conn=http_conn, resp_chunk_size=self.settings.chunk_size)
            with contextlib.closing(body):
                announced = base.content_length(headers.get('content-length'))
                if announced is not None and announced > max_bytes:
                    raise self.too_big(target.location, max_bytes,
                                       'the object holds %d bytes'
                                       % announced)
                written = self.write_capped(body, out, 0, target.location,
                                            max_bytes, deadline)
        if announced is not None and written != announced:
            raise exceptions.TransientError(
                reason='received %d of the %d bytes of the object'
                       % (written, announced))
        return written

    def _fetch_range_once(self, target, out, start, length, deadline):
        end = start + length - 1
        with self._attempt(target, deadline) as (url, token, http_conn):
            headers, body = swift_client.get_object(
                url, token, target.container, target.obj,
                http_conn=http_conn, resp_chunk_size=self.settings.chunk_size,
                headers={'Range': 'bytes=%d-%d' % (start, end)})
            with contextlib.closing(body):
                match = _CONTENT_RANGE.match(
                    headers.get('content-range') or '')
                if not match:
                    raise exceptions.RangesNotServedError(
                        location=target.location, strategy=self.name,
                        reason='it answered a range request with the whole '
                               'object')
                answered = (int(match.group(1)), int(match.group(2)))
                if answered != (start, end):
                    raise exceptions.RequestRejectedError(
                        location=target.location, strategy=self.name,
                        reason='it answered the range %d-%d with '
                               'Content-Range "%s"' % (
                                   start, end, base.server_text(
                                       headers.get('content-range'))))
                return self.write_capped(body, out, 0, target.location,
                                         length, deadline)

    @contextlib.contextmanager
    def _attempt(self, target, deadline):
        """Authenticate and yield what one request to the object needs.

        Every connection of the attempt is under one watchdog, closed at the
        end, and every error becomes a strategy error. A watchdog's shutdown
        reads as an early end (headers or body cut short), hence the deadline
        checks once the work is done.
        """
        with _SwiftErrors(self, target, deadline), \
                base.Watchdog(deadline) as watchdog, \
                contextlib.closing(_Transport(self, watchdog)) as transport:
            url, token = self._authenticate(transport)
            self.check_deadline(deadline)
            if not url or not token:
                raise exceptions.RequestRejectedError(
                    location=target.location, strategy=self.name,
                    reason='the authentication answer named no storage URL '
                           'or token')
            if target.storage_url and url.rstrip('/') != target.storage_url:
                raise exceptions.AccessDeniedError(
                    location=target.location, strategy=self.name,
                    reason='it is outside the Swift account of the '
                           'configured credentials (%s)'
                           % base.server_text(url, _MAX_ERROR_TEXT))
            yield url, token, transport.swift_connection(url)
            self.check_deadline(deadline)

    def _authenticate(self, transport):
        """Return the storage URL and token of the configured credentials."""
        settings = self.settings
        if settings.auth_version == '1':
            return self._authenticate_v1(transport)
        session = transport.keystone_session(v3.Password(
            auth_url=settings.auth_url, username=settings.user,
            password=settings.key, project_name=settings.project_name,
            user_domain_name=settings.user_domain_name,
            project_domain_name=settings.project_domain_name))
        url = session.get_endpoint(service_type='object-store',
                                   interface=settings.endpoint_type,
                                   region_name=settings.region_name)
        if url is None:
            raise ksa_exc.EndpointNotFound(
                'none of type object-store, interface %s, in region %s'
                % (settings.endpoint_type, settings.region_name))
        return url, session.get_token()

    def _authenticate_v1(self, transport):
        """Swift's v1 auth (swiftclient's get_auth_1_0, on our transport)."""
        settings = self.settings
        parsed, conn = transport.swift_connection(settings.auth_url)
        conn.request('GET', parsed.path, '', {'X-Auth-User': settings.user,
                                              'X-Auth-Key': settings.key})
        resp = conn.getresponse()
        if not 200 <= resp.status < 300:
            raise swift_client.ClientException(
                'Auth GET failed', http_status=resp.status,
                http_reason=resp.reason, http_path=parsed.path)
        return (resp.getheader('x-storage-url'),
                resp.getheader('x-storage-token',
                               resp.getheader('x-auth-token')))


class _Transport:
    """The HTTP sessions of one attempt: each connection watched, all closed.

    swiftclient's connections and keystoneauth's session each have a
    requests session of their own; every one gets a
    :class:`_ReportingAdapter`, so that the watchdog watches each connection,
    :meth:`close` closes each one (urllib3 leaves the pooled ones of a
    closed session to the garbage collector) and no body read whole goes
    past :data:`~.bounded_body.MAX_WHOLE_BODY`.
    """

    def __init__(self, strategy, watchdog):
        self._settings = strategy.settings
        self._timeout = strategy.timeout
        self._watchdog = watchdog
        self._closers = []
        self._connections = []

    def swift_connection(self, url):
        """swiftclient's ``(parsed url, connection)`` to ``url``."""
        settings = self._settings
        parsed, conn = swift_client.http_connection(
            url, cacert=settings.cacert, insecure=settings.insecure,
            timeout=self._timeout)
        self._watch(conn.request_session)
        self._closers.append(conn.close)
        return parsed, conn

    def keystone_session(self, auth):
        settings = self._settings
        session = requests.Session()
        self._watch(session)
        self._closers.append(session.close)
        verify = False if settings.insecure else (settings.cacert or True)
        return ksa_session.Session(auth=auth, session=session, verify=verify,
                                   timeout=self._timeout)

    def close(self):
        for close in reversed(self._closers):
            close()
        for conn in self._connections:
            conn.close()

    def _watch(self, session):
        for prefix in ('http://', 'https://'):
            session.mount(prefix, _ReportingAdapter(self._opened))

    def _opened(self, conn):
        self._watchdog.watch(conn)
        self._connections.append(conn)


class _ReportingAdapter(bounded_body.BoundedBodyAdapter):
    """A requests transport that reports each connection it opens.

    Its bodies read whole (an error's, the token's) are bounded too.
    """

    def __init__(self, opened):
        self._opened = opened
        super().__init__()

    def init_poolmanager(self, *args, **kwargs):
        super().init_poolmanager(*args, **kwargs)
        self._watch_pools(self.poolmanager)

    def proxy_manager_for(self, proxy, **proxy_kwargs):
        new = proxy not in self.proxy_manager
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if new:
            self._watch_pools(manager)
        return manager

    def _watch_pools(self, manager):
        manager.pool_classes_by_scheme = {
            scheme: functools.partial(_reporting_pool(pool_class),
                                      opened=self._opened)
            for scheme, pool_class in manager.pool_classes_by_scheme.items()}


class _ReportingPool:
    """Mixin of a urllib3 pool: reports each connection it makes."""

    def __init__(self, *args, opened, **kwargs):
        self._opened = opened
        super().__init__(*args, **kwargs)

    def _new_conn(self):
        conn = super()._new_conn()
        self._opened(conn)
        return conn


@functools.lru_cache()
def _reporting_pool(pool_class):
    """``pool_class`` (plain, TLS or SOCKS) with :class:`_ReportingPool`."""
    return type('Reporting' + pool_class.__name__,
                (_ReportingPool, pool_class), {})


class _SwiftErrors:
    """Translate swiftclient, keystoneauth and transport errors.

    An error after the deadline is the watchdog's doing: it reads as the
    timeout, whatever broke.
    """

    def __init__(self, strategy, target, deadline):
        self.strategy = strategy
        self.target = target
        self.deadline = deadline

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc is None or isinstance(exc, exceptions.StrategyError) or \
                not isinstance(exc, Exception):
            return False
        self.strategy.check_deadline(self.deadline)
        kwargs = {'location': self.target.location,
                  'strategy': self.strategy.name}
        too_large = bounded_body.too_large(exc)
        if too_large is not None:
            # Its server will not answer shorter on the next attempt.
            kwargs['reason'] = _describe(too_large)
            raise exceptions.RequestRejectedError(**kwargs) from exc
        if isinstance(exc, swift_client.ClientException):
            status = exc.http_status
            kwargs['reason'] = _describe_client_error(exc)
            if status == 404:
                raise exceptions.ObjectNotFoundError(**kwargs) from exc
            if status in (401, 403):
                raise exceptions.AccessDeniedError(**kwargs) from exc
            if status is not None and 400 <= status < 500 and \
                    status not in (408, 429):
                raise exceptions.RequestRejectedError(**kwargs) from exc
            raise exceptions.TransientError(reason=kwargs['reason']) from exc
        if isinstance(exc, (ksa_exc.Unauthorized, ksa_exc.Forbidden)):
            kwargs['reason'] = ('Keystone refused the credentials: %s'
                                % _describe(exc))
            raise exceptions.AccessDeniedError(**kwargs) from exc
        if isinstance(exc, ksa_exc.EndpointNotFound):
            kwargs['reason'] = 'no object-store endpoint: %s' % _describe(exc)
            raise exceptions.RequestRejectedError(**kwargs) from exc
        # UnicodeError: swiftclient decodes every header as UTF-8.
        if isinstance(exc, (ksa_exc.ClientException,
                            requests.exceptions.RequestException,
                            urllib3.exceptions.HTTPError,
                            socket.timeout, OSError, UnicodeError)):
            raise exceptions.TransientError(
                reason='cannot talk to Swift: %s' % _describe(exc)) from exc
        return False


def _describe_client_error(exc):
    if exc.http_status is None:
        return _describe(exc.msg or exc)
    return 'Swift answered %s %s for %s' % (
        exc.http_status, base.server_text(exc.http_reason),
        base.server_text(exc.http_path or exc.msg))


def _describe(error):
    return base.server_text(error, _MAX_ERROR_TEXT)
