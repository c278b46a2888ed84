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

"""Database API of rollouts, their leases and their dispatches.

A rollout's status changes are compare-and-swap updates, like the
upgrades'; the upgrades a rollout dispatches are recorded with their
dispatch rows in one transaction.
"""

import collections
import functools

from oslo_db import exception as db_exc
from oslo_log import log as logging
from oslo_utils import timeutils
from oslo_utils import uuidutils
import sqlalchemy as sa

from trove_upgrade.common import exception
from trove_upgrade.common import rollout_states
from trove_upgrade.common import states
from trove_upgrade.db import common
from trove_upgrade.db import models
from trove_upgrade.db import transitions as db_transitions
from trove_upgrade.db import upgrades as db_upgrades

LOG = logging.getLogger(__name__)

_ROLLOUT_REQUIRED = frozenset([
    'name', 'instance_version', 'strategy', 'location', 'selector',
    'canary', 'max_in_flight', 'max_in_flight_kind', 'max_failures',
    'max_failures_kind', 'per_agent_retries', 'agent_deadline', 'status'])
_ROLLOUT_OPTIONAL = frozenset(['start_at', 'status_detail',
                               'order_by_topology', 'hold_set_on_failure',
                               'expected_manifest'])
_ROLLOUT_BOOLEANS = frozenset(['order_by_topology', 'hold_set_on_failure'])
_ROLLOUT_INTEGERS = frozenset(['canary', 'max_in_flight', 'max_failures',
                               'per_agent_retries', 'agent_deadline',
                               'failures_acknowledged'])
# Columns ``update_rollout`` may set.
_ROLLOUT_UPDATES = frozenset(['status', 'status_detail',
                              'failures_acknowledged'])
_ROLLOUT_FILTERS = frozenset(['status', 'name'])


def _rollout_dict(row):
    return {
        'id': row.id,
        'name': row.name,
        'instance_version': row.instance_version,
        'strategy': row.strategy,
        'location': row.location,
        'selector': row.selector,
        'canary': row.canary,
        'max_in_flight': row.max_in_flight,
        'max_in_flight_kind': row.max_in_flight_kind,
        'max_failures': row.max_failures,
        'max_failures_kind': row.max_failures_kind,
        'per_agent_retries': row.per_agent_retries,
        'agent_deadline': row.agent_deadline,
        'start_at': row.start_at,
        'status': row.status,
        'status_detail': row.status_detail,
        'failures_acknowledged': row.failures_acknowledged,
        'order_by_topology': row.order_by_topology,
        'hold_set_on_failure': row.hold_set_on_failure,
        'expected_manifest': common.expected_manifest_of(row),
        'project_id': row.project_id,
        'user_id': row.user_id,
        'created_at': row.created_at,
        'updated_at': row.updated_at,
        'finished_at': row.finished_at,
    }


def check_integers(values, names):
    """Refuse a value of ``names`` that is not a non-negative integer."""
    for name in names:
        if name not in values:
            continue
        value = values[name]
        if isinstance(value, bool) or not isinstance(value, int) \
                or value < 0:
            raise exception.InvalidInputError(
                reason='%s must be a non-negative integer, not %r'
                       % (name, value))


def _get_rollout_row(session, rollout_id):
    row = session.get(models.Rollout, rollout_id)
    if row is None:
        raise exception.RolloutNotFoundError(rollout_id=rollout_id)
    return row


