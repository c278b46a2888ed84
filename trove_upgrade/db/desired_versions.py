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

"""Database API of desired versions, their events and their dispatches.

One module per resource, beside ``db.api`` whose context manager and
checks it shares. Status changes are compare-and-swap updates, each
recorded in ``desired_version_events`` in the same transaction with who
made it, so the audit trail never misses a change that happened.
"""

import functools

from oslo_db import exception as db_exc
from oslo_log import log as logging
from oslo_utils import timeutils
from oslo_utils import uuidutils
import sqlalchemy as sa

from trove_upgrade.common import exception
from trove_upgrade.common import states
from trove_upgrade.db import common
from trove_upgrade.db import models
from trove_upgrade.db import rollouts as db_rollouts
from trove_upgrade.db import transitions as db_transitions
from trove_upgrade.db import upgrades as db_upgrades

LOG = logging.getLogger(__name__)

ACTIVE = 'ACTIVE'
PAUSED = 'PAUSED'
STATUSES = frozenset([ACTIVE, PAUSED])

_REQUIRED = frozenset([
    'name', 'package_name', 'version', 'selector', 'canary',
    'max_in_flight', 'max_in_flight_kind', 'max_failures',
    'max_failures_kind', 'per_agent_retries', 'agent_deadline'])
_UPDATES = frozenset(['status', 'status_detail', 'failures_acknowledged',
                      'version', 'canary', 'max_in_flight',
                      'max_in_flight_kind', 'max_failures',
                      'max_failures_kind', 'per_agent_retries',
                      'agent_deadline'])
_FILTERS = frozenset(['name', 'status', 'package_name', 'version'])
_INTEGERS = frozenset(['canary', 'max_in_flight', 'max_failures',
                       'per_agent_retries', 'agent_deadline',
                       'failures_acknowledged'])

_COLUMNS = ('id', 'name', 'package_name', 'version', 'selector', 'canary',
            'max_in_flight', 'max_in_flight_kind', 'max_failures',
            'max_failures_kind', 'per_agent_retries', 'agent_deadline',
            'status', 'status_detail', 'failures_acknowledged',
            'project_id', 'user_id', 'created_at', 'updated_at')


def _dict(row):
    found = {name: getattr(row, name) for name in _COLUMNS}
    # What the rollout planning code reads: the version it converges to.
    found['instance_version'] = row.version
    return found


def _event_dict(row):
    return {'created_at': row.created_at, 'action': row.action,
            'detail': row.detail, 'source': row.source,
            'user_id': row.user_id, 'project_id': row.project_id,
            'request_id': row.request_id}


def _event(session, context, dv_id, action, detail, source, now):
    session.execute(sa.insert(models.DesiredVersionEvent.__table__).values(
        desired_version_id=dv_id, created_at=now, action=action,
        detail=common.bounded_detail(detail), source=source,
        user_id=context.user_id, project_id=context.project_id,
        request_id=context.request_id))


def _get_row(session, dv_id):
    row = session.get(models.DesiredVersion, dv_id)
    if row is None:
        raise exception.DesiredVersionNotFoundError(desired_version_id=dv_id)
    return row


def create_desired_version(context, values, detail=None):
    """Record an ACTIVE desired version and its ``created`` event."""
    common.check_keys('desired version field', values, _REQUIRED,
                      _REQUIRED)
    common.check_strings(models.DesiredVersion, values,
                         ['name', 'package_name', 'version',
                          'max_in_flight_kind', 'max_failures_kind'])
    db_rollouts.check_integers(values, _INTEGERS)
    common.check_json_object('selector', values['selector'])
    now = timeutils.utcnow()
    row = models.DesiredVersion(
        id=uuidutils.generate_uuid(), status=ACTIVE, status_detail=None,
        failures_acknowledged=0, project_id=context.project_id,
        user_id=context.user_id, created_at=now, updated_at=now, **values)
    with common.context_manager.writer.using(context) as session:
        session.add(row)
        session.flush()
        _event(session, context, row.id, 'created', detail, 'api', now)
        return _dict(row)


def get_desired_version(context, dv_id, with_events=False):
    with common.context_manager.reader.using(context) as session:
        found = _dict(_get_row(session, dv_id))
        if with_events:
            found['events'] = list_events(context, dv_id)
        return found


