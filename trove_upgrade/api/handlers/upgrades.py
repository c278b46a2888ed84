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

"""Handlers of /v1.0/{tenant_id}/mgmt/upgrades, and of upstream Trove's
/v1.0/{tenant_id}/mgmt/instances/{instance_id}/upgrade."""

import os
from urllib import parse
import uuid

from oslo_utils import uuidutils
import webob.exc

from trove_upgrade.api.schemas import upgrades as schema
from trove_upgrade.api import util
from trove_upgrade.api.views import common as views
from trove_upgrade.api.views import upgrades as upgrade_views
from trove_upgrade.common import exception
from trove_upgrade.common import versions
from trove_upgrade.policies import upgrades as policies
from trove_upgrade import policy
from trove_upgrade.services import trove_instances
from trove_upgrade.services import upgrades


def check_version(value):
    """The version must be one pip can compare, with or without a "v"."""
    if versions.parse(value) is None:
        raise webob.exc.HTTPBadRequest(
            'Invalid JSON body: instance_version %r is not a version '
            '(PEP 440, with an optional leading "v").' % value)


def normalized_instance(id_or_name):
    """A dashed UUID in lower case; anything else (a name) as given."""
    lowered = id_or_name.lower()
    if trove_instances.is_instance_id(lowered):
        return lowered
    return id_or_name


def _upgrade_id(req):
    """The upgrade id of the path; a malformed one cannot exist: 404."""
    upgrade_id = req.urlvars['upgrade_id']
    if not uuidutils.is_uuid_like(upgrade_id):
        raise exception.UpgradeNotFoundError(upgrade_id=upgrade_id)
    return util.canonical_id(upgrade_id)


# Location schemes that name their strategy; http(s) means the http
# strategy (a Swift storage URL needs "strategy": "swift").
_SCHEME_STRATEGIES = {'swift': 'swift', 'rsync': 'rsync', 'file': 'local',
                      'http': 'http', 'https': 'http'}


def strategy_from_location(location):
    """The strategy upstream Trove's body leaves out, told by the location.

    ``swift:``, ``rsync:``, ``http(s):`` and ``file:`` URLs name theirs; an
    absolute path is ``local``; anything else cannot be told apart (a bare
    ``container/object`` could be any store) and is refused with 400.
    """
    scheme = parse.urlsplit(location).scheme.lower()
    if scheme in _SCHEME_STRATEGIES:
        return _SCHEME_STRATEGIES[scheme]
    if not scheme and os.path.isabs(location):
        return 'local'
    raise webob.exc.HTTPBadRequest(
        'Invalid JSON body: the strategy cannot be told from location %r; '
        'use a swift://, http(s)://, rsync:// or file: URL or an absolute '
        'path, or give "strategy".' % location)


@util.wsgify
def create_upgrade(req):
    context = req.environ[util.CONTEXT_KEY]
    policy.authorize(context, policies.CREATE)
    util.require_json(req)
    body = util.extract_json(req.body, schema.POST_UPGRADE)
    return _create(req, context, dict(body.get('upgrade', body)))


@util.wsgify
def create_instance_upgrade(req):
    """Upstream Trove's route: it only cast; here the upgrade is recorded."""
    context = req.environ[util.CONTEXT_KEY]
    policy.authorize(context, policies.CREATE)
    util.require_json(req)
    instance_id = req.urlvars['instance_id']
    if not uuidutils.is_uuid_like(instance_id):
        raise exception.InstanceNotFoundError(
            instance=instance_id, reason='an instance id is a UUID')
    body = util.extract_json(req.body, schema.POST_INSTANCE_UPGRADE)
    values = dict(body['upgrade'], instance_id=instance_id)
    values.setdefault('strategy', strategy_from_location(values['location']))
    return _create(req, context, values)


def _create(req, context, values):
    check_version(values['instance_version'])
    util.check_package_reference(values)
    values['instance_id'] = normalized_instance(values['instance_id'])
    values.setdefault('metadata', {})
    values.setdefault('allow_downgrade', False)
    upgrade = upgrades.create_upgrade(context, values)
    tenant_id = req.urlvars['tenant_id']
    return util.json_response(
        {'upgrade': upgrade_views.upgrade(req, tenant_id, upgrade)},
        status=202,
        headers=[('Location',
                  upgrade_views.url(req, tenant_id, upgrade['id']))])


@util.wsgify
def list_upgrades(req):
    context = req.environ[util.CONTEXT_KEY]
    policy.authorize(context, policies.LIST)
    params = util.query_params(req, schema.LIST_UPGRADES_QUERY)
    limit = util.get_limit(params, req.environ[util.CONF_KEY].api.max_limit)
    filters = {name: params[name] for name in
               ('instance_id', 'status', 'instance_version')
               if name in params}
    if 'instance_id' in filters:
        filters['instance_id'] = str(uuid.UUID(filters['instance_id']))
    found = upgrades.list_upgrades(context, filters=filters, limit=limit,
                                   marker=util.get_marker(params))
    tenant_id = req.urlvars['tenant_id']
    items = [upgrade_views.upgrade(req, tenant_id, u) for u in found]
    return util.json_response(
        views.page(req, 'upgrades', items, limit, 'id'))


@util.wsgify
def show_upgrade(req):
    context = req.environ[util.CONTEXT_KEY]
    policy.authorize(context, policies.SHOW)
    upgrade = upgrades.get_upgrade(context, _upgrade_id(req),
                                   with_events=True)
    return util.json_response(
        {'upgrade': upgrade_views.upgrade(req, req.urlvars['tenant_id'],
                                          upgrade)})


@util.wsgify
def cancel_upgrade(req):
    context = req.environ[util.CONTEXT_KEY]
    policy.authorize(context, policies.CANCEL)
    upgrade = upgrades.cancel_upgrade(context, _upgrade_id(req))
    return util.json_response(
        {'upgrade': upgrade_views.upgrade(req, req.urlvars['tenant_id'],
                                          upgrade)})
