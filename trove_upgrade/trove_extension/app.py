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

"""trove-upgrade's API application as trove-api hosts it.

``load`` runs once, as trove-api builds its pipeline: it gives
trove-upgrade a ConfigOpts of its own, parses trove-upgrade's own files
into it, points the database at trove-upgrade's ``[database]`` and loads
trove-upgrade's policy. A configuration that cannot work stops trove-api
there, at start. Nothing here starts threads or chooses an oslo.service
backend: trove-api is eventlet's, and its own.

The application is the standalone API's router and handlers; only the
layers Trove already has (request id, proxy headers, authentication) are
left out, and the caller's identity comes from Trove's context.
``resources`` gives Trove's mapper the routes to let through, derived
from the router's own declarations.
"""

import http

from oslo_db import options as db_options
from oslo_log import log as logging
from oslo_middleware import request_id
import webob.exc

from trove_upgrade.api import fault_wrap
from trove_upgrade.api import sizelimit
from trove_upgrade.api import util
from trove_upgrade.common import context
from trove_upgrade import hosted_conf
from trove_upgrade import version

LOG = logging.getLogger(__name__)

# Where Trove's ContextMiddleware leaves its RequestContext.
TROVE_CONTEXT_KEY = 'trove.context'
# Trove serves its API under this prefix; trove-upgrade's router (and the
# links in its bodies) expect it in PATH_INFO, as the standalone API has it.
API_PREFIX = '/v1.0'
# Every method routed to the router on a declared path.
_METHODS = tuple(method.value for method in http.HTTPMethod)


def _parse(config_files, config_dirs):
    conf = hosted_conf.use_private_conf()
    # Imported only now: it binds the ConfigOpts as it loads, and so do the
    # modules imported below that use it.
    from trove_upgrade import conf as tu_conf
    tu_conf.CONF([], project='trove-upgrade', prog='trove-upgrade',
                 version=version.version_string(),
                 default_config_files=config_files or None,
                 default_config_dirs=config_dirs or None)
    if not conf.config_file and not conf.config_dir:
        # Defaults alone would serve an empty SQLite database of its own.
        raise RuntimeError(
            'The trove-upgrade API extension is enabled but no '
            'trove-upgrade configuration file was found: set '
            '[trove_upgrade] config_files or config_dirs in trove.conf or '
            'create /etc/trove-upgrade/trove-upgrade.conf.')
    return conf


def _configure_database(conf):
    """enginefacade reads the global CONF, Trove's here: give it ours."""
    # Imported only now: it registers [database] on the configuration,
    # which must be ours by then.
    from trove_upgrade.db import common as db_common
    from trove_upgrade.db import migration
    # As the standalone API: a URL no driver serves, or a database without
    # this release's schema, fails here, not in every request.
    db_common.check_connection_url(conf.database.connection)
    migration.check_schema_at_start(conf.database.connection)
    db_common.context_manager.configure(**{
        opt.dest: conf.database[opt.dest]
        for opt in db_options.database_opts})


def load(config_files, config_dirs=()):
    """trove-upgrade's API application, configured from its own files.

    ``config_files``, then every ``*.conf`` of ``config_dirs`` in name
    order, as oslo.config reads ``--config-file`` and ``--config-dir``;
    each empty means oslo.config's default locations for trove-upgrade.
    """
    conf = _parse(config_files, config_dirs)
    _configure_database(conf)
    from trove_upgrade.api import handler
    from trove_upgrade.common import release_mappings
    from trove_upgrade import policy
    release_mappings.resolve_version_cap(
        'agent', conf.upgrade_levels.agent, auto=lambda: None)
    policy.init(conf)
    LOG.info('trove-upgrade API extension serving, database %s',
             conf.database.connection.split('://', 1)[0])
    application = TroveContextAdapter(handler.Router(conf))
    application = sizelimit.RequestBodySizeLimit(application, conf)
    return fault_wrap.FaultWrapper(application)


def resources():
    """The standalone API's mgmt routes, as Trove's mapper takes them.

    ``{collection: collection_actions}``, one per mgmt path of
    ``ROUTE_DECLARATIONS``, relative to Trove's ``/v1.0``. Trove's mapper
    gives a collection ``GET`` and ``POST``, and the first action of each
    other method the collection path itself; so with an action for each
    of ``http.HTTPMethod``'s other methods, every standard method on a
    declared path reaches the router, which picks the handler or answers
    405 with Allow, as the standalone API does. Trove, which has no route
    for a method a resource lacks, would answer 404. OPTIONS gets the
    router's 204 with Allow, which trove-api's CORS middleware keeps: it
    replaces any other answer to OPTIONS with a bare 200. The members and
    actions Trove adds below a path (``{id}``, ``new``, ``put``) reach the
    router too, which answers them as the standalone API would.
    """
    from trove_upgrade.api import handler
    actions = {method.lower(): method for method in _METHODS
               if method not in ('GET', 'POST')}
    return {path[len(API_PREFIX) + 1:]: dict(actions)
            for path in handler.ROUTE_DECLARATIONS
            if path.startswith(handler.MGMT + '/')}


class TroveContextAdapter:
    """Trove's request, as trove-upgrade's router expects it.

    The caller is who Trove's context says (user, project, roles), the
    request id the one Trove's request_id middleware answers with, and the
    path carries the API version again, as on the standalone API.

    Whether the caller administers every project is Trove's decision too:
    Trove's ContextMiddleware sets ``is_admin`` from ``[DEFAULT]
    admin_roles`` or its ``context_is_admin`` policy, and its own mgmt
    extension acts on every project's instances for such a caller. So does
    this one: an admin finds a customer's instance, anyone else only the
    instances of the project of the request (which Trove's
    TenantBasedAuth has already matched to the URL's). Who may use each
    route at all stays trove-upgrade's policy.
    """

    def __init__(self, application):
        self.application = application

    def __call__(self, environ, start_response):
        environ = dict(environ)
        script = environ.get('SCRIPT_NAME', '')
        if script.endswith(API_PREFIX):
            environ['SCRIPT_NAME'] = script[:-len(API_PREFIX)]
            environ['PATH_INFO'] = API_PREFIX + environ.get('PATH_INFO', '')
        try:
            environ[util.CONTEXT_KEY] = self.context_from(environ)
        except webob.exc.HTTPException as err:
            response = util.error_response(err.code, err.detail, environ)
            return response(environ, start_response)
        return self.application(environ, start_response)

    @staticmethod
    def context_from(environ):
        trove_context = environ.get(TROVE_CONTEXT_KEY)
        if trove_context is None or not trove_context.user_id:
            raise webob.exc.HTTPUnauthorized(
                'The request carries no authenticated user: trove-api '
                'must run its context middleware before extensions.')
        request = environ.get(request_id.ENV_REQUEST_ID)
        return context.RequestContext(
            user_id=trove_context.user_id,
            project_id=trove_context.project_id,
            roles=[r for r in trove_context.roles if r],
            is_admin=bool(trove_context.is_admin),
            auth_token=trove_context.auth_token,
            request_id=request or trove_context.request_id,
            global_request_id=trove_context.global_request_id,
            # Trove's thread-local context stays the current one.
            overwrite=False)
