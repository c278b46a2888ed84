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

"""Database API of upgrades' state changes, race-safe.

State changes are compare-and-swap updates on the ``status`` column: two
processes reporting the same change race on ``UPDATE ... WHERE status =
:from`` and only the one whose update matched a row records the event. The
loser re-reads the upgrade in a new transaction (MySQL's repeatable-read
snapshot would keep showing it the old status in the same one) and finds
its report to be a duplicate.

Which moves are legal is the state machine's (``common.states.decide``);
this module reads, compare-and-swaps and records.
"""

import collections
import functools

from oslo_log import log as logging
from oslo_utils import timeutils
import sqlalchemy as sa

from trove_upgrade.common import exception
from trove_upgrade.common import states
from trove_upgrade.db import common
from trove_upgrade.db import models
from trove_upgrade.db import upgrades as db_upgrades

LOG = logging.getLogger(__name__)

# Columns a transition may set besides the ones it always sets itself.
_TRANSITION_STRINGS = frozenset(['from_version', 'instance_version',
                                 'rollout_id'])
_TRANSITION_VALUES = _TRANSITION_STRINGS | {'resend_at', 'send_count'}


# The statements of a state change, built once: each agent report runs
# them, and building them cost the conductor more CPU than executing them.
_UPGRADES = models.Upgrade.__table__
_READ_UPGRADE = sa.select(*db_upgrades.UPGRADE_COLUMNS).where(
    _UPGRADES.c.id == sa.bindparam('b_id'))


def _compare_and_swap(columns):
    """The UPDATE of ``columns`` of one upgrade still in a given status."""
    return _compare_and_swap_of(tuple(sorted(columns)))


@functools.lru_cache(maxsize=None)
def _compare_and_swap_of(names):
    return (sa.update(_UPGRADES)
            .where(_UPGRADES.c.id == sa.bindparam('b_id'),
                   _UPGRADES.c.status == sa.bindparam('b_from'))
            .values({name: sa.bindparam('b_' + name,
                                        type_=_UPGRADES.c[name].type)
                     for name in names}))


def _read_upgrade(connection, upgrade_id):
    row = connection.execute(_READ_UPGRADE, {'b_id': upgrade_id}).first()
    if row is None:
        raise exception.UpgradeNotFoundError(upgrade_id=upgrade_id)
    return db_upgrades.upgrade_dict(row)


class Move(collections.namedtuple('Move', 'to_state detail values')):
    """One move of a chain: its state, detail and other column values.

    The detail may be a function of the upgrade, as for
    ``transition_upgrade``.
    """


def _plan(upgrade, moves, allowed_from, instance_id, now):
    """Decide each of ``moves`` in turn, each from where the last left it.

    Returns ``(outcomes, events, upgrade)``: per move ``(changed,
    upgrade)`` or the InvalidStateTransitionError or
    UpgradeOfAnotherInstanceError it meets, or the InvalidInputError its
    detail is (a refused move changes nothing
    and the next is decided from the same state, as when the moves come
    one at a time); the events of the moves that are news; the upgrade
    after them all.
    """
    outcomes, events = [], []
    for move in moves:
        detail = move.detail
        try:
            news = states.decide(upgrade, move.to_state, allowed_from,
                                 instance_id)
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
            connection.execute(db_upgrades.INSERT_EVENT, rows)
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
    result = connection.execute(_compare_and_swap(columns), params)
    if result.rowcount != 1:
        return None
    return outcomes, moved, [
        db_upgrades.event_row(context, upgrade_id, now, source, from_state,
                              to_state, detail)
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
            connection.execute(db_upgrades.INSERT_EVENT, rows)
        return outcomes, moved


def _moved_columns(moves):
    names = {'status', 'status_detail', 'updated_at'}
    for move in moves:
        names.update(move.values)
        if move.to_state in states.FINAL_STATES:
            names.add('finished_at')
    return names


def _checked_move(to_state, detail, values):
    """The move, or the Invalid that refuses it before any database."""
    try:
        db_upgrades.check_state(to_state)
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
    (Invalid, InvalidStateTransitionError, UpgradeNotFoundError,
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
    InvalidStateTransitionError. ``allowed_from`` is a claim that the
    upgrade is in one of those states: a repeat of a move that already
    happened is still a duplicate, but from any other state outside the
    set (a cancel of a finished upgrade, an agent's start of a cancelled
    one) it raises
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
