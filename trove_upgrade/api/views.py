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

"""Response bodies: what the API shows of upgrades, events and agents."""

import urllib.parse

from oslo_utils import timeutils

from trove_upgrade.api import util

MGMT_PATH = '/v1.0/%s/mgmt'


def _url(req, tenant_id, *parts):
    return '/'.join((req.application_url + MGMT_PATH % tenant_id,) + parts)


def _links(req, tenant_id, *parts):
    return [{'rel': 'self', 'href': _url(req, tenant_id, *parts)}]


def upgrade_url(req, tenant_id, upgrade_id):
    return _url(req, tenant_id, 'upgrades', upgrade_id)


def _event(event):
    return {
        'created_at': util.isotime(event['created_at']),
        'source': event['source'],
        'from_state': event['from_state'],
        'to_state': event['to_state'],
        'detail': event['detail'],
        'request_id': event['request_id'],
    }


def upgrade(req, tenant_id, upgrade):
    """One upgrade; its ``events`` when the dict carries them."""
    body = {
        'id': upgrade['id'],
        'instance_id': upgrade['instance_id'],
        'instance_version': upgrade['instance_version'],
        'from_version': upgrade['from_version'],
        'strategy': upgrade['strategy'],
        'location': upgrade['location'],
        'metadata': upgrade['metadata'],
        'allow_downgrade': upgrade['allow_downgrade'],
        'expected_manifest': upgrade['expected_manifest'],
        'status': upgrade['status'],
        'status_detail': upgrade['status_detail'],
        'rollout_id': upgrade['rollout_id'],
        'project_id': upgrade['project_id'],
        'user_id': upgrade['user_id'],
        'request_id': upgrade['request_id'],
        'created_at': util.isotime(upgrade['created_at']),
        'updated_at': util.isotime(upgrade['updated_at']),
        'finished_at': util.isotime(upgrade['finished_at']),
        'links': _links(req, tenant_id, 'upgrades', upgrade['id']),
    }
    if 'events' in upgrade:
        body['events'] = [_event(e) for e in upgrade['events']]
    return body


def agent(req, tenant_id, agent, down_time):
    """One agent; ``reachable`` is False once it missed ``down_time``."""
    last_heartbeat = agent['last_heartbeat_at']
    return {
        'instance_id': agent['instance_id'],
        'agent_version': agent['agent_version'],
        'guest_version': agent['guest_version'],
        'rpc_api_version': agent['rpc_api_version'],
        'state': agent['state'],
        'labels': agent['labels'],
        'host': agent['host'],
        'last_heartbeat': util.isotime(last_heartbeat),
        'reachable': (last_heartbeat is not None and not
                      timeutils.is_older_than(last_heartbeat, down_time)),
        'created_at': util.isotime(agent['created_at']),
        'updated_at': util.isotime(agent['updated_at']),
        'links': _links(req, tenant_id, 'agents', agent['instance_id']),
    }


def page(req, key, items, limit, marker_key):
    """A list body; a full page carries a ``next`` link to the next one."""
    body = {key: items}
    if items and len(items) == limit:
        params = [(name, value) for name, value in req.GET.items()
                  if name not in ('limit', 'marker')]
        params += [('limit', str(limit)), ('marker', items[-1][marker_key])]
        body['links'] = [{
            'rel': 'next',
            'href': req.path_url + '?' + urllib.parse.urlencode(params),
        }]
    return body


def rollout_url(req, tenant_id, rollout_id):
    return _url(req, tenant_id, 'rollouts', rollout_id)


def _threshold(value, kind):
    return '%d%%' % value if kind == 'percent' else value


def rollout(req, tenant_id, rollout, plan=None):
    """One rollout; with counters and each agent's state given its plan."""
    body = {
        'id': rollout['id'],
        'name': rollout['name'],
        'instance_version': rollout['instance_version'],
        'strategy': rollout['strategy'],
        'location': rollout['location'],
        'selector': rollout['selector'],
        'canary': rollout['canary'],
        'max_in_flight': _threshold(rollout['max_in_flight'],
                                    rollout['max_in_flight_kind']),
        'max_failures': _threshold(rollout['max_failures'],
                                   rollout['max_failures_kind']),
        'per_agent_retries': rollout['per_agent_retries'],
        'agent_deadline': rollout['agent_deadline'],
        'start_at': util.isotime(rollout['start_at']),
        'status': rollout['status'],
        'status_detail': rollout['status_detail'],
        'failures_acknowledged': rollout['failures_acknowledged'],
        'order_by_topology': rollout['order_by_topology'],
        'hold_set_on_failure': rollout['hold_set_on_failure'],
        'expected_manifest': rollout['expected_manifest'],
        'project_id': rollout['project_id'],
        'user_id': rollout['user_id'],
        'created_at': util.isotime(rollout['created_at']),
        'updated_at': util.isotime(rollout['updated_at']),
        'finished_at': util.isotime(rollout['finished_at']),
        'links': _links(req, tenant_id, 'rollouts', rollout['id']),
    }
    if plan is not None:
        body['counters'] = plan.counters
        body['agents'] = [{'instance_id': instance_id, 'state': state}
                          for instance_id, state in sorted(
                              plan.agents.items())]
        # Trove's sets of its agents, each in the order it is upgraded.
        body['sets'] = plan.sets or []
    return body
