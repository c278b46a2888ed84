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

"""Database API of upgrades and their events.

State changes are in ``trove_upgrade.db.transitions``.
"""


from oslo_log import log as logging
from oslo_utils import timeutils
from oslo_utils import uuidutils
import sqlalchemy as sa

from trove_upgrade.common import exception
from trove_upgrade.common import states
from trove_upgrade.db import common
from trove_upgrade.db import instance_keys
from trove_upgrade.db import models

LOG = logging.getLogger(__name__)

_UPGRADE_REQUIRED = frozenset(['instance_id', 'instance_version', 'strategy',
                               'location'])
_UPGRADE_OPTIONAL = frozenset(['metadata', 'allow_downgrade', 'rollout_id',
                               'expected_manifest'])
_UPGRADE_FILTERS = frozenset(['instance_id', 'status', 'instance_version',
                              'rollout_id'])


def check_state(state):
    if state not in states.ALL_STATES:
        raise exception.InvalidInputError(
            reason='unknown upgrade state %r' % (state,))


def upgrade_dict(row):
    return {
        'id': row.id,
        'instance_id': row.instance_id,
        'instance_version': row.instance_version,
        'from_version': row.from_version,
        'strategy': row.strategy,
        'location': row.location,
        'metadata': row.upgrade_metadata,
        'allow_downgrade': row.allow_downgrade,
        'status': row.status,
        'status_detail': row.status_detail,
        'project_id': row.project_id,
        'user_id': row.user_id,
        'request_id': row.request_id,
        'rollout_id': row.rollout_id,
        'created_at': row.created_at,
        'updated_at': row.updated_at,
        'finished_at': row.finished_at,
        'resend_at': row.resend_at,
        'send_count': row.send_count,
        'expected_manifest': common.expected_manifest_of(row),
    }


def _event_dict(row):
    return {
        'id': row.id,
        'created_at': row.created_at,
        'source': row.source,
        'from_state': row.from_state,
        'to_state': row.to_state,
        'detail': row.detail,
        'request_id': row.request_id,
    }


def event_row(context, upgrade_id, now, source, from_state, to_state,
              detail=None):
    """The values of one ``upgrade_events`` row, for a plain INSERT."""
    return {'upgrade_id': upgrade_id, 'created_at': now, 'source': source,
            'from_state': from_state, 'to_state': to_state,
            'detail': detail, 'request_id': context.request_id}


def _copied_events():
    event, upgrade = models.UpgradeEvent, models.Upgrade
    return sa.insert(event).from_select(
        [event.upgrade_id, event.created_at, event.source, event.from_state,
         event.to_state, event.detail, event.request_id],
        sa.select(upgrade.id,
                  sa.bindparam('b_now', type_=models.DateTime),
                  sa.bindparam('b_source', type_=sa.String),
                  sa.bindparam('b_from', type_=sa.String),
                  sa.bindparam('b_to', type_=sa.String),
                  sa.bindparam('b_detail', type_=sa.Text),
                  sa.bindparam('b_request_id', type_=sa.String))
        .where(upgrade.id.in_(sa.bindparam('b_ids', expanding=True)))
        .order_by(upgrade.id))


# Built once, with the ids as one expanding parameter: building it with
# hundreds of ids cost a batch more CPU than running it.
_COPIED_EVENTS = _copied_events()


def insert_events(connection, context, upgrade_ids, now, source, from_state,
                  to_state, detail=None):
    """The same event for each of ``upgrade_ids``, in one statement.

    Copied from the upgrades' rows by the database (INSERT ... SELECT):
    a batch of hundreds binds its values once, not once per row, which
    cost a reconciler pass more CPU than the rows' own inserts.
    ``connection`` is the transaction's connection, or its session.
    """
    connection.execute(_COPIED_EVENTS, {
        'b_ids': list(upgrade_ids), 'b_now': now, 'b_source': source,
        'b_from': from_state, 'b_to': to_state, 'b_detail': detail,
        'b_request_id': context.request_id})


def _get_upgrade_row(session, upgrade_id):
    row = session.get(models.Upgrade, upgrade_id)
    if row is None:
        raise exception.UpgradeNotFoundError(upgrade_id=upgrade_id)
    return row


