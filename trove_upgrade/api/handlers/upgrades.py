"""Handlers of /v1.0/{tenant_id}/mgmt/upgrades."""

import uuid

from oslo_utils import uuidutils
from packaging import version
import webob.exc

from trove_upgrade.api.handlers import packages as package_handlers
from trove_upgrade.api.schemas import upgrades as schema
from trove_upgrade.api import util
from trove_upgrade.api import views
from trove_upgrade.db import api as db_api
from trove_upgrade import exception
from trove_upgrade.policies import upgrades as policies
from trove_upgrade import policy
from trove_upgrade import upgrades


def _check_version(value):
    """The version must be one pip can compare, with or without a "v"."""
    bare = value[1:] if value[:1] in ('v', 'V') else value
    try:
        version.Version(bare)
    except version.InvalidVersion:
        raise webob.exc.HTTPBadRequest(
            'Invalid JSON body: instance_version %r is not a version '
            '(PEP 440, with an optional leading "v").' % value)


def _agents_of(context, instance_id):
    """The instance's agent, in a list; empty before it registered."""
    try:
        return [db_api.get_agent(context, instance_id)]
    except exception.AgentNotFound:
        return []


def _upgrade_id(req):
    """The upgrade id of the path; a malformed one cannot exist: 404."""
    upgrade_id = req.urlvars['upgrade_id']
    if not uuidutils.is_uuid_like(upgrade_id):
        raise exception.UpgradeNotFound(upgrade_id=upgrade_id)
    return upgrade_id


@util.wsgify
def create_upgrade(req):
    context = req.environ[util.CONTEXT_KEY]
    policy.authorize(context, policies.CREATE)
    util.require_json(req)
    body = util.extract_json(req.body, schema.POST_UPGRADE)
    values = dict(body.get('upgrade', body))
    _check_version(values['instance_version'])
    values['instance_id'] = str(uuid.UUID(values['instance_id']))
    package_handlers.deploy_by_reference(
        context, values, _agents_of(context, values['instance_id']))
    values.setdefault('metadata', {})
    values.setdefault('allow_downgrade', False)
    upgrade = upgrades.create_upgrade(context, values)
    tenant_id = req.urlvars['tenant_id']
    return util.json_response(
        {'upgrade': views.upgrade(req, tenant_id, upgrade)}, status=202,
        headers=[('Location',
                  views.upgrade_url(req, tenant_id, upgrade['id']))])


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
    found = db_api.list_upgrades(context, filters=filters, limit=limit,
                                 marker=params.get('marker'))
    tenant_id = req.urlvars['tenant_id']
    items = [views.upgrade(req, tenant_id, u) for u in found]
    return util.json_response(
        views.page(req, 'upgrades', items, limit, 'id'))


@util.wsgify
def show_upgrade(req):
    context = req.environ[util.CONTEXT_KEY]
    policy.authorize(context, policies.SHOW)
    upgrade = db_api.get_upgrade(context, _upgrade_id(req), with_events=True)
    return util.json_response(
        {'upgrade': views.upgrade(req, req.urlvars['tenant_id'], upgrade)})


@util.wsgify
def cancel_upgrade(req):
    context = req.environ[util.CONTEXT_KEY]
    policy.authorize(context, policies.CANCEL)
    upgrade = upgrades.cancel_upgrade(context, _upgrade_id(req))
    return util.json_response(
        {'upgrade': views.upgrade(req, req.urlvars['tenant_id'], upgrade)})
