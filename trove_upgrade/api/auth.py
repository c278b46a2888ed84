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

"""Who is calling: keystonemiddleware or noauth2, then the RequestContext.

The versions documents are public, as API discovery needs them before a
client holds a token, and so is the health check, which load balancers
probe without one; every other path requires an identity.
"""

from keystonemiddleware import auth_token
from oslo_middleware import request_id
import webob.exc

from trove_upgrade.api import handler
from trove_upgrade.api import util
from trove_upgrade.common import context

PUBLIC_PATHS = frozenset(['', '/', '/v1.0', '/v1.0/',
                          handler.HEALTHCHECK])


def _is_public(environ):
    return environ.get('PATH_INFO', '') in PUBLIC_PATHS


class NoAuthMiddleware:
    """``[api] auth_strategy = noauth2``: trust the identity headers.

    The caller is whoever X-User-Id, X-Project-Id and X-Roles say; for
    development and demos only.
    """

    def __init__(self, application):
        self.application = application

    @util.passing_on
    def __call__(self, req):
        if _is_public(req.environ):
            return self.application
        missing = [name for name in ('X-User-Id', 'X-Project-Id')
                   if not req.headers.get(name)]
        if missing:
            raise webob.exc.HTTPUnauthorized(
                'noauth2 needs the %s header(s) to know who is calling.'
                % ', '.join(missing))
        return self.application


class KeystoneAuthProtocol(auth_token.AuthProtocol):
    """keystonemiddleware's auth_token, answering in the API's JSON errors."""

    def __init__(self, application, conf):
        self._public_app = application
        super().__init__(application, {'oslo_config_config': conf})

    def __call__(self, environ, start_response):
        if _is_public(environ):
            return self._public_app(environ, start_response)
        return super().__call__(environ, start_response)

    def process_request(self, request):
        try:
            return super().process_request(request)
        except webob.exc.HTTPException as err:
            if err.code == 401 and not request.user_token:
                detail = ('The request has no X-Auth-Token header; this '
                          'API requires a Keystone token.')
            elif err.code == 401:
                detail = 'The token is invalid or has expired.'
            else:
                detail = err.detail or err.explanation
            headers = [(name, value) for name, value in err.headerlist
                       if name.lower() == 'www-authenticate']
            return util.error_response(err.code, detail, request.environ,
                                       headers=headers)


def keystone_middleware(conf):
    def _wrap(application):
        return KeystoneAuthProtocol(application, conf)
    return _wrap


class ContextMiddleware:
    """Build the RequestContext from the identity headers auth left."""

    def __init__(self, application):
        self.application = application

    @util.passing_on
    def __call__(self, req):
        if _is_public(req.environ):
            return self.application
        ctx = context.RequestContext.from_environ(
            req.environ,
            request_id=req.environ.get(request_id.ENV_REQUEST_ID))
        if not ctx.user_id:
            raise webob.exc.HTTPUnauthorized(
                'The request carries no authenticated user.')
        req.environ[util.CONTEXT_KEY] = ctx
        return self.application
