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

"""One stateless pass over the desired versions, beside the rollouts'.

The rollout reconciler calls :func:`run` after its own pass, in the same
process, with its lease owner name and agent RPC client. Like a rollout,
a desired version is acted on only by the conductor holding its lease;
its upgrades are recorded, in one transaction with their dispatches, only
while that lease is still held and the desired version still ACTIVE at
the same version, then cast, then marked SENT; they count as sent from
that record, so a conductor killed before the cast leaves upgrades that
are cast again ``[conductor] resend_interval`` seconds later.
"""

import datetime

from oslo_log import log as logging
from oslo_utils import timeutils

from trove_upgrade.common import exception
from trove_upgrade.conductor import db_outage
from trove_upgrade import conf
from trove_upgrade.db import desired_versions as db
from trove_upgrade.services import desired_versions
from trove_upgrade.services import notifications
from trove_upgrade.services import resends
from trove_upgrade.services import rollout_plan
from trove_upgrade.services import upgrades

CONF = conf.CONF
LOG = logging.getLogger(__name__)


def list_active(context):
    """The ACTIVE desired versions, oldest first: what :func:`run` does."""
    return db.list_desired_versions(
        context, filters={'status': desired_versions.ACTIVE})


def run(context, owner, agent_api, active=None, topology=None):
    """Reconcile every ACTIVE desired version, oldest first.

    ``active`` is :func:`list_active`, and ``topology`` Trove's
    (``topology.read``), when the caller read them already.
    """
    if active is None:
        active = list_active(context)
    for desired in active:
        db_outage.attempt('Reconciling desired version %s' % desired['id'],
                          reconcile, context, desired, owner, agent_api,
                          topology)


def _pause(context, desired, reason):
    if db.update_desired_version(
            context, desired['id'],
            {'status': desired_versions.PAUSED, 'status_detail': reason},
            'paused', 'conductor', detail=reason,
            from_states={desired_versions.ACTIVE}):
        LOG.warning('Desired version %(id)s paused: %(reason)s',
                    {'id': desired['id'], 'reason': reason})


def reconcile(context, desired, owner, agent_api, topology=None):
    until = timeutils.utcnow() + datetime.timedelta(
        seconds=CONF.conductor.rollout_lease_time)
    if not db.acquire_lease(context, desired['id'], owner, until):
        return
    created_before = timeutils.utcnow() - datetime.timedelta(
        seconds=desired['agent_deadline'])
    for upgrade in db.timeout_upgrades(context, desired['id'],
                                       created_before):
        notifications.notify_final_state(context, upgrade)
    desired = db.get_desired_version(context, desired['id'])
    if desired['status'] != desired_versions.ACTIVE:
        return
    try:
        package = desired_versions.package_registry.resolve(
            context, desired['package_name'], desired['version'])
    except (exception.PackageConflictError,
            exception.PackageRejectedError) as e:
        # Retired (or gone) since it was declared: stop, and say why.
        _pause(context, desired, str(e))
        return
    view = desired_versions.view(context, desired, package, topology)
    plan = view.plan
    if plan.action == rollout_plan.PAUSE:
        _pause(context, desired, plan.reason)
        return
    if not plan.dispatch:
        return
    targets = [(instance_id, view.rounds[instance_id], attempt, canary)
               for instance_id, attempt, canary in plan.dispatch]
    created = db.create_upgrades(context, desired, package, targets, owner,
                                 resend_at=resends.resend_at(1))
    for upgrade in created:
        notifications.notify_upgrade(context, notifications.CREATE, upgrade)
    failed = agent_api.upgrade_many(
        context, created, threads=CONF.conductor.rollout_send_threads)
    sent = upgrades.record_casts(context, created, failed, 'conductor')
    LOG.info('Desired version %(id)s dispatched %(count)d upgrade(s).',
             {'id': desired['id'], 'count': len(sent)})
