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

"""Handlers of /v1.0/{tenant_id}/mgmt/packages, and deploy by reference."""

from oslo_utils import uuidutils
import webob
import webob.exc

from trove_upgrade.api.schemas import packages as schema
from trove_upgrade.api import util
from trove_upgrade.api import views
from trove_upgrade.common import exception
from trove_upgrade.db import packages as db
from trove_upgrade.policies import packages as policies
from trove_upgrade import policy
from trove_upgrade.services import fleet
from trove_upgrade.services import packages as package_registry


def _package_id(req):
    package_id = req.urlvars['package_id']
    if not uuidutils.is_uuid_like(package_id):
        raise exception.PackageNotFoundError(package=package_id)
    return util.canonical_id(package_id)


def _view(req, package):
    tenant_id = req.urlvars['tenant_id']
    return dict(
        {k: package[k] for k in (
            'id', 'name', 'version', 'strategy', 'location', 'state', 'size',
            'sha256', 'min_upgrade_from', 'signer_key_ids', 'project_id',
            'user_id')},
        manifest_created_at=util.isotime(package['manifest_created_at']),
        manifest_expires_at=util.isotime(package['manifest_expires_at']),
        created_at=util.isotime(package['created_at']),
        updated_at=util.isotime(package['updated_at']),
        links=views._links(req, tenant_id, 'packages', package['id']))


def deploy_by_reference(context, values, agents_of):
    """Fill ``strategy`` and ``location`` from a named package.

    ``values`` are an upgrade's or a rollout's, ``agents_of()`` the agents
    it targets now (for the package's ``min_upgrade_from`` floor), called
    only when a package is named. Without
    ``package`` both ``strategy`` and ``location`` are required, as
    before. Nothing is recorded or sent when this raises.
    """
    name = values.pop('package', None)
    if name is None:
        missing = [k for k in ('strategy', 'location') if k not in values]
        if missing:
            raise webob.exc.HTTPBadRequest(
                'Invalid JSON body: give either package, or strategy and '
                'location (%s missing).' % ' and '.join(missing))
        return None
    given = [k for k in ('strategy', 'location') if k in values]
    if given:
        raise webob.exc.HTTPBadRequest(
            'Invalid JSON body: package names where the version is; do not '
            'also give %s.' % ' and '.join(given))
    package = package_registry.resolve(context, name,
                                       values['instance_version'])
    package_registry.check_floor(package, agents_of())
    values['strategy'] = package['strategy']
    values['location'] = package['location']
    return package


@util.wsgify
def create_package(req):
    context = req.environ[util.CONTEXT_KEY]
    policy.authorize(context, policies.CREATE)
    util.require_json(req)
    body = util.extract_json(req.body, schema.POST_PACKAGE)
    package = package_registry.register_package(context, body['package'])
    view = _view(req, package)
    return util.json_response({'package': view}, status=201,
                              headers=[('Location', view['links'][0]['href'])])


@util.wsgify
def list_packages(req):
    context = req.environ[util.CONTEXT_KEY]
    policy.authorize(context, policies.LIST)
    params = util.query_params(req, schema.LIST_PACKAGES_QUERY)
    found = package_registry.list_packages(context, **params)
    return util.json_response({'packages': [_view(req, p) for p in found]})


@util.wsgify
def show_package(req):
    context = req.environ[util.CONTEXT_KEY]
    policy.authorize(context, policies.SHOW)
    package = db.get_package(context, _package_id(req))
    view = _view(req, package)
    view['used_by'] = package_registry.users_of(context, package)
    return util.json_response({'package': view})


@util.wsgify
def update_package(req):
    context = req.environ[util.CONTEXT_KEY]
    policy.authorize(context, policies.UPDATE)
    util.require_json(req)
    body = util.extract_json(req.body, schema.PATCH_PACKAGE)
    package = package_registry.set_state(context, _package_id(req),
                                         body['package']['state'])
    return util.json_response({'package': _view(req, package)})


@util.wsgify
def delete_package(req):
    context = req.environ[util.CONTEXT_KEY]
    policy.authorize(context, policies.DELETE)
    package_registry.delete_package(context, _package_id(req))
    return webob.Response(status=204)


@util.wsgify
def show_fleet(req):
    context = req.environ[util.CONTEXT_KEY]
    policy.authorize(context, policies.FLEET)
    params = util.query_params(req, schema.FLEET_QUERY)
    limit = util.get_limit(params, req.environ[util.CONF_KEY].api.max_limit)
    rows = fleet.summary(context, limit=limit, marker=params.get('marker'))
    return util.json_response(
        views.page(req, 'versions', rows, limit, 'version'))
