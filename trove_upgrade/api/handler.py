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

"""Every URL of the API and the handler of each method, in one map.

``make_map`` turns ``ROUTE_DECLARATIONS`` into a Routes mapper. Every
URL also answers HEAD where it answers GET (the GET handler's headers,
without the body), OPTIONS with 204 and an Allow header, and any other
method with 405 and the same Allow header.
Path parameters carry no regular expression, so a malformed id reaches its
handler and gets the resource's own 404 message.
"""

import functools

from oslo_middleware import healthcheck
import routes
import webob.acceptparse
import webob.exc

from trove_upgrade.api.handlers import agents
from trove_upgrade.api.handlers import desired_versions
from trove_upgrade.api.handlers import packages
from trove_upgrade.api.handlers import rollouts
from trove_upgrade.api.handlers import root
from trove_upgrade.api.handlers import upgrades
from trove_upgrade.api import util

MGMT = '/v1.0/{tenant_id}/mgmt'
# oslo.middleware's health check, public like the versions documents.
HEALTHCHECK = '/healthcheck'

ROUTE_DECLARATIONS = {
    HEALTHCHECK: {'GET': root.healthcheck, 'HEAD': root.healthcheck},
    '': {'GET': root.versions},
    '/': {'GET': root.versions},
    '/v1.0': {'GET': root.version},
    '/v1.0/': {'GET': root.version},
    MGMT + '/upgrades': {
        'GET': upgrades.list_upgrades,
        'POST': upgrades.create_upgrade,
    },
    MGMT + '/upgrades/{upgrade_id}': {
        'GET': upgrades.show_upgrade,
        'DELETE': upgrades.cancel_upgrade,
    },
    # Upstream Trove's route, answering with a recorded upgrade.
    MGMT + '/instances/{instance_id}/upgrade': {
        'POST': upgrades.create_instance_upgrade,
    },
    MGMT + '/agents': {
        'GET': agents.list_agents,
    },
    MGMT + '/agents/{instance_id}': {
        'GET': agents.show_agent,
        'DELETE': agents.delete_agent,
    },
    MGMT + '/rollouts': {
        'GET': rollouts.list_rollouts,
        'POST': rollouts.create_rollout,
    },
    MGMT + '/rollouts/{rollout_id}': {
        'GET': rollouts.show_rollout,
        'DELETE': rollouts.delete_rollout,
    },
    MGMT + '/rollouts/{rollout_id}/pause': {
        'POST': rollouts.pause_rollout,
    },
    MGMT + '/rollouts/{rollout_id}/resume': {
        'POST': rollouts.resume_rollout,
    },
    MGMT + '/rollouts/{rollout_id}/abort': {
        'POST': rollouts.abort_rollout,
    },
    MGMT + '/packages': {
        'GET': packages.list_packages,
        'POST': packages.create_package,
    },
    MGMT + '/packages/fleet': {
        'GET': packages.show_fleet,
    },
    MGMT + '/packages/{package_id}': {
        'GET': packages.show_package,
        'PATCH': packages.update_package,
        'DELETE': packages.delete_package,
    },
    MGMT + '/desired-versions': {
        'GET': desired_versions.list_desired_versions,
        'POST': desired_versions.create_desired_version,
    },
    MGMT + '/desired-versions/{desired_version_id}': {
        'GET': desired_versions.show_desired_version,
        'PATCH': desired_versions.update_desired_version,
        'DELETE': desired_versions.delete_desired_version,
    },
    MGMT + '/desired-versions/{desired_version_id}/pause': {
        'POST': desired_versions.pause_desired_version,
    },
    MGMT + '/desired-versions/{desired_version_id}/resume': {
        'POST': desired_versions.resume_desired_version,
    },
    MGMT + '/targets': {
        'GET': desired_versions.list_targets,
    },
}


def allowed_methods(targets):
    """The methods of a URL declared with ``targets``, with their handlers.

    The declared ones, HEAD where GET is and OPTIONS: HEAD is GET without
    the body (RFC 9110), which webob's response drops for a HEAD request;
    OPTIONS answers with the Allow header alone.
    """
    methods = {}
    for method, action in targets.items():
        methods[method] = action
        if method == 'GET':
            methods.setdefault('HEAD', action)
    methods['OPTIONS'] = _options
    return methods


@util.wsgify
def _options(req):
    return webob.Response(status=204, charset=None,
                          headers=[('Allow', req.urlvars['_methods'])])


@util.wsgify
def _method_not_allowed(req):
    allowed = req.urlvars['_methods']
    raise webob.exc.HTTPMethodNotAllowed(
        '%s is not allowed on %s; allowed: %s.'
        % (req.method, req.path_info, allowed),
        headers=[('Allow', allowed)])


@functools.lru_cache(maxsize=32)
def _accepts_json(accept):
    """Whether an Accept header's value (None: no header) takes JSON.

    Parsed once per value: a client sends the same one with each request,
    and parsing it cost each request 40 Python calls. The values kept are
    bounded by the server's line limit, 32 of them at most.
    """
    return bool(webob.acceptparse.create_accept_header(
        accept).acceptable_offers([util.JSON_TYPE]))


def make_map(declarations):
    mapper = routes.Mapper()
    for route, targets in declarations.items():
        methods = allowed_methods(targets)
        # Every route of the URL carries its Allow header's value.
        allowed = ', '.join(methods)
        for method, action in methods.items():
            mapper.connect(route, action=action, _methods=allowed,
                           conditions={'method': [method]})
        mapper.connect(route, action=_method_not_allowed, _methods=allowed)
    return mapper


class Router:
    """Dispatch a request to the handler ROUTE_DECLARATIONS names."""

    def __init__(self, conf):
        self.conf = conf
        self._map = make_map(ROUTE_DECLARATIONS)
        # Built once: it loads its backends ([healthcheck] backends).
        self._healthcheck = healthcheck.Healthcheck(None, conf)

    @util.passing_on
    def __call__(self, req):
        try:
            path = req.path_info
        except UnicodeDecodeError:
            raise webob.exc.HTTPBadRequest(
                'The URL path is not UTF-8 once percent-decoded.')
        match = self._map.match(environ=req.environ)
        if match is None:
            raise webob.exc.HTTPNotFound('No resource at %s.' % path)
        if path != HEALTHCHECK and not _accepts_json(
                req.environ.get('HTTP_ACCEPT')):
            # The health check negotiates for itself (JSON, HTML, text).
            raise webob.exc.HTTPNotAcceptable(
                'This API answers only %s, which the Accept header %r '
                'refuses.' % (util.JSON_TYPE, req.headers['Accept']))
        action = match.pop('action')
        # Routes matches the WSGI path, bytes as latin-1 (PEP 3333); the
        # ids in it are UTF-8, as the path was just found to be.
        match = {name: value.encode('latin-1').decode('utf-8')
                 if isinstance(value, str) else value
                 for name, value in match.items()}
        req.environ['wsgiorg.routing_args'] = ((), match)
        req.environ[util.CONF_KEY] = self.conf
        req.environ[util.HEALTHCHECK_KEY] = self._healthcheck
        context = req.environ.get(util.CONTEXT_KEY)
        tenant_id = match.get('tenant_id')
        if tenant_id is not None and tenant_id != context.project_id:
            raise webob.exc.HTTPForbidden(
                'The project in the URL (%s) is not the project of the '
                'request (%s).' % (tenant_id, context.project_id))
        return action