def list_events(context, dv_id):
    """Every recorded change of a desired version, oldest first."""
    event = models.DesiredVersionEvent
    with common.context_manager.reader.using(context) as session:
        return [_event_dict(row) for row in session.scalars(
            sa.select(event).where(event.desired_version_id == dv_id)
            .order_by(event.id))]


def list_desired_versions(context, filters=None):
    """Desired versions, oldest first: the order of their precedence."""
    filters = filters or {}
    common.check_keys('desired version filter', filters, _FILTERS)
    names = tuple(sorted(filters))
    with common.context_manager.reader.connection.using(
            context) as connection:
        return [_dict(row) for row in connection.execute(
            _list_query(names),
            {'b_' + name: filters[name] for name in names})]


@functools.lru_cache(maxsize=None)
def _list_query(names):
    """The list filtered on the sorted ``names``, built once for them.

    Every reconciler pass lists the ACTIVE ones, and most find none.
    """
    table = models.DesiredVersion.__table__
    return (sa.select(*table.columns)
            .where(*(table.c[name] == sa.bindparam('b_' + name)
                     for name in names))
            .order_by(table.c.created_at, table.c.id))


@common.retry_on_deadlock
def update_desired_version(context, dv_id, values, action, source,
                           detail=None, from_states=STATUSES):
    """Set ``values`` if the status is one of ``from_states``; record it.

    Returns the desired version when this call changed it, None when its
    status had moved meanwhile.
    """
    common.check_keys('desired version column', values, _UPDATES)
    db_rollouts.check_integers(values, _INTEGERS)
    if 'status_detail' in values:
        values = dict(values, status_detail=common.bounded_detail(
            values['status_detail']))
    now = timeutils.utcnow()
    model = models.DesiredVersion
    with common.context_manager.writer.using(context) as session:
        result = session.execute(
            sa.update(model)
            .where(model.id == dv_id, model.status.in_(sorted(from_states)))
            .values(updated_at=now, **values)
            .execution_options(synchronize_session=False))
        row = _get_row(session, dv_id)
        if result.rowcount != 1:
            return None
        _event(session, context, dv_id, action, detail, source, now)
        return _dict(row)


@common.retry_on_deadlock
def delete_desired_version(context, dv_id):
    """Delete it and its dispatches; its upgrades and events stay."""
    with common.context_manager.writer.using(context) as session:
        # An API request, while the conductors write its dispatches.
        common.take_sqlite_write_lock(session.connection(),
                                      models.DesiredVersion.__table__)
        _get_row(session, dv_id)
        now = timeutils.utcnow()
        _event(session, context, dv_id, 'deleted', None, 'api', now)
        session.execute(
            sa.delete(models.DesiredVersionDispatch)
            .where(models.DesiredVersionDispatch.desired_version_id == dv_id))
        session.execute(sa.delete(models.DesiredVersion)
                        .where(models.DesiredVersion.id == dv_id))


@common.retry_on_deadlock
def acquire_lease(context, dv_id, owner, until):
    """Take or renew the right to reconcile a desired version."""
    with common.context_manager.writer.using(context) as session:
        return common.take_lease(session, models.DesiredVersion, dv_id,
                                 owner, until)


def list_dispatches(context, dv_id):
    """Every attempt with its upgrade's status, by instance, round, attempt.

    The same shape as ``db.api.list_rollout_dispatches``, plus ``round``
    and the ``version`` its upgrade installs.
    """
    dispatch = models.DesiredVersionDispatch
    with common.context_manager.reader.using(context) as session:
        rows = session.execute(
            sa.select(dispatch.instance_id, dispatch.round, dispatch.attempt,
                      dispatch.canary, dispatch.upgrade_id,
                      models.Upgrade.status, models.Upgrade.created_at,
                      models.Upgrade.finished_at,
                      models.Upgrade.instance_version)
            .join(models.Upgrade, models.Upgrade.id == dispatch.upgrade_id)
            .where(dispatch.desired_version_id == dv_id)
            .order_by(dispatch.instance_id, dispatch.round,
                      dispatch.attempt)).all()
    return [{'instance_id': r[0], 'round': r[1], 'attempt': r[2],
             'canary': r[3], 'upgrade_id': r[4], 'status': r[5],
             'created_at': r[6], 'finished_at': r[7], 'version': r[8]}
            for r in rows]