@common.retry_on_deadlock
def create_rollout(context, values):
    """Record a new rollout as ``values`` describe it."""
    common.check_keys('rollout field', values,
                      _ROLLOUT_REQUIRED | _ROLLOUT_OPTIONAL, _ROLLOUT_REQUIRED)
    common.check_strings(models.Rollout, values,
                         ['name', 'instance_version', 'strategy', 'location',
                          'max_in_flight_kind', 'max_failures_kind',
                          'status'])
    check_integers(values, _ROLLOUT_INTEGERS)
    for name in _ROLLOUT_BOOLEANS & values.keys():
        if not isinstance(values[name], bool):
            raise exception.InvalidInputError(
                reason='%s must be true or false, not %r'
                % (name, values[name]))
    common.check_json_object('selector', values['selector'])
    values = dict(values, **common.expected_manifest_columns(
        values.get('expected_manifest')))
    values.pop('expected_manifest', None)
    now = timeutils.utcnow()
    start_at = values.get('start_at')
    rollout = models.Rollout(
        id=uuidutils.generate_uuid(),
        failures_acknowledged=0,
        project_id=context.project_id,
        user_id=context.user_id,
        created_at=now,
        updated_at=now,
        **dict(values, start_at=start_at and timeutils.normalize_time(
            start_at)))
    with common.context_manager.writer.using(context) as session:
        session.add(rollout)
        session.flush()
        return _rollout_dict(rollout)


def get_rollout(context, rollout_id):
    with common.context_manager.reader.using(context) as session:
        return _rollout_dict(_get_rollout_row(session, rollout_id))


def list_rollouts(context, filters=None, limit=None, marker=None):
    """Rollouts newest first, filtered by exact match, one page at a time."""
    filters = filters or {}
    common.check_keys('rollout filter', filters, _ROLLOUT_FILTERS)
    common.check_limit(limit)
    with common.context_manager.reader.using(context) as session:
        return [_rollout_dict(row) for row in common.newest_first_page(
            session, models.Rollout, filters, limit, marker)]


# Plain rows rather than ORM objects for what every reconcile pass reads,
# on a connection rather than a session, in statements built once: the
# ORM, and building the statements, cost a pass more CPU than running
# them.
_ROLLOUTS = models.Rollout.__table__
_ROLLOUT_ROWS = sa.select(*_ROLLOUTS.columns)
_ROLLOUTS_IN = (
    _ROLLOUT_ROWS
    .where(_ROLLOUTS.c.status.in_(sa.bindparam('b_statuses',
                                               expanding=True)))
    .order_by(_ROLLOUTS.c.created_at, _ROLLOUTS.c.id))
_READ_ROLLOUT = _ROLLOUT_ROWS.where(_ROLLOUTS.c.id == sa.bindparam('b_id'))


def list_rollouts_in(context, statuses):
    """Rollouts in any of ``statuses``, oldest first (their precedence)."""
    with common.context_manager.reader.connection.using(
            context) as connection:
        rows = connection.execute(
            _ROLLOUTS_IN, {'b_statuses': sorted(statuses)}).all()
        return [_rollout_dict(row) for row in rows]


@common.retry_on_deadlock
def update_rollout(context, rollout_id, from_states, values,
                   finished=False):
    """Set ``values`` if the rollout is still in one of ``from_states``.

    A compare-and-swap on the status, like the upgrades'. Returns the
    rollout when this call changed it, None when its status had moved.

    :raises: RolloutNotFoundError
    """
    common.check_keys('rollout column', values, _ROLLOUT_UPDATES)
    check_integers(values, _ROLLOUT_INTEGERS)
    if 'status_detail' in values:
        values = dict(values, status_detail=common.bounded_detail(
            values['status_detail']))
    now = timeutils.utcnow()
    columns = dict(values, updated_at=now)
    if finished:
        columns['finished_at'] = now
    with common.context_manager.writer.using(context) as session:
        result = session.execute(
            sa.update(models.Rollout)
            .where(models.Rollout.id == rollout_id,
                   models.Rollout.status.in_(sorted(from_states)))
            .values(**columns)
            .execution_options(synchronize_session=False))
        row = _get_rollout_row(session, rollout_id)
        if result.rowcount != 1:
            return None
        return _rollout_dict(row)


@common.retry_on_deadlock
def lease_rollout(context, rollout_id, owner, until):
    """Take or renew the right to reconcile a rollout until ``until``.

    The rollout as it is now when ``owner`` holds the lease (nobody held
    it, it expired, or ``owner`` held it already), in one transaction with
    the lease, as a reconcile pass starts; None when another conductor
    holds it.
    """
    with common.context_manager.writer.connection.using(
            context) as connection:
        if not common.take_lease(connection, models.Rollout, rollout_id,
                                 owner, until):
            return None
        return _rollout_dict(connection.execute(
            _READ_ROLLOUT, {'b_id': rollout_id}).one())


