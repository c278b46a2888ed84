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

"""Handlers of /mgmt/desired-versions and /mgmt/targets."""

import uuid

from oslo_utils import uuidutils
import webob
import webob.exc

from trove_upgrade.api.handlers import rollouts as rollout_handlers
from trove_upgrade.api.schemas import desired_versions as schema
from trove_upgrade.api import util
from trove_upgrade.api.views import common as views
from trove_upgrade.api.views import desired_versions as dv_views
from trove_upgrade.common import exception
from trove_upgrade.policies import desired_versions as policies
from trove_upgrade import policy
from trove_upgrade.services import agents
from trove_upgrade.services import desired_versions

# As a rollout's, but a standing declaration keeps its canary at 1 and
# retries each agent once before counting it failed.
_DEFAULTS = {'canary': 1, 'max_in_flight': 1, 'max_failures': 0,
             'per_agent_retries': 1, 'agent_deadline': 3600}


def _dv_id(req):
    dv_id = req.urlvars['desired_version_id']
    if not uuidutils.is_uuid_like(dv_id):
        raise exception.DesiredVersionNotFoundError(desired_version_id=dv_id)
    return util.canonical_id(dv_id)


def _instance_id(value):
    """An instance id of a selector, canonical; names are for rollouts."""
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise webob.exc.HTTPBadRequest(
            'Invalid JSON body: %r is not an instance id (a UUID); a '
            'desired version selects instances by id.' % value)


def _thresholds(values):
    for name in ('max_in_flight', 'max_failures'):
        if name in values:
            values[name], values[name + '_kind'] = (
                rollout_handlers.threshold_of(values[name]))
    return values


def _view(req, desired, with_agents=False):
    context = req.environ[util.CONTEXT_KEY]
    view = events = None
    if with_agents:
        view = desired_versions.view(context, desired)
        events = desired_versions.list_events(context, desired['id'])
    return dv_views.desired_version(req, req.urlvars['tenant_id'], desired,
                                    view, events)


@util.wsgify
def create_desired_version(req):
    context = req.environ[util.CONTEXT_KEY]
    policy.authorize(context, policies.CREATE)
    util.require_json(req)
    body = util.extract_json(req.body, schema.POST_DESIRED_VERSION)
    values = dict(_DEFAULTS, **body['desired_version'])
    values['package_name'] = values.pop('package')
    if 'instance_ids' in values['selector']:
        values['selector'] = dict(values['selector'], instance_ids=sorted(
            _instance_id(i) for i in values['selector']['instance_ids']))
    desired = desired_versions.create(context, _thresholds(values))
    view = _view(req, desired, with_agents=True)
    return util.json_response(
        {'desired_version': view}, status=201,
        headers=[('Location', view['links'][0]['href'])])


@util.wsgify
def list_desired_versions(req):
    context = req.environ[util.CONTEXT_KEY]
    policy.authorize(context, policies.LIST)
    params = util.query_params(req, schema.LIST_DESIRED_VERSIONS_QUERY)
    found = desired_versions.list_desired_versions(context,
                                                   filters=params)
    return util.json_response(
        {'desired_versions': [_view(req, d) for d in found]})


@util.wsgify
def show_desired_version(req):
    context = req.environ[util.CONTEXT_KEY]
    policy.authorize(context, policies.SHOW)
    desired = desired_versions.get_desired_version(context, _dv_id(req))
    return util.json_response(
        {'desired_version': _view(req, desired, with_agents=True)})


@util.wsgify
def update_desired_version(req):
    context = req.environ[util.CONTEXT_KEY]
    policy.authorize(context, policies.UPDATE)
    util.require_json(req)
    body = util.extract_json(req.body, schema.PATCH_DESIRED_VERSION)
    desired = desired_versions.change(
        context, _dv_id(req), _thresholds(dict(body['desired_version'])))
    return util.json_response(
        {'desired_version': _view(req, desired, with_agents=True)})


def _action(rule, function):
    return util.bodiless_action(
        lambda context: policy.authorize(context, rule),
        lambda context, req: function(context, _dv_id(req)),
        lambda req, desired: {'desired_version': _view(
            req, desired, with_agents=True)})


pause_desired_version = _action(policies.PAUSE, desired_versions.pause)
resume_desired_version = _action(policies.RESUME,
                                 desired_versions.resume)


@util.wsgify
def delete_desired_version(req):
    context = req.environ[util.CONTEXT_KEY]
    policy.authorize(context, policies.DELETE)
    desired_versions.delete(context, _dv_id(req))
    return webob.Response(status=204)


@util.wsgify
def list_targets(req):
    """Each selected instance's target version, its owner and why."""
    context = req.environ[util.CONTEXT_KEY]
    policy.authorize(context, policies.TARGETS)
    params = util.query_params(req, schema.LIST_TARGETS_QUERY)
    limit = util.get_limit(params, req.environ[util.CONF_KEY].api.max_limit)
    wanted = None
    if 'instance_id' in params:
        wanted = [str(uuid.UUID(params['instance_id']))]
    marker = params.get('marker')
    if marker is not None:
        marker = str(uuid.UUID(marker))
        if not agents.is_registered(context, marker):
            raise exception.MarkerNotFoundError(marker=marker)
    owners = desired_versions.owners(context, wanted, after=marker,
                                     limit=limit)
    running = agents.running_versions(context, owners)
    targets = []
    for instance_id in sorted(owners):
        target = desired_versions.describe_target(owners[instance_id])
        targets.append(dict(target, instance_id=instance_id,
                            running_version=running.get(instance_id)))
    return util.json_response(
        views.page(req, 'targets', targets, limit, 'instance_id'))
