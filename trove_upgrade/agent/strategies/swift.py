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
Swift's own v1 auth (tempauth); swiftclient's own retries are off, the base
class retries.
"""

import socket
import urllib.parse

from keystoneauth1 import exceptions as ksa_exc
from keystoneauth1.identity import v3
from keystoneauth1 import session as ksa_session
import requests
from swiftclient import client as swift_client

from trove_upgrade.agent.strategies import base
from trove_upgrade.agent.strategies import exceptions
from trove_upgrade.conf import strategies as conf_strategies

_MAX_CONTAINER = 256
_MAX_OBJECT = 1024


class _Target:
    def __init__(self, location, container, obj, storage_url=None):
        self.location = location
        self.container = container
        self.obj = obj
        self.storage_url = storage_url


class SwiftStrategy(base.Strategy):
    name = 'swift'
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
        with _SwiftErrors(self, target):
            conn = self._connect(target)
            try:
                conn.head_object(target.container, target.obj)
            finally:
                conn.close()

    def _fetch_once(self, target, part_path, max_bytes, deadline):
        with _SwiftErrors(self, target), open(part_path, 'wb') as out:
            conn = self._connect(target)
            try:
                headers, body = conn.get_object(
                    target.container, target.obj,
                    resp_chunk_size=self.settings.chunk_size)
                announced = int(headers.get('content-length', -1))
                if announced > max_bytes:
                    body.close()
                    raise self.too_big(target.location, max_bytes,
                                       'the object holds %d bytes'
                                       % announced)
                try:
                    written = self.write_capped(body, out, 0,
                                                target.location, max_bytes,
                                                deadline)
                finally:
                    body.close()
            finally:
                conn.close()
        if announced >= 0 and written != announced:
            raise exceptions.TransientError(
                reason='received %d of the %d bytes of the object'
                       % (written, announced))
        return written

    def _connect(self, target):
        settings = self.settings
        common = {'retries': 0, 'timeout': self.timeout,
                  'cacert': settings.cacert, 'insecure': settings.insecure}
        if settings.auth_version == '1':
            conn = swift_client.Connection(
                authurl=settings.auth_url, user=settings.user,
                key=settings.key, auth_version='1', **common)
        else:
            auth = v3.Password(
                auth_url=settings.auth_url, username=settings.user,
                password=settings.key, project_name=settings.project_name,
                user_domain_name=settings.user_domain_name,
                project_domain_name=settings.project_domain_name)
            verify = False if settings.insecure else (settings.cacert or True)
            session = ksa_session.Session(auth=auth, verify=verify,
                                          timeout=self.timeout)
            conn = swift_client.Connection(
                session=session,
                os_options={'region_name': settings.region_name,
                            'endpoint_type': settings.endpoint_type},
                **common)
        if target.storage_url:
            url, _token = conn.get_auth()
            if url.rstrip('/') != target.storage_url:
                raise exceptions.AccessDenied(
                    location=target.location, strategy=self.name,
                    reason='it is outside the Swift account of the '
                           'configured credentials (%s)' % url)
        return conn


class _SwiftErrors:
    """Translate swiftclient and keystoneauth errors into strategy errors."""

    def __init__(self, strategy, target):
        self.strategy = strategy
        self.target = target

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc is None or isinstance(exc, exceptions.StrategyError):
            return False
        kwargs = {'location': self.target.location,
                  'strategy': self.strategy.name}
        if isinstance(exc, swift_client.ClientException):
            status = exc.http_status
            kwargs['reason'] = _describe_client_error(exc)
            if status == 404:
                raise exceptions.ObjectNotFound(**kwargs) from exc
            if status in (401, 403):
                raise exceptions.AccessDenied(**kwargs) from exc
            if status is not None and 400 <= status < 500 and \
                    status not in (408, 429):
                raise exceptions.RequestRejected(**kwargs) from exc
            raise exceptions.TransientError(reason=kwargs['reason']) from exc
        if isinstance(exc, (ksa_exc.Unauthorized, ksa_exc.Forbidden)):
            kwargs['reason'] = 'Keystone refused the credentials: %s' % exc
            raise exceptions.AccessDenied(**kwargs) from exc
        if isinstance(exc, ksa_exc.EndpointNotFound):
            kwargs['reason'] = 'no object-store endpoint: %s' % exc
            raise exceptions.RequestRejected(**kwargs) from exc
        if isinstance(exc, (ksa_exc.ClientException,
                            requests.exceptions.RequestException,
                            socket.timeout, OSError)):
            raise exceptions.TransientError(
                reason='cannot talk to Swift: %s' % exc) from exc
        return False


def _describe_client_error(exc):
    if exc.http_status is None:
        return str(exc.msg or exc)
    return 'Swift answered %s %s for %s' % (
        exc.http_status, exc.http_reason, exc.http_path or exc.msg)