@common.retry_on_deadlock
def release_rollout_lease(context, rollout_id, owner):
    """Give up the lease ``owner`` holds, if it still does."""
    with common.context_manager.writer.using(context) as session:
        session.execute(
            sa.update(models.Rollout)
            .where(models.Rollout.id == rollout_id,
                   models.Rollout.lease_owner == owner)
            .values(lease_owner=None, lease_until=None)
            .execution_options(synchronize_session=False))


@common.retry_on_deadlock
def delete_rollout(context, rollout_id, allowed_states):
    """Delete a rollout in one of ``allowed_states`` and its dispatches.

    The upgrades it dispatched stay, tagged with its id.

    :raises: RolloutNotFoundError; InvalidRolloutStateError in another state.
    """
    with common.context_manager.writer.using(context) as session:
        # An API request, while the conductors write the rollout's
        # dispatches and leases.
        common.take_sqlite_write_lock(session.connection(),
                                      models.Rollout.__table__)
        row = _get_rollout_row(session, rollout_id)
        if row.status not in allowed_states:
            raise exception.InvalidRolloutStateError(
                rollout_id=rollout_id, status=row.status, action='deleted')
        session.execute(
            sa.delete(models.RolloutDispatch)
            .where(models.RolloutDispatch.rollout_id == rollout_id))
        session.execute(
            sa.delete(models.Rollout)
            .where(models.Rollout.id == rollout_id,
                   models.Rollout.status.in_(sorted(allowed_states))))


def list_rollout_dispatches(context, rollout_id):
    """Every attempt of a rollout with its upgrade's status.

    Ordered by instance and attempt.
    """
    dispatch = models.RolloutDispatch
    # Plain rows on a connection, as the selection's: a
    # reconcile pass reads every attempt of the rollout.
    with common.context_manager.reader.connection.using(
            context) as connection:
        rows = connection.execute(
            sa.select(dispatch.instance_id, dispatch.attempt,
                      dispatch.canary, dispatch.upgrade_id,
                      models.Upgrade.status, models.Upgrade.created_at,
                      models.Upgrade.finished_at)
            .join(models.Upgrade, models.Upgrade.id == dispatch.upgrade_id)
            .where(dispatch.rollout_id == rollout_id)
            .order_by(dispatch.instance_id, dispatch.attempt)).all()
    return [{'instance_id': r[0], 'attempt': r[1], 'canary': r[2],
             'upgrade_id': r[3], 'status': r[4], 'created_at': r[5],
             'finished_at': r[6]}
            for r in rows]


_UNFINISHED = models.Upgrade.status.not_in(states.FINAL_STATES)
_ENDED_UNSUCCESSFUL = models.Upgrade.status.in_(
    sorted(states.FINAL_STATES - {states.SUCCESS}))


RolloutCounts = collections.namedtuple(
    'RolloutCounts', ['unfinished', 'unsuccessful', 'beyond_canaries'])

_COUNT_ROLLOUT_UPGRADES = (
    sa.select(
        sa.func.coalesce(sa.func.sum(sa.case((_UNFINISHED, 1), else_=0)), 0),
        sa.func.coalesce(sa.func.sum(sa.case((_ENDED_UNSUCCESSFUL, 1),
                                             else_=0)), 0),
        sa.exists().where(
            models.RolloutDispatch.rollout_id == sa.bindparam('b_id'),
            models.RolloutDispatch.canary.is_(False)))
    .where(models.Upgrade.rollout_id == sa.bindparam('b_id')))


