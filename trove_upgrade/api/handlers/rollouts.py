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

"""Handlers of /v1.0/{tenant_id}/mgmt/rollouts."""

from oslo_utils import timeutils
from oslo_utils import uuidutils
import webob
import webob.exc

from trove_upgrade.api.handlers import upgrades as upgrade_handlers
from trove_upgrade.api.schemas import rollouts as schema
from trove_upgrade.api import util
from trove_upgrade.api.views import common as views
from trove_upgrade.api.views import rollouts as rollout_views
from trove_upgrade.common import exception
from trove_upgrade.policies import rollouts as policies
from trove_upgrade import policy
from trove_upgrade.services import packages as package_registry
from trove_upgrade.services import rollout_plan
from trove_upgrade.services import rollouts

# Defaults of the optional fields: one canary, one agent at a time, stop
# at the first failure, no retry, an hour per agent; Trove's replication
# sets and clusters followed, a set held when one of its members failed.
_DEFAULTS = {'canary': 1, 'max_in_flight': 1, 'max_failures': 0,
             'per_agent_retries': 0, 'agent_deadline': 3600,
             'order_by_topology': True, 'hold_set_on_failure': True}


def _rollout_id(req):
    rollout_id = req.urlvars['rollout_id']
    if not uuidutils.is_uuid_like(rollout_id):
        raise exception.RolloutNotFoundError(rollout_id=rollout_id)
    return util.canonical_id(rollout_id)


def threshold_of(value):
    """(number, kind) of a count or of a "10%" percent."""
    if isinstance(value, str):
        return int(value[:-1]), rollout_plan.PERCENT
    return value, rollout_plan.COUNT


def _start_at(value):
    if value is None:
        return None
    try:
        return timeutils.normalize_time(timeutils.parse_isotime(value))
    except (ValueError, OverflowError) as e:
        # OverflowError: a time whose offset takes it out of years 1-9999.
        raise webob.exc.HTTPBadRequest(
            'Invalid JSON body: start_at %r is not an ISO 8601 time: %s'
            % (value, e))


def _values(body):
    values = dict(_DEFAULTS, **body['rollout'])
    upgrade_handlers.check_version(values['instance_version'])
    if 'instance_ids' in values['selector']:
        values['selector'] = dict(values['selector'], instance_ids=sorted(
            upgrade_handlers.normalized_instance(i)
            for i in values['selector']['instance_ids']))
    for name in ('max_in_flight', 'max_failures'):
        values[name], values[name + '_kind'] = threshold_of(values[name])
    values['start_at'] = _start_at(values.get('start_at'))
    return values


def _view(req, rollout, with_agents=False):
    plan = None
    if with_agents:
        plan = rollouts.plan_for(req.environ[util.CONTEXT_KEY], rollout)
    return rollout_views.rollout(req, req.urlvars['tenant_id'], rollout, plan)


@util.wsgify
def create_rollout(req):
    context = req.environ[util.CONTEXT_KEY]
    policy.authorize(context, policies.CREATE)
    util.require_json(req)
    values = _values(util.extract_json(req.body, schema.POST_ROLLOUT))
    selected = rollouts.select_agents(context, values['selector'])
    util.check_package_reference(values)
    package_registry.deploy_by_reference(context, values, selected)
    rollout = rollouts.create_rollout(context, values)
    tenant_id = req.urlvars['tenant_id']
    return util.json_response(
        {'rollout': _view(req, rollout, with_agents=True)}, status=201,
        headers=[('Location',
                  rollout_views.url(req, tenant_id, rollout['id']))])


@util.wsgify
def list_rollouts(req):
    context = req.environ[util.CONTEXT_KEY]
    policy.authorize(context, policies.LIST)
    params = util.query_params(req, schema.LIST_ROLLOUTS_QUERY)
    limit = util.get_limit(params, req.environ[util.CONF_KEY].api.max_limit)
    filters = {name: params[name] for name in ('status', 'name')
               if name in params}
    found = rollouts.list_rollouts(context, filters=filters, limit=limit,
                                   marker=util.get_marker(params))
    items = [_view(req, r) for r in found]
    return util.json_response(views.page(req, 'rollouts', items, limit,
                                         'id'))


@util.wsgify
def show_rollout(req):
    context = req.environ[util.CONTEXT_KEY]
    policy.authorize(context, policies.SHOW)
    rollout = rollouts.get_rollout(context, _rollout_id(req))
    return util.json_response(
        {'rollout': _view(req, rollout, with_agents=True)})


def _action(rule, function):
    return util.bodiless_action(
        lambda context: policy.authorize(context, rule),
        lambda context, req: function(context, _rollout_id(req)),
        lambda req, rollout: {'rollout': _view(req, rollout,
                                               with_agents=True)})


pause_rollout = _action(policies.PAUSE, rollouts.pause_rollout)
resume_rollout = _action(policies.RESUME, rollouts.resume_rollout)
abort_rollout = _action(policies.ABORT, rollouts.abort_rollout)


@util.wsgify
def delete_rollout(req):
    context = req.environ[util.CONTEXT_KEY]
    policy.authorize(context, policies.DELETE)
    rollouts.delete_rollout(context, _rollout_id(req))
    return webob.Response(status=204)
