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

State changes are compare-and-swap updates on the ``status`` column: two
processes reporting the same change race on ``UPDATE ... WHERE status =
:from`` and only the one whose update matched a row records the event. The
loser re-reads the upgrade in a new transaction (MySQL's repeatable-read
snapshot would keep showing it the old status in the same one) and finds
its report to be a duplicate.
"""

import collections
import functools
import threading

import cachetools
from oslo_log import log as logging
from oslo_utils import timeutils
from oslo_utils import uuidutils
import sqlalchemy as sa

from trove_upgrade.common import exception
from trove_upgrade.common import states
from trove_upgrade.db import common
from trove_upgrade.db import driver_sql
from trove_upgrade.db import instance_keys
from trove_upgrade.db import models

LOG = logging.getLogger(__name__)

_UPGRADE_REQUIRED = frozenset(['instance_id', 'instance_version', 'strategy',
                               'location'])
_UPGRADE_OPTIONAL = frozenset(['metadata', 'allow_downgrade', 'rollout_id'])
_UPGRADE_FILTERS = frozenset(['instance_id', 'status', 'instance_version',
                              'rollout_id'])
# Columns a transition may set besides the ones it always sets itself.
_TRANSITION_STRINGS = frozenset(['from_version', 'instance_version',
                                 'rollout_id'])
_TRANSITION_VALUES = _TRANSITION_STRINGS | {'resend_at', 'send_count'}


def _check_state(state):
    if state not in states.ALL_STATES:
        raise exception.InvalidInputError(
            reason='unknown upgrade state %r' % (state,))


def _upgrade_dict(row):
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
    result = _upgrade_dict(_get_upgrade_row(session, upgrade_id))
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
    connection.execute(_INSERT_UPGRADE, upgrade)
    connection.execute(_INSERT_EVENT, events)


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
        return [_upgrade_dict(row) for row in common.newest_first_page(
            session, models.Upgrade, filters, limit, marker)]


# The upgrade's columns under the names ``_upgrade_dict`` reads, for plain
# rows: the ORM would build an object to throw away.
_UPGRADE_COLUMNS = tuple(getattr(models.Upgrade, attr.key).label(attr.key)
                         for attr in models.Upgrade.__mapper__.column_attrs)

# The statements of a state change, built once: each agent report runs
# them, and building them cost the conductor more CPU than executing them.
_UPGRADES = models.Upgrade.__table__
_READ_UPGRADE = sa.select(*_UPGRADE_COLUMNS).where(
    _UPGRADES.c.id == sa.bindparam('b_id'))
_INSERT_UPGRADE = sa.insert(_UPGRADES)
_INSERT_EVENT = sa.insert(models.UpgradeEvent.__table__)
# The report writer's: every column bound, for ``event_row``'s dicts.
_RECORD_EVENTS = driver_sql.DriverStatement(
    sa.insert(models.UpgradeEvent.__table__).values({
        column.name: sa.bindparam(column.name, type_=column.type)
        for column in models.UpgradeEvent.__table__.c
        if column.name != 'id'}))


def _compare_and_swap(columns):
    """The UPDATE of ``columns`` of one upgrade still in a given status."""
    return _compare_and_swap_of(tuple(sorted(columns)))


@functools.lru_cache(maxsize=None)
def _compare_and_swap_of(names):
    return driver_sql.DriverStatement(
        sa.update(_UPGRADES)
        .where(_UPGRADES.c.id == sa.bindparam('b_id'),
               _UPGRADES.c.status == sa.bindparam('b_from'))
        .values({name: sa.bindparam('b_' + name,
                                    type_=_UPGRADES.c[name].type)
                 for name in names}))


def _read_upgrade(connection, upgrade_id):
    row = connection.execute(_READ_UPGRADE, {'b_id': upgrade_id}).first()
    if row is None:
        raise exception.UpgradeNotFoundError(upgrade_id=upgrade_id)
    return _upgrade_dict(row)


def _decide(upgrade, to_state, allowed_from, instance_id):
    """True to move ``upgrade`` on, False when the move is not news.

    :raises: UpgradeOfAnotherInstanceError, InvalidStateTransitionError
    """
    if instance_id is not None and upgrade['instance_id'] != instance_id:
        raise exception.UpgradeOfAnotherInstanceError(
            upgrade_id=upgrade['id'], instance_id=instance_id,
            owner=upgrade['instance_id'])
    current = upgrade['status']
    if current == to_state:
        return False
    if allowed_from is not None and current not in allowed_from:
        raise exception.InvalidStateTransitionError(
            upgrade_id=upgrade['id'], from_state=current, to_state=to_state)
    if states.is_duplicate_or_stale(current, to_state):
        return False
    if not states.is_legal(current, to_state):
        raise exception.InvalidStateTransitionError(
            upgrade_id=upgrade['id'], from_state=current, to_state=to_state)
    return True


class UpgradeMemory:
    """The upgrades a process last recorded or read, most recent first.

    An upgrade only moves forward, so what was once its state stays
    true knowledge: a report that is a duplicate or stale against it is
    one against any later state too, and needs no database at all; a
    move from it is tried by compare-and-swap without reading the row
    first, and read as usual when the row has moved on meanwhile.
    Bounded to the ``size`` most recently used upgrades.
    """

    def __init__(self, size=10000):
        self._upgrades = cachetools.LRUCache(size)
        self._lock = threading.Lock()

    def get(self, upgrade_id):
        with self._lock:
            upgrade = self._upgrades.get(upgrade_id)
        return None if upgrade is None else dict(upgrade)

    def remember(self, upgrade):
        with self._lock:
            self._upgrades[upgrade['id']] = dict(upgrade)


class Move(collections.namedtuple('Move', 'to_state detail values')):
    """One move of a chain: its state, detail and other column values.

    The detail may be a function of the upgrade, as for
    ``transition_upgrade``.
    """


def _plan(upgrade, moves, allowed_from, instance_id, now):
    """Decide each of ``moves`` in turn, each from where the last left it.

    Returns ``(outcomes, events, upgrade)``: per move ``(changed,
    upgrade)`` or the InvalidStateTransitionError or
    UpgradeOfAnotherInstanceError
    it meets, or the InvalidInputError its detail is (a refused move changes
    nothing
    and the next is decided from the same state, as when the moves come
    one at a time); the events of the moves that are news; the upgrade
    after them all.
    """
    outcomes, events = [], []
    for move in moves:
        detail = move.detail
        try:
            news = _decide(upgrade, move.to_state, allowed_from, instance_id)
            if news and callable(detail):
                detail = common.bounded_detail(detail(upgrade))
        except (exception.InvalidInputError,
                exception.InvalidStateTransitionError,
                exception.UpgradeOfAnotherInstanceError) as e:
            outcomes.append(e)
            continue
        if news:
            events.append((upgrade['status'], move.to_state, detail))
            upgrade = dict(upgrade, status=move.to_state,
                           status_detail=detail, updated_at=now,
                           **move.values)
            if move.to_state in states.FINAL_STATES:
                upgrade['finished_at'] = now
        outcomes.append((news, dict(upgrade)))
    return outcomes, events, upgrade


class Chain(collections.namedtuple(
        'Chain', 'context upgrade_id moves source allowed_from instance_id '
        'known')):
    """One agent's moves of one upgrade, for ``transition_chains_once``.

    ``allowed_from`` is ``transition_upgrade``'s (a claim's states), or
    None; ``known`` is the upgrade as last seen, or None to read it.
    """


def transition_chain_once(chain):
    """One try at ``chain`` in a transaction of its own.

    As ``transition_chains_once`` answers for each chain: ``(outcomes,
    upgrade)``, or None when a race was lost and the chain is to be
    tried again.
    """
    return _transition_once(chain.context, chain.upgrade_id, chain.moves,
                            chain.source, chain.allowed_from,
                            chain.instance_id, chain.known)


def transition_chains_once(context, chains, kept=None):
    """One try at several agents' chains, all in one transaction.

    The group commit of the conductor's report writer: one connection
    checkout, its ping and one commit for them all, and one INSERT of
    every chain's events; with ``kept`` (a ``common.KeptConnection``) the
    transaction is the kept connection's, and ``context`` is not used.
    Each chain is decided and compare-and-swapped as
    ``transition_chain_once`` would, in the order of the upgrade ids, so
    that two conductors' transactions lock their rows in the same order.
    Returns per chain what ``transition_chain_once`` returns, or the
    UpgradeNotFoundError its upgrade is. A chain whose race was lost changes
    nothing here and is to be tried again on its own. Any error of the
    transaction rolls back every chain and is raised: the caller then
    tries each on its own, so that one chain cannot fail the others.
    """
    results = [None] * len(chains)
    rows = []
    with (common.context_manager.writer.connection.using(context)
          if kept is None else kept.transaction()) as connection:
        common.take_sqlite_write_lock(connection, _UPGRADES)
        order = sorted(range(len(chains)),
                       key=lambda index: chains[index].upgrade_id)
        for index in order:
            chain = chains[index]
            try:
                attempt = _attempt(connection, chain.context,
                                   chain.upgrade_id, chain.moves,
                                   chain.source, chain.allowed_from,
                                   chain.instance_id, chain.known)
            except exception.UpgradeNotFoundError as e:
                results[index] = e
                continue
            if attempt is not None:
                results[index] = attempt[:2]
                rows.extend(attempt[2])
        if rows:
            _RECORD_EVENTS.execute(connection, rows)
    return results


def _attempt(connection, context, upgrade_id, moves, source, allowed_from,
             instance_id, known):
    """Read, decide and compare-and-swap one chain on ``connection``.

    Returns ``(outcomes, upgrade, event rows)``, or None when another
    writer changed the status between the read and the UPDATE.
    """
    upgrade = known or _read_upgrade(connection, upgrade_id)
    now = timeutils.utcnow()
    outcomes, events, moved = _plan(upgrade, moves, allowed_from,
                                    instance_id, now)
    if not events:
        return outcomes, moved, []
    columns = {name: moved[name] for name in _moved_columns(moves)}
    params = {'b_' + name: value for name, value in columns.items()}
    params.update(b_id=upgrade_id, b_from=upgrade['status'])
    result = _compare_and_swap(columns).execute(connection, params)
    if result.rowcount != 1:
        return None
    return outcomes, moved, [
        event_row(context, upgrade_id, now, source, from_state, to_state,
                  detail)
        for from_state, to_state, detail in events]


@common.retry_on_deadlock
def _transition_once(context, upgrade_id, moves, source, allowed_from,
                     instance_id, known=None):
    """Read, decide and compare-and-swap a chain in one transaction.

    Returns ``_plan``'s outcomes and the upgrade after them, or None when
    another writer changed the status between the read and the UPDATE;
    the caller then tries again in a new transaction, whose first read
    sees that writer's change (on MySQL too, whose repeatable-read
    snapshot would hide it from this one). With ``known`` (the upgrade as
    last seen, from which the moves are legal) the read is skipped. One
    UPDATE takes the upgrade from its status to the chain's last, and one
    INSERT records every event of the chain.
    """
    with common.context_manager.writer.connection.using(
            context) as connection:
        common.take_sqlite_write_lock(connection, _UPGRADES)
        attempt = _attempt(connection, context, upgrade_id, moves, source,
                           allowed_from, instance_id, known)
        if attempt is None:
            return None
        outcomes, moved, rows = attempt
        if rows:
            _RECORD_EVENTS.execute(connection, rows)
        return outcomes, moved


def _moved_columns(moves):
    names = {'status', 'status_detail', 'updated_at'}
    for move in moves:
        names.update(move.values)
        if move.to_state in states.FINAL_STATES:
            names.add('finished_at')
    return names


def _checked_move(to_state, detail, values):
    """The move, or the InvalidInputError refusing it before any database."""
    try:
        _check_state(to_state)
        values = values or {}
        common.check_keys('upgrade column', values, _TRANSITION_VALUES)
        common.check_strings(models.Upgrade, values,
                             _TRANSITION_STRINGS.intersection(values))
        if not callable(detail):
            detail = common.bounded_detail(detail)
    except exception.InvalidInputError as e:
        return e
    return Move(to_state, detail, values)


def transition_upgrade_chain(context, upgrade_id, moves, source,
                             instance_id=None, memory=None, writer=None):
    """Several moves of one upgrade, in order, in one transaction.

    ``moves`` are ``(to_state, detail, values)`` as ``transition_upgrade``
    takes them. Returns one outcome per move: ``(changed, upgrade)``, or
    the exception ``transition_upgrade`` would raise for that move alone
    (InvalidInputError, InvalidStateTransitionError, UpgradeNotFoundError,
    UpgradeOfAnotherInstanceError); each move is decided from the state the
    moves before it left, and a refused one changes nothing. So it records
    what the same moves one ``transition_upgrade`` each would record, with
    one transaction for them all, which is what an agent's message of
    several reports costs the conductor.

    With ``memory``, moves it shows to be duplicates or stale need no
    database, and the upgrade as recorded or read is remembered in it.
    With ``writer`` (the conductor's ``ReportWriter``) the first try goes
    to its group commit, with other agents' chains in one transaction.
    """
    checked = [_checked_move(*move) for move in moves]
    valid = [move for move in checked if isinstance(move, Move)]
    if valid:
        if source is None:
            raise exception.InvalidInputError(reason='an event needs a source')
        common.check_strings(models.UpgradeEvent, {'source': source},
                             ['source'])
        try:
            outcomes = iter(_record_chain(context, upgrade_id, valid, source,
                                          None, instance_id, memory,
                                          writer))
        except exception.UpgradeNotFoundError as e:
            outcomes = iter([e] * len(valid))
    return [next(outcomes) if isinstance(move, Move) else move
            for move in checked]


def _record_chain(context, upgrade_id, moves, source, allowed_from,
                  instance_id, memory, writer=None):
    known = None
    if memory is not None and allowed_from is None:
        known = memory.get(upgrade_id)
        if known is not None:
            outcomes, events, _moved = _plan(known, moves, None, instance_id,
                                             None)
            if all(isinstance(outcome, tuple) for outcome in outcomes):
                if not events:
                    return outcomes
            else:
                # Refused from what is remembered, which may be legal from
                # the state the upgrade has reached since.
                known = None
    # Each lost race means another writer moved the status forward; the
    # state machine has no cycle, so this loop ends.
    while True:
        if writer is not None:
            outcome = writer.transition(Chain(context, upgrade_id, moves,
                                              source, allowed_from,
                                              instance_id, known))
            writer = None
        else:
            outcome = _transition_once(context, upgrade_id, moves, source,
                                       allowed_from, instance_id, known)
        known = None
        if outcome is not None:
            outcomes, moved = outcome
            if memory is not None:
                memory.remember(moved)
            return outcomes
        LOG.debug('Upgrade %s changed while moving it to %s; retrying.',
                  upgrade_id, moves[-1].to_state)


def transition_upgrade(context, upgrade_id, to_state, source, detail=None,
                       allowed_from=None, values=None, instance_id=None,
                       memory=None, writer=None):
    """Move an upgrade to ``to_state`` and record the event, race-safely.

    Returns ``(changed, upgrade)``. A duplicate or stale report changes
    nothing and returns ``(False, upgrade)``; an illegal move raises
    InvalidStateTransitionError. ``allowed_from`` is a claim that the upgrade
    is
    in one of those states: a repeat of a move that already happened is
    still a duplicate, but from any other state outside the set (a cancel
    of a finished upgrade, an agent's start of a cancelled one) it raises
    InvalidStateTransitionError rather than passing as stale. With
    ``instance_id``, an upgrade of another instance raises
    UpgradeOfAnotherInstanceError. ``detail`` may be a function of the upgrade
    as read, for a detail that depends on it.

    The read, the decision, the compare-and-swap and the event are one
    transaction, so the common case costs one round of the connection
    pool. Must not be called inside another transaction of the same
    context: a lost race is retried in a fresh one.

    With ``memory`` (an ``UpgradeMemory``) and no ``allowed_from``, what
    it knows of the upgrade spares the read, or the whole transaction;
    the upgrade as recorded or read is remembered in it. With ``writer``
    the first try goes to its group commit, as for
    ``transition_upgrade_chain``.
    """
    move = _checked_move(to_state, detail, values)
    if not isinstance(move, Move):
        raise move
    if source is None:
        raise exception.InvalidInputError(reason='an event needs a source')
    common.check_strings(models.UpgradeEvent, {'source': source}, ['source'])
    [outcome] = _record_chain(context, upgrade_id, [move], source,
                              allowed_from, instance_id, memory, writer)
    if isinstance(outcome, Exception):
        raise outcome
    return outcome


def timeout_upgrades(context, created_before):
    """Move every unfinished upgrade created before a time to TIMED_OUT.

    Returns the upgrades this call changed; one that reached a final state
    meanwhile is left alone by the compare-and-swap.
    """
    created_before = timeutils.normalize_time(created_before)
    with common.context_manager.reader.using(context) as session:
        candidates = session.execute(
            sa.select(models.Upgrade.id, models.Upgrade.created_at)
            .where(models.Upgrade.status.not_in(states.FINAL_STATES),
                   models.Upgrade.created_at < created_before)
            .order_by(models.Upgrade.created_at, models.Upgrade.id)).all()
    now = timeutils.utcnow()
    timed_out = []
    for upgrade_id, created_at in candidates:
        age = int((now - created_at).total_seconds())
        changed, upgrade = transition_upgrade(
            context, upgrade_id, states.TIMED_OUT, 'conductor',
            detail='No final state %d seconds after the upgrade was '
                   'requested.' % age)
        if changed:
            timed_out.append(upgrade)
    return timed_out


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
        return [_upgrade_dict(row) for row in rows]


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