def count_rollout_upgrades(context, rollout_id):
    """A :class:`RolloutCounts` of the rollout's upgrades, in one query.

    How many are unfinished, how many ended other than SUCCESS, and
    whether an agent outside the canaries was dispatched to (the canary
    phase is over): what a pass reads, without the fleet, to know that it
    can only wait or that the next waiting agents are all it needs.
    Indexed by rollout.
    """
    with common.context_manager.reader.connection.using(
            context) as connection:
        row = connection.execute(_COUNT_ROLLOUT_UPGRADES,
                                 {'b_id': rollout_id}).one()
    return RolloutCounts(int(row[0]), int(row[1]), bool(row[2]))


def _batch_columns(context, rollout, now, resend_at):
    """The columns of a batch's upgrades but their ids and instances."""
    return {
        'instance_version': rollout['instance_version'],
        'from_version': None, 'strategy': rollout['strategy'],
        'location': rollout['location'], 'metadata': {},
        'allow_downgrade': False, 'status': states.PENDING,
        'status_detail': None, 'project_id': context.project_id,
        'user_id': context.user_id, 'request_id': context.request_id,
        'rollout_id': rollout['id'], 'created_at': now,
        'updated_at': now, 'finished_at': None,
        **common.expected_manifest_columns(rollout.get('expected_manifest')),
        **db_upgrades.first_send(resend_at)}


_STILL_OURS = (
    sa.update(_ROLLOUTS)
    .where(_ROLLOUTS.c.id == sa.bindparam('b_id'),
           _ROLLOUTS.c.status == rollout_states.RUNNING,
           _ROLLOUTS.c.lease_owner == sa.bindparam('b_owner'))
    .values(updated_at=sa.bindparam('b_now')))
_UPGRADES = models.Upgrade.__table__
# The most upgrades one INSERT records: SQLite's limit on the SELECTs of
# one UNION (SQLITE_MAX_COMPOUND_SELECT); PostgreSQL's parser runs out of
# stack on a few thousand.
_MAX_BATCH_INSERT = 500


@functools.lru_cache(maxsize=None)
def _insert_batch(size, shared):
    """INSERT ... SELECT of ``size`` upgrades alike but for two columns.

    Only ids and instances (``i0``, ``n0``, ...) are bound per row, in a
    UNION ALL of one-row SELECTs (which every supported database takes;
    a VALUES list MySQL does not); the ``shared`` columns (``b_<name>``)
    are bound once: binding and adapting every column of every row would
    be most of a reconciler pass's work. Building and compiling a statement
    of hundreds of rows costs about as much as binding them: sizes are
    powers of two (or ``_MAX_BATCH_INSERT``), padded with NULL rows the
    WHERE leaves out, so that a handful of statements is ever built.
    """
    own = sa.text(' UNION ALL '.join(
        'SELECT :i%d AS id, :n%d AS instance_id' % (i, i)
        for i in range(size))).columns(
            _UPGRADES.c.id, _UPGRADES.c.instance_id).subquery('v')
    return sa.insert(_UPGRADES).from_select(
        ['id', 'instance_id', *shared],
        sa.select(own.c.id, own.c.instance_id,
                  *[sa.bindparam('b_' + name, type_=_UPGRADES.c[name].type)
                    for name in shared])
        .where(own.c.id.is_not(None)))


def _insert_upgrades(connection, shared, rows):
    """Record upgrades of ``(id, instance_id)`` ``rows`` and ``shared``."""
    for start in range(0, len(rows), _MAX_BATCH_INSERT):
        chunk = rows[start:start + _MAX_BATCH_INSERT]
        size = min(1 << (len(chunk) - 1).bit_length(), _MAX_BATCH_INSERT)
        chunk += [(None, None)] * (size - len(chunk))
        params = {'b_' + name: value for name, value in shared.items()}
        for i, (upgrade_id, instance_id) in enumerate(chunk):
            params['i%d' % i] = upgrade_id
            params['n%d' % i] = instance_id
        connection.execute(_insert_batch(size, tuple(shared)), params)


_INSERT_DISPATCHES = sa.insert(models.RolloutDispatch.__table__)


