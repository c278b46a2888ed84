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

"""What the API shows of desired versions."""

from trove_upgrade.api import util
from trove_upgrade.api.views import common
from trove_upgrade.services import desired_versions


def desired_version(req, tenant_id, desired, view=None, events=None):
    """One desired version; its agents given its ``view``, its events."""
    body = {k: desired[k] for k in (
        'id', 'name', 'package_name', 'version', 'selector', 'canary',
        'per_agent_retries', 'agent_deadline', 'status', 'status_detail',
        'failures_acknowledged', 'project_id', 'user_id')}
    for name in ('max_in_flight', 'max_failures'):
        body[name] = common.threshold(desired[name], desired[name + '_kind'])
    body['created_at'] = util.isotime(desired['created_at'])
    body['updated_at'] = util.isotime(desired['updated_at'])
    body['links'] = common.links(req, tenant_id, 'desired-versions',
                                 desired['id'])
    if view is not None:
        agent_states = dict(view.plan.agents, **view.extra)
        body['counters'] = dict(
            view.plan.counters,
            **{state: list(view.extra.values()).count(state)
               for state in (desired_versions.AGENT_AHEAD,
                             desired_versions.AGENT_BLOCKED)})
        body['agents'] = [{'instance_id': i, 'state': s}
                          for i, s in sorted(agent_states.items())]
    if events is not None:
        body['events'] = [dict(e, created_at=util.isotime(e['created_at']))
                          for e in events]
    return body
