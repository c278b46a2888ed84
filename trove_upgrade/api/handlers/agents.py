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

"""Handlers of /v1.0/{tenant_id}/mgmt/agents."""

from oslo_utils import uuidutils
import webob

from trove_upgrade.api.schemas import agents as schema
from trove_upgrade.api import util
from trove_upgrade.api.views import agents as agent_views
from trove_upgrade.api.views import common as views
from trove_upgrade.common import exception
from trove_upgrade.policies import agents as policies
from trove_upgrade import policy
from trove_upgrade.services import agents


def _view(req, agent):
    down_time = req.environ[util.CONF_KEY].conductor.agent_down_time
    return agent_views.agent(req, req.urlvars['tenant_id'], agent, down_time)


def _labels(params):
    """``labels=k1:v1,k2:v2`` and ``group=g`` as one dict to match."""
    labels = {}
    for pair in filter(None, params.get('labels', '').split(',')):
        key, value = pair.split(':', 1)
        labels[key] = value
    if 'group' in params:
        labels['group'] = params['group']
    return labels


@util.wsgify
def list_agents(req):
    context = req.environ[util.CONTEXT_KEY]
    policy.authorize(context, policies.LIST)
    params = util.query_params(req, schema.LIST_AGENTS_QUERY)
    limit = util.get_limit(params, req.environ[util.CONF_KEY].api.max_limit)
    filters = {name: params[name] for name in
               ('guest_version', 'state', 'rpc_api_version')
               if name in params}
    labels = _labels(params)
    if labels:
        filters['labels'] = labels
    reachable = None
    if 'health' in params:
        reachable = params['health'] == 'reachable'
    found = agents.list_agents(
        context, filters=filters, limit=limit,
        marker=util.get_marker(params), reachable=reachable,
        down_time=req.environ[util.CONF_KEY].conductor.agent_down_time)
    items = [_view(req, a) for a in found]
    return util.json_response(
        views.page(req, 'agents', items, limit, 'instance_id'))


def _instance_id(req):
    """The instance of the URL; a malformed one has no agent: 404."""
    instance_id = req.urlvars['instance_id']
    if not uuidutils.is_uuid_like(instance_id):
        raise exception.AgentNotFoundError(instance_id=instance_id)
    return util.canonical_id(instance_id)


@util.wsgify
def show_agent(req):
    context = req.environ[util.CONTEXT_KEY]
    policy.authorize(context, policies.SHOW)
    return util.json_response(
        {'agent': _view(req, agents.get_agent(context, _instance_id(req)))})


@util.wsgify
def delete_agent(req):
    """Forget the agent of a deleted instance, so rollouts stop picking it.

    A live agent registers again with its next heartbeat.
    """
    context = req.environ[util.CONTEXT_KEY]
    policy.authorize(context, policies.DELETE)
    agents.delete_agent(context, _instance_id(req))
    return webob.Response(status=204)