@common.retry_on_deadlock
def _create_rollout_upgrades(context, rollout, targets, owner, resend_at):
    now = timeutils.utcnow()
    shared = _batch_columns(context, rollout, now, resend_at)
    rows = [(uuidutils.generate_uuid(), instance_id)
            for instance_id, attempt, canary in targets]
    with common.context_manager.writer.connection.using(
            context) as connection:
        # First statement, so SQLite takes the write lock here: from now
        # on nobody pauses, aborts or takes over the rollout until commit.
        still_ours = connection.execute(_STILL_OURS, {
            'b_id': rollout['id'], 'b_owner': owner, 'b_now': now}).rowcount
        if not still_ours:
            return None
        # A statement per table for the whole batch (per 500 upgrades):
        # a rollout dispatches hundreds at a time. Their first events are
        # copied from the upgrades' rows.
        _insert_upgrades(connection, shared, rows)
        db_upgrades.insert_events(connection, context,
                                  [upgrade_id for upgrade_id, _ in rows], now,
                                  'conductor', None, states.PENDING)
        connection.execute(_INSERT_DISPATCHES, [
            {'rollout_id': rollout['id'], 'instance_id': instance_id,
             'attempt': attempt, 'canary': canary, 'upgrade_id': upgrade_id,
             'created_at': now}
            for (upgrade_id, _), (instance_id, attempt, canary)
            in zip(rows, targets)])
    # What get_upgrade returns: the expectation as one value, not columns.
    returned = {k: v for k, v in shared.items()
                if k not in ('expected_manifest_sha256', 'expected_package')}
    expected = rollout.get('expected_manifest')
    return [dict(returned, id=upgrade_id, instance_id=instance_id,
                 metadata={}, expected_manifest=expected)
            for upgrade_id, instance_id in rows]


def create_rollout_upgrades(context, rollout, targets, owner,
                            resend_at=None):
    """Record the upgrades a rollout dispatches, each with its dispatch.

    ``targets`` are ``(instance_id, attempt, canary)``. Nothing is recorded
    unless the rollout is still RUNNING and ``owner`` still holds its
    lease. All are recorded in one transaction; when one attempt was
    recorded already (by another conductor), they are recorded one at a
    time and that one is left out. Returns the upgrades recorded, PENDING,
    tagged with the rollout's id. With ``resend_at`` each counts as sent
    once already (see ``db.upgrades.first_send``).
    """
    try:
        return _create_rollout_upgrades(context, rollout, targets,
                                        owner, resend_at) or []
    except db_exc.DBDuplicateEntry:
        if len(targets) == 1:
            LOG.info('Attempt %(attempt)d of rollout %(rollout)s at '
                     'instance %(instance)s was dispatched already.',
                     {'attempt': targets[0][1], 'rollout': rollout['id'],
                      'instance': targets[0][0]})
            return []
    created = []
    for target in targets:
        created.extend(create_rollout_upgrades(context, rollout, [target],
                                               owner, resend_at))
    return created


_OVERDUE = (
    sa.select(models.Upgrade.id)
    .where(models.Upgrade.rollout_id == sa.bindparam('b_id'), _UNFINISHED,
           models.Upgrade.created_at < sa.bindparam('b_before'))
    .order_by(models.Upgrade.created_at, models.Upgrade.id))


def timeout_rollout_upgrades(context, rollout_id, created_before):
    """TIMED_OUT for a rollout's unfinished upgrades created before a time.

    The rollout's ``agent_deadline`` closes its transactions; returns the
    upgrades this call changed.
    """
    created_before = timeutils.normalize_time(created_before)
    with common.context_manager.reader.connection.using(
            context) as connection:
        candidates = connection.scalars(_OVERDUE, {
            'b_id': rollout_id, 'b_before': created_before}).all()
    timed_out = []
    for upgrade_id in candidates:
        changed, upgrade = db_transitions.transition_upgrade(
            context, upgrade_id, states.TIMED_OUT, 'conductor',
            detail="No final state within the rollout's agent deadline.")
        if changed:
            timed_out.append(upgrade)
    return timed_out