def owner_tag(dv_id):
    """The tag the upgrades of a desired version carry in their metadata."""
    return 'desired_version:%s' % dv_id


@common.retry_on_deadlock
def _create_upgrades(context, desired, package, targets, owner, resend_at):
    now = timeutils.utcnow()
    upgrades, events, dispatches = [], [], []
    for instance_id, round_, attempt, canary in targets:
        upgrade_id = uuidutils.generate_uuid()
        upgrades.append({
            'id': upgrade_id, 'instance_id': instance_id,
            'instance_version': desired['version'], 'from_version': None,
            'strategy': package['strategy'],
            'location': package['location'],
            'metadata': {'owner': owner_tag(desired['id'])},
            'allow_downgrade': False, 'status': states.PENDING,
            'status_detail': None, 'project_id': context.project_id,
            'user_id': context.user_id, 'request_id': context.request_id,
            'rollout_id': None, 'created_at': now, 'updated_at': now,
            'finished_at': None, **db_upgrades.first_send(resend_at),
            **common.expected_manifest_columns(
                package['expected_manifest'])})
        events.append(db_upgrades.event_row(
            context, upgrade_id, now, 'conductor', None, states.PENDING))
        dispatches.append({
            'desired_version_id': desired['id'], 'instance_id': instance_id,
            'round': round_, 'attempt': attempt, 'canary': canary,
            'upgrade_id': upgrade_id, 'created_at': now})
    model = models.DesiredVersion
    with common.context_manager.writer.using(context) as session:
        # First statement: SQLite takes its write lock here, and nobody
        # pauses, changes or takes over the desired version until commit.
        still_ours = session.execute(
            sa.update(model)
            .where(model.id == desired['id'], model.status == ACTIVE,
                   model.version == desired['version'],
                   model.lease_owner == owner)
            .values(updated_at=now)
            .execution_options(synchronize_session=False)).rowcount
        if not still_ours:
            return []
        session.execute(sa.insert(models.Upgrade.__table__), upgrades)
        session.execute(sa.insert(models.UpgradeEvent.__table__), events)
        session.execute(sa.insert(models.DesiredVersionDispatch.__table__),
                        dispatches)
    for upgrade in upgrades:
        upgrade['expected_manifest'] = package['expected_manifest']
    return upgrades


def create_upgrades(context, desired, package, targets, owner,
                    resend_at=None):
    """Record the upgrades a desired version dispatches, with dispatches.

    ``targets`` are ``(instance_id, round, attempt, canary)``; nothing is
    recorded unless the desired version is still ACTIVE at that version
    and ``owner`` holds its lease. An attempt recorded already (another
    conductor) is left out. With ``resend_at`` each counts as sent once
    already (see ``db.upgrades.first_send``).
    """
    try:
        return _create_upgrades(context, desired, package, targets, owner,
                                resend_at)
    except db_exc.DBDuplicateEntry:
        if len(targets) == 1:
            LOG.info('Attempt %s of desired version %s was dispatched '
                     'already.', targets[0], desired['id'])
            return []
    created = []
    for target in targets:
        created.extend(create_upgrades(context, desired, package, [target],
                                       owner, resend_at))
    return created


def timeout_upgrades(context, dv_id, created_before):
    """TIMED_OUT for its unfinished upgrades older than ``created_before``."""
    created_before = timeutils.normalize_time(created_before)
    dispatch = models.DesiredVersionDispatch
    with common.context_manager.reader.using(context) as session:
        candidates = session.scalars(
            sa.select(models.Upgrade.id)
            .join(dispatch, dispatch.upgrade_id == models.Upgrade.id)
            .where(dispatch.desired_version_id == dv_id,
                   models.Upgrade.status.not_in(states.FINAL_STATES),
                   models.Upgrade.created_at < created_before)
            .order_by(models.Upgrade.created_at, models.Upgrade.id)).all()
    timed_out = []
    for upgrade_id in candidates:
        changed, upgrade = db_transitions.transition_upgrade(
            context, upgrade_id, states.TIMED_OUT, 'conductor',
            detail="No final state within the desired version's agent "
                   "deadline.")
        if changed:
            timed_out.append(upgrade)
    return timed_out
