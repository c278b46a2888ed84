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

"""Handlers of /v1.0/{tenant_id}/mgmt/packages."""

from oslo_utils import uuidutils
import webob
import webob.exc

from trove_upgrade.api.schemas import packages as schema
from trove_upgrade.api import util
from trove_upgrade.api.views import common as views
from trove_upgrade.api.views import packages as package_views
from trove_upgrade.common import exception
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
    return package_views.package(req, req.urlvars['tenant_id'], package)


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
    package = package_registry.get_package(context, _package_id(req))
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
