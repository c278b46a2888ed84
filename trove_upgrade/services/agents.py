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

"""The agents: what the API shows of them and what it may do to them.

Reads pass through to ``db/agents.py``; this module is the one the API
calls, so that handlers do not reach the database themselves.
"""

import datetime

from oslo_utils import timeutils

from trove_upgrade.common import exception
from trove_upgrade.db import agents as db


def list_agents(context, filters=None, limit=None, marker=None,
                reachable=None, down_time=None):
    """Agents ordered by instance id, one page at a time.

    With ``reachable`` True or False, only the agents heard from within
    ``down_time`` seconds, or only the others.
    """
    if reachable is None:
        return db.list_agents(context, filters=filters, limit=limit,
                              marker=marker)
    return db.list_agents_by_health(
        context, reachable,
        timeutils.utcnow() - datetime.timedelta(seconds=down_time),
        filters=filters, limit=limit, marker=marker)


def get_agent(context, instance_id):
    """:raises: AgentNotFoundError."""
    return db.get_agent(context, instance_id)


def delete_agent(context, instance_id):
    """Forget an instance's agent, unless an upgrade of it is unfinished."""
    db.delete_agent(context, instance_id)


def agents_of(context, instance_id):
    """The instance's agent, in a list; empty before it registered."""
    try:
        return [db.get_agent(context, instance_id)]
    except exception.AgentNotFoundError:
        return []


def is_registered(context, instance_id):
    return bool(db.list_selected_agents(
        context, {'instance_ids': [instance_id]}))


def running_versions(context, instance_ids):
    """``{instance_id: guest_version}`` of the registered ones."""
    return {a['instance_id']: a['guest_version'] for a in
            db.list_selected_agents(
                context, {'instance_ids': sorted(instance_ids)})}
