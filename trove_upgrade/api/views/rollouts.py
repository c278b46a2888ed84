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

"""What the API shows of rollouts."""

from trove_upgrade.api import util
from trove_upgrade.api.views import common


def url(req, tenant_id, rollout_id):
    return common.url(req, tenant_id, 'rollouts', rollout_id)


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
        'max_in_flight': common.threshold(rollout['max_in_flight'],
                                          rollout['max_in_flight_kind']),
        'max_failures': common.threshold(rollout['max_failures'],
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
        'links': common.links(req, tenant_id, 'rollouts', rollout['id']),
    }
    if plan is not None:
        body['counters'] = plan.counters
        body['agents'] = [{'instance_id': instance_id, 'state': state}
                          for instance_id, state in sorted(
                              plan.agents.items())]
        # Trove's sets of its agents, each in the order it is upgraded.
        body['sets'] = plan.sets or []
    return body