def _upgrade_with_events(session, upgrade_id, with_events):
    result = upgrade_dict(_get_upgrade_row(session, upgrade_id))
    if with_events:
        events = session.scalars(
            sa.select(models.UpgradeEvent)
            .where(models.UpgradeEvent.upgrade_id == upgrade_id)
            .order_by(models.UpgradeEvent.id))
        result['events'] = [_event_dict(e) for e in events]
    return result


@common.retry_on_deadlock
def create_upgrade(context, values):
    """Record a new upgrade, PENDING, and its first event, atomically."""
    upgrade, events = _new_upgrade(context, values, None)
    with common.context_manager.writer.connection.using(
            context) as connection:
        _insert_upgrade(connection, upgrade, events)
    return upgrade


@common.retry_on_deadlock
def create_sent_upgrade(context, values, resend_at):
    """Record a new upgrade SENT, for a caller that casts it at once.

    Its PENDING and SENT events are recorded with it, in one transaction:
    its first send is recorded before the cast, and the upgrade is cast
    again at ``resend_at`` until its agent claims it
    (``trove_upgrade.services.resends``), so that a caller that dies before its
    cast leaves nothing undelivered. The instance's unexpired keys, to
    seal that cast with, are read in the same transaction rather than in
    one of their own.

    :returns: ``(upgrade, keys)``, ``keys`` as
        ``instance_keys.get_instance_keys_of`` gives them.
    """
    upgrade, events = _new_upgrade(context, values, resend_at)
    with common.context_manager.writer.connection.using(
            context) as connection:
        # Written first: on SQLite a transaction that read before its
        # first write can be refused the write lock by a concurrent one.
        _insert_upgrade(connection, upgrade, events)
        keys = instance_keys.read_keys_of(connection,
                                          [upgrade['instance_id']])
    return upgrade, keys


def first_send(resend_at):
    """The send columns of an upgrade recorded before the conductor casts it.

    With ``resend_at`` it counts as sent once, so a conductor killed
    between the record and the cast leaves an upgrade the reconcilers cast
    again at ``resend_at``, not one that only its deadline ends.
    """
    if resend_at is None:
        return {'resend_at': None, 'send_count': 0}
    return {'resend_at': resend_at, 'send_count': 1}


def _new_upgrade(context, values, resend_at):
    """The checked row of a new upgrade and those of its events."""
    common.check_keys('upgrade field', values,
                      _UPGRADE_REQUIRED | _UPGRADE_OPTIONAL, _UPGRADE_REQUIRED)
    common.check_strings(models.Upgrade, values,
                         _UPGRADE_REQUIRED | {'rollout_id'})
    metadata = values.get('metadata')
    if metadata is None:
        metadata = {}
    common.check_json_object('metadata', metadata)
    allow_downgrade = values.get('allow_downgrade', False)
    if not isinstance(allow_downgrade, bool):
        raise exception.InvalidInputError(
            reason='allow_downgrade must be a boolean')
    now = timeutils.utcnow()
    upgrade = {
        'expected_manifest': values.get('expected_manifest'),
        'id': uuidutils.generate_uuid(),
        'instance_id': values['instance_id'],
        'instance_version': values['instance_version'],
        'from_version': None,
        'strategy': values['strategy'],
        'location': values['location'],
        'metadata': metadata,
        'allow_downgrade': allow_downgrade,
        'status': states.PENDING,
        'status_detail': None,
        'project_id': context.project_id,
        'user_id': context.user_id,
        'request_id': context.request_id,
        'rollout_id': values.get('rollout_id'),
        'created_at': now,
        'updated_at': now,
        'finished_at': None,
        'resend_at': None,
        'send_count': 0,
    }
    events = [event_row(context, upgrade['id'], now, 'api', None,
                        states.PENDING)]
    if resend_at is not None:
        upgrade.update(status=states.SENT, resend_at=resend_at,
                       send_count=1)
        events.append(event_row(context, upgrade['id'], now, 'api',
                                states.PENDING, states.SENT))
    return upgrade, events


def _insert_upgrade(connection, upgrade, events):
    # Prebuilt INSERTs on a plain connection: the ORM's unit of work, and
    # building the statements, cost the API more CPU than executing them.
    # The events go in one execution (one statement on MySQL), in order.
    row = dict(upgrade, **common.expected_manifest_columns(
        upgrade['expected_manifest']))
    del row['expected_manifest']
    connection.execute(_INSERT_UPGRADE, row)
    connection.execute(INSERT_EVENT, events)


