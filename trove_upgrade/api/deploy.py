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

"""The API's middleware pipeline, composed in code.

From the outside in: proxy headers (with ``[oslo_middleware]
enable_proxy_headers_parsing``), request id, request log, fault
wrapper, body size limit, authentication (keystonemiddleware or noauth2),
request context, router. The request id comes first so every later layer,
the log line and every error body included, can name the request; the
fault wrapper sits outside everything that can fail.
"""

from oslo_log import log as logging
from oslo_middleware import http_proxy_to_wsgi

from trove_upgrade.api import auth
from trove_upgrade.api import fault_wrap
from trove_upgrade.api import handler
from trove_upgrade.api import requestid
from trove_upgrade.api import requestlog
from trove_upgrade.api import sizelimit
from trove_upgrade.common import release_mappings
from trove_upgrade.common import rpc
from trove_upgrade.db import common as db_common
from trove_upgrade import policy

LOG = logging.getLogger(__name__)


def deploy(conf):
    """Wrap the router in its middleware, from the inside out."""
    if conf.api.auth_strategy == 'noauth2':
        auth_middleware = auth.NoAuthMiddleware
    else:
        auth_middleware = auth.keystone_middleware(conf)

    application = handler.Router(conf)
    for middleware in (
            auth.ContextMiddleware,
            auth_middleware,
            lambda app: sizelimit.RequestBodySizeLimit(app, conf),
            fault_wrap.FaultWrapper,
            requestlog.RequestLog,
            lambda app: requestid.RequestId(app, conf),
            lambda app: _proxy_headers(app, conf)):
        application = middleware(application)
    return application


def _proxy_headers(application, conf):
    """``application`` behind HTTPProxyToWSGI, when it is enabled.

    Disabled, it passes every request on unchanged, for the cost of a
    webob request and response of its own. The option is not mutable, so
    it is read once, here.
    """
    proxy = http_proxy_to_wsgi.HTTPProxyToWSGI(application, conf)
    if conf.oslo_middleware.enable_proxy_headers_parsing:
        return proxy
    return application


def loadapp(conf):
    """The WSGI application for ``conf``, its policy loaded.

    A policy file, an ``[upgrade_levels] agent`` value, a ``[database]
    connection``, a transport URL or any option value that cannot work
    stops the API here, at start, rather than failing every request:
    oslo.config converts a value when it is first read, which logging
    every value does now.
    """
    rpc.check_transport_url()
    rpc.init_notifier()  # its options are logged and checked too
    conf.log_opt_values(LOG, logging.DEBUG)
    db_common.check_connection_url(conf.database.connection)
    release_mappings.resolve_version_cap(
        'agent', conf.upgrade_levels.agent, auto=lambda: None)
    policy.init(conf)
    return deploy(conf)
