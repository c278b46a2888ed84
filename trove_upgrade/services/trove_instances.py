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

"""What the control plane asks Trove before it sends an upgrade.

With ``[trove] connection`` set (``db/trove.py`` reads Trove's database,
never writes it):

* an upgrade or a rollout names instances Trove knows and has not deleted,
  by id or by name; a name must be unique among the instances the caller
  may see (its project's, every project's for an admin);
* an upgrade is held DEFERRED, not sent, while Trove works on its instance
  (a task other than NONE or RESTART_REQUIRED in ``instances.task_id``, or
  a backup in a running state) or while the instance's upgrade agent has
  not registered: its queue exists only once the agent started, and a
  cast to a missing queue is dropped by RabbitMQ. The conductor's periodic
  pass (``held_upgrades.send_held_upgrades``) sends it once neither holds;
* rollouts may select by Trove's facts (``selector.trove``).

Without the option none of this happens, as before the integration.
"""

import re

from trove_upgrade.common import exception
from trove_upgrade.db import agents as db_agents
from trove_upgrade.db import trove as trove_db

# Trove's InstanceTasks codes (trove/instance/tasks.py) during which Trove
# is not working on the instance: NONE, and RESTART_REQUIRED (a
# configuration change waits for the operator to restart the database).
# Every other task (BUILDING, REBOOTING, RESIZING, MIGRATING, PROMOTING,
# EJECTING, LOGGING, DETACHING, UPDATING, UPGRADING, DELETING and the
# *_ERROR tasks) holds upgrades.
IDLE_TASK_IDS = frozenset([0x01, 0x07])

# selector.trove key: the instance fact it matches.
FACTS = {
    'datastore': 'datastore',
    'datastore_version': 'datastore_version',
    'tenant_id': 'tenant_id',
    'region': 'region_id',
}

configured = trove_db.configured

_ID_RE = re.compile('^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-'
                    '[0-9a-f]{12}$')


def is_instance_id(value):
    """An instance id as Trove writes them: a lowercase dashed UUID."""
    return bool(_ID_RE.match(value))


def resolve_instance(context, id_or_name):
    """The id of the live instance ``id_or_name`` names.

    :raises: InstanceNotFoundError when none does (or only deleted ones do),
        AmbiguousInstanceNameError when several live ones have that name.
    """
    tenant_id = None if context.is_admin else context.project_id
    found = trove_db.find_instances(id_or_name, tenant_id)
    by_id = [i for i in found if i['id'] == id_or_name]
    if by_id:
        found = by_id
    live = [i for i in found if not i['deleted']]
    if not live:
        raise exception.InstanceNotFoundError(
            instance=id_or_name,
            reason='it was deleted.' if found else
            'no instance has this id or name.')
    if len(live) > 1:
        raise exception.AmbiguousInstanceNameError(
            name=id_or_name, ids=', '.join(i['id'] for i in live))
    return live[0]['id']


def resolve_instances(context, ids_or_names):
    """:func:`resolve_instance` of each; sorted ids, no duplicates."""
    return sorted({resolve_instance(context, i) for i in ids_or_names})


def busy_reason(instance):
    """Why Trove is busy with ``instance`` (a ``db.trove`` dict), or None."""
    if instance['task_id'] not in IDLE_TASK_IDS:
        return ('Trove is working on instance %s (task %s: %s)'
                % (instance['id'], instance['task_id'],
                   instance['task_description']))
    if instance['backup_running']:
        return 'a backup of instance %s is running in Trove' % instance['id']
    return None


def busy_instances(instance_ids):
    """Those of ``instance_ids`` Trove is busy with; none without Trove."""
    if not configured() or not instance_ids:
        return set()
    return {i for i, instance in trove_db.get_instances(instance_ids).items()
            if busy_reason(instance)}


def hold_reasons(context, instance_ids):
    """``{instance id: why its upgrade must wait}`` for those that must.

    An instance Trove no longer has is not held: its upgrade is sent and
    times out, as it would without Trove, rather than wait for ever.
    """
    reasons = {}
    for instance_id in instance_ids:
        try:
            db_agents.get_agent(context, instance_id)
        except exception.AgentNotFoundError:
            reasons[instance_id] = ('waiting for the upgrade agent of '
                                    'instance %s to register' % instance_id)
    if configured():
        for instance_id, instance in trove_db.get_instances(
                instance_ids).items():
            reason = busy_reason(instance)
            if reason:
                reasons[instance_id] = reason
    return reasons


def select(agents, trove_selector):
    """The ``agents`` whose Trove instance has every fact of the selector.

    :raises: TroveNotConfiguredError without ``[trove] connection``.
    """
    if not configured():
        raise exception.TroveNotConfiguredError(
            what='Selecting by Trove facts',
            hint='select by instance_ids, group or labels.')
    instances = trove_db.get_instances({a['instance_id'] for a in agents})
    return [a for a in agents
            if a['instance_id'] in instances
            and all(instances[a['instance_id']][FACTS[name]] == value
                    for name, value in trove_selector.items())]