def get_upgrade(context, upgrade_id, with_events=False):
    """One upgrade; with its events, oldest first, when asked."""
    with common.context_manager.reader.using(context) as session:
        return _upgrade_with_events(session, upgrade_id, with_events)


def list_upgrades(context, filters=None, limit=None, marker=None):
    """Upgrades newest first, filtered by exact match, one page at a time."""
    filters = filters or {}
    common.check_keys('upgrade filter', filters, _UPGRADE_FILTERS)
    common.check_limit(limit)
    with common.context_manager.reader.using(context) as session:
        return [upgrade_dict(row) for row in common.newest_first_page(
            session, models.Upgrade, filters, limit, marker)]


def list_unfinished_upgrades(context, created_before):
    """Upgrades still in a non-final state created before a time.

    Oldest first; for ``trove-upgrade-status``, which reports what the
    conductor should have timed out, without changing anything.
    """
    created_before = timeutils.normalize_time(created_before)
    with common.context_manager.reader.using(context) as session:
        rows = session.scalars(
            sa.select(models.Upgrade)
            .where(models.Upgrade.status.not_in(states.FINAL_STATES),
                   models.Upgrade.created_at < created_before)
            .order_by(models.Upgrade.created_at, models.Upgrade.id)).all()
        return [upgrade_dict(row) for row in rows]


# The upgrade's columns under the names ``upgrade_dict`` reads, for plain
# rows: the ORM would build an object to throw away.
UPGRADE_COLUMNS = tuple(getattr(models.Upgrade, attr.key).label(attr.key)
                        for attr in models.Upgrade.__mapper__.column_attrs)

_UPGRADES = models.Upgrade.__table__
_INSERT_UPGRADE = sa.insert(_UPGRADES)
INSERT_EVENT = sa.insert(models.UpgradeEvent.__table__)


_PENDING_UNLOCKED = (
    sa.select(_UPGRADES.c.id)
    .where(_UPGRADES.c.id.in_(sa.bindparam('b_ids', expanding=True)),
           _UPGRADES.c.status == states.PENDING)
    .with_for_update(skip_locked=True))
_MARK_SENT = (
    sa.update(_UPGRADES)
    .where(_UPGRADES.c.id.in_(sa.bindparam('b_ids', expanding=True)))
    .values(status=states.SENT, status_detail=sa.bindparam('b_detail'),
            updated_at=sa.bindparam('b_now'),
            resend_at=sa.bindparam('b_resend_at'), send_count=1))


def mark_upgrades_sent(context, upgrade_ids, source, resend_at=None,
                       detail=None):
    """Move those of ``upgrade_ids`` still PENDING to SENT, with events.

    Each is cast again at ``resend_at`` unless its agent claims it first
    (``trove_upgrade.services.resends``); ``detail`` is recorded with each.

    One transaction for a whole batch of casts. An upgrade its agent
    claimed (or anyone moved) meanwhile is left alone, and so is one whose
    row another transaction holds, without waiting: that is a claim moving
    it past SENT, and under a fleet that claims as fast as it is sent to,
    waiting for those made this step slower than the casts. A claim that
    rolls back leaves its upgrade PENDING, which a resent claim accepts as
    it does SENT. Returns the ids moved.
    """
    if not upgrade_ids:
        return []
    now = timeutils.utcnow()
    with common.context_manager.writer.connection.using(
            context) as connection:
        common.take_sqlite_write_lock(connection, _UPGRADES)
        moved = connection.scalars(_PENDING_UNLOCKED,
                                   {'b_ids': list(upgrade_ids)}).all()
        if moved:
            connection.execute(_MARK_SENT, {
                'b_ids': moved, 'b_detail': detail, 'b_now': now,
                'b_resend_at': resend_at})
            insert_events(connection, context, moved, now, source,
                          states.PENDING, states.SENT, detail)
        return list(moved)


_BUSY_INSTANCES = (
    sa.select(_UPGRADES.c.instance_id).distinct()
    .where(_UPGRADES.c.status.not_in(states.FINAL_STATES)))


def list_busy_instances(context):
    """Instances with an upgrade in a non-final state, from anyone."""
    with common.context_manager.reader.connection.using(
            context) as connection:
        return set(connection.scalars(_BUSY_INSTANCES))
