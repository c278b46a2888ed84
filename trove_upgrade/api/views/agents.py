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

"""What the API shows of agents."""

from oslo_utils import timeutils

from trove_upgrade.api import util
from trove_upgrade.api.views import common


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
        'links': common.links(req, tenant_id, 'agents', agent['instance_id']),
    }
