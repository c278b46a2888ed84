"""Database API of the control plane: upgrades, their events, and agents.

Every function takes the request context first, runs in its own
enginefacade transaction and returns plain dicts, so that no ORM object
(and no lazy load) escapes this package.

State changes are compare-and-swap updates on the ``status`` column: two
processes reporting the same change race on ``UPDATE ... WHERE status =
:from`` and only the one whose update matched a row records the event. The
loser re-reads the upgrade in a new transaction (MySQL's repeatable-read
snapshot would keep showing it the old status in the same one) and finds
its report to be a duplicate.
"""

import json
import re

from oslo_db import api as oslo_db_api
from oslo_db import exception as db_exc
from oslo_db.sqlalchemy import enginefacade
from oslo_db.sqlalchemy import utils as sqlalchemyutils
from oslo_log import log as logging
from oslo_utils import timeutils
from oslo_utils import uuidutils
import sqlalchemy as sa

from trove_upgrade.db import models
from trove_upgrade import exception
from trove_upgrade import rollout_states
from trove_upgrade import states

LOG = logging.getLogger(__name__)


def _use_utf8mb4(engine):
    """Make MySQL/MariaDB connections speak utf8mb4, like the tables.

    oslo.db asks for "utf8" (three bytes at most, so no emoji) when the
    connection URL names no charset. The engine's first connection was made
    before this hook, so the pool is emptied to renew it.
    """
    if engine.dialect.name != 'mysql' or 'charset' in engine.url.query:
        return

    @sa.event.listens_for(engine, 'connect')
    def _set_charset(dbapi_connection, connection_record):
        dbapi_connection.set_character_set('utf8mb4')

    engine.dispose()


def new_facade(**options):
    """A transaction factory built the way the services build theirs.

    It reads ``[database]`` of the global CONF when first used, unless
    ``options`` (enginefacade's configure arguments) say otherwise. Foreign
    keys are enforced on SQLite too.
    """
    facade = enginefacade.transaction_context()
    facade.configure(sqlite_fk=True, **options)
    facade.append_on_engine_create(_use_utf8mb4)
    return facade


# The control plane's transaction factory.
context_manager = new_facade()

_UPGRADE_REQUIRED = frozenset(['instance_id', 'instance_version', 'strategy',
                               'location'])
_UPGRADE_OPTIONAL = frozenset(['metadata', 'allow_downgrade', 'rollout_id'])
_UPGRADE_FILTERS = frozenset(['instance_id', 'status', 'instance_version',
                              'rollout_id'])
# Columns a transition may set besides the ones it always sets itself.
_TRANSITION_VALUES = frozenset(['from_version', 'instance_version',
                                'rollout_id'])

_AGENT_VALUES = frozenset(['agent_version', 'guest_version',
                           'rpc_api_version', 'state', 'labels', 'host'])
_AGENT_FILTERS = frozenset(['guest_version', 'state', 'rpc_api_version',
                            'labels'])

_RPC_VERSION_RE = re.compile(r'^\d+\.\d+$')

# Characters of a state change's detail that are kept. A longer detail (an
# agent's traceback) is cut rather than refused: losing the change itself
# would be worse than losing the end of its explanation.
MAX_DETAIL = 65536
_CUT_MARK = ' [cut]'


# Writes that MySQL or PostgreSQL chose as a deadlock victim are retried.
_retry_on_deadlock = oslo_db_api.wrap_db_retry(
    max_retries=5, retry_on_deadlock=True)


def get_engine():
    """The writer engine, for the migrations and the manage command."""
    return context_manager.writer.get_engine()


def _check_keys(what, given, allowed, required=frozenset()):
    unknown = set(given) - allowed
    if unknown:
        raise exception.Invalid(reason='unknown %s: %s' % (
            what, ', '.join(sorted(unknown))))
    missing = required - set(given)
    if missing:
        raise exception.Invalid(reason='missing %s: %s' % (
            what, ', '.join(sorted(missing))))


def _check_strings(model, values, names):
    """Reject what the column would refuse or silently truncate."""
    for name in names:
        column = model.__table__.c[name]
        value = values.get(name)
        if value is None and column.nullable:
            continue
        length = column.type.length
        if not isinstance(value, str) or not value:
            raise exception.Invalid(
                reason='%s must be a non-empty string' % name)
        if len(value) > length:
            raise exception.Invalid(reason='%s is longer than %d characters'
                                    % (name, length))


def _bounded_detail(detail):
    if detail is None:
        return None
    if not isinstance(detail, str):
        raise exception.Invalid(reason='detail must be a string')
    if len(detail) <= MAX_DETAIL:
        return detail
    return detail[:MAX_DETAIL - len(_CUT_MARK)] + _CUT_MARK


def _check_json_object(name, value):
    """Refuse what the JSON column (stdlib json) cannot store as given."""
    if not isinstance(value, dict):
        raise exception.Invalid(reason='%s must be an object' % name)
    try:
        json.dumps(value)
    except (TypeError, ValueError) as exc:
        raise exception.Invalid(
            reason='%s cannot be stored as JSON: %s' % (name, exc))
    if not all(isinstance(key, str) for key in value):
        raise exception.Invalid(reason='%s keys must be strings' % name)


def _check_limit(limit):
    if limit is None:
        return
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise exception.Invalid(
            reason='limit must be a positive integer, not %r' % (limit,))


def _check_state(state):
    if state not in states.ALL_STATES:
        raise exception.Invalid(reason='unknown upgrade state %r' % (state,))


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


def _agent_dict(row):
    return {
        'instance_id': row.instance_id,
        'agent_version': row.agent_version,
        'guest_version': row.guest_version,
        'rpc_api_version': row.rpc_api_version,
        'state': row.state,
        'labels': row.labels,
        'host': row.host,
        'created_at': row.created_at,
        'updated_at': row.updated_at,
        'last_heartbeat_at': row.last_heartbeat_at,
    }


def _event_row(context, upgrade_id, now, source, from_state, to_state,
               detail=None):
    """The values of one ``upgrade_events`` row, for a plain INSERT."""
    return {'upgrade_id': upgrade_id, 'created_at': now, 'source': source,
            'from_state': from_state, 'to_state': to_state,
            'detail': detail, 'request_id': context.request_id}


def _get_upgrade_row(session, upgrade_id):
    row = session.get(models.Upgrade, upgrade_id)
    if row is None:
        raise exception.UpgradeNotFound(upgrade_id=upgrade_id)
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


@_retry_on_deadlock
def create_upgrade(context, values):
    """Record a new PENDING upgrade and its first event, atomically."""
    _check_keys('upgrade field', values, _UPGRADE_REQUIRED | _UPGRADE_OPTIONAL,
                _UPGRADE_REQUIRED)
    _check_strings(models.Upgrade, values,
                   _UPGRADE_REQUIRED | {'rollout_id'})
    metadata = values.get('metadata')
    if metadata is None:
        metadata = {}
    _check_json_object('metadata', metadata)
    allow_downgrade = values.get('allow_downgrade', False)
    if not isinstance(allow_downgrade, bool):
        raise exception.Invalid(reason='allow_downgrade must be a boolean')
    now = timeutils.utcnow()
    upgrade = models.Upgrade(
        id=uuidutils.generate_uuid(),
        instance_id=values['instance_id'],
        instance_version=values['instance_version'],
        strategy=values['strategy'],
        location=values['location'],
        upgrade_metadata=metadata,
        allow_downgrade=allow_downgrade,
        rollout_id=values.get('rollout_id'),
        status=states.PENDING,
        project_id=context.project_id,
        user_id=context.user_id,
        request_id=context.request_id,
        created_at=now,
        updated_at=now,
    )
    with context_manager.writer.using(context) as session:
        session.add(upgrade)
        session.flush()
        session.execute(sa.insert(models.UpgradeEvent.__table__).values(
            _event_row(context, upgrade.id, now, 'api', None,
                       states.PENDING)))
        return _upgrade_dict(upgrade)


def get_upgrade(context, upgrade_id, with_events=False):
    """One upgrade; with its events, oldest first, when asked."""
    with context_manager.reader.using(context) as session:
        return _upgrade_with_events(session, upgrade_id, with_events)


def list_upgrades(context, filters=None, limit=None, marker=None):
    """Upgrades newest first, filtered by exact match, one page at a time."""
    filters = filters or {}
    _check_keys('upgrade filter', filters, _UPGRADE_FILTERS)
    _check_limit(limit)
    with context_manager.reader.using(context) as session:
        return [_upgrade_dict(row) for row in _newest_first_page(
            session, models.Upgrade, filters, limit, marker)]


def _newest_first_page(session, model, filters, limit, marker):
    """Rows of ``model`` matching ``filters`` exactly, newest first."""
    query = session.query(model)
    for key, value in filters.items():
        query = query.filter(getattr(model, key) == value)
    marker_row = None
    if marker is not None:
        marker_row = session.get(model, marker)
        if marker_row is None:
            raise exception.MarkerNotFound(marker=marker)
    return sqlalchemyutils.paginate_query(
        query, model, limit, ['created_at', 'id'], marker=marker_row,
        sort_dirs=['desc', 'desc']).all()


# The upgrade's columns under the names ``_upgrade_dict`` reads, for plain
# rows: the ORM would build an object to throw away.
_UPGRADE_COLUMNS = tuple(getattr(models.Upgrade, attr.key).label(attr.key)
                         for attr in models.Upgrade.__mapper__.column_attrs)


def _read_upgrade(session, upgrade_id):
    row = session.execute(sa.select(*_UPGRADE_COLUMNS).where(
        models.Upgrade.id == upgrade_id)).first()
    if row is None:
        raise exception.UpgradeNotFound(upgrade_id=upgrade_id)
    return _upgrade_dict(row)


def _decide(upgrade, to_state, allowed_from, instance_id):
    """True to move ``upgrade`` on, False when the move is not news.

    :raises: UpgradeOfAnotherInstance, InvalidStateTransition
    """
    if instance_id is not None and upgrade['instance_id'] != instance_id:
        raise exception.UpgradeOfAnotherInstance(
            upgrade_id=upgrade['id'], instance_id=instance_id,
            owner=upgrade['instance_id'])
    current = upgrade['status']
    if current == to_state:
        return False
    if allowed_from is not None and current not in allowed_from:
        raise exception.InvalidStateTransition(
            upgrade_id=upgrade['id'], from_state=current, to_state=to_state)
    if states.is_duplicate_or_stale(current, to_state):
        return False
    if not states.is_legal(current, to_state):
        raise exception.InvalidStateTransition(
            upgrade_id=upgrade['id'], from_state=current, to_state=to_state)
    return True


def _take_sqlite_write_lock(session, *upgrade_ids):
    """On SQLite, make the transaction's first statement a write.

    SQLite has a single writer. Two transactions that both read and then
    write can deadlock on its lock, and it refuses one at once ("database
    is locked") instead of letting it wait; a transaction that writes
    first waits for the lock. MySQL and PostgreSQL lock rows, not the
    database, and skip this.
    """
    if session.get_bind().dialect.name == 'sqlite':
        session.execute(
            sa.update(models.Upgrade)
            .where(models.Upgrade.id.in_(upgrade_ids))
            .values(status=models.Upgrade.status)
            .execution_options(synchronize_session=False))


@_retry_on_deadlock
def _transition_once(context, upgrade_id, to_state, source, detail,
                     allowed_from, values, instance_id):
    """Read, decide and compare-and-swap in one transaction.

    Returns ``(changed, upgrade)``, or None when another writer changed
    the status between the read and the UPDATE; the caller then tries
    again in a new transaction, whose first read sees that writer's
    change (on MySQL too, whose repeatable-read snapshot would hide it
    from this one).
    """
    with context_manager.writer.using(context) as session:
        _take_sqlite_write_lock(session, upgrade_id)
        upgrade = _read_upgrade(session, upgrade_id)
        if not _decide(upgrade, to_state, allowed_from, instance_id):
            return False, upgrade
        if callable(detail):
            detail = _bounded_detail(detail(upgrade))
        now = timeutils.utcnow()
        columns = dict(values, status=to_state, status_detail=detail,
                       updated_at=now)
        if to_state in states.FINAL_STATES:
            columns['finished_at'] = now
        result = session.execute(
            sa.update(models.Upgrade)
            .where(models.Upgrade.id == upgrade_id,
                   models.Upgrade.status == upgrade['status'])
            .values(**columns)
            .execution_options(synchronize_session=False))
        if result.rowcount != 1:
            return None
        session.execute(sa.insert(models.UpgradeEvent.__table__).values(
            _event_row(context, upgrade_id, now, source, upgrade['status'],
                       to_state, detail)))
        upgrade.update(columns)
        return True, upgrade


def transition_upgrade(context, upgrade_id, to_state, source, detail=None,
                       allowed_from=None, values=None, instance_id=None):
    """Move an upgrade to ``to_state`` and record the event, race-safely.

    Returns ``(changed, upgrade)``. A duplicate or stale report changes
    nothing and returns ``(False, upgrade)``; an illegal move raises
    InvalidStateTransition. ``allowed_from`` is a claim that the upgrade is
    in one of those states: a repeat of a move that already happened is
    still a duplicate, but from any other state outside the set (a cancel
    of a finished upgrade, an agent's start of a cancelled one) it raises
    InvalidStateTransition rather than passing as stale. With
    ``instance_id``, an upgrade of another instance raises
    UpgradeOfAnotherInstance. ``detail`` may be a function of the upgrade
    as read, for a detail that depends on it.

    The read, the decision, the compare-and-swap and the event are one
    transaction, so the common case costs one round of the connection
    pool. Must not be called inside another transaction of the same
    context: a lost race is retried in a fresh one.
    """
    _check_state(to_state)
    if source is None:
        raise exception.Invalid(reason='an event needs a source')
    _check_strings(models.UpgradeEvent, {'source': source}, ['source'])
    values = values or {}
    _check_keys('upgrade column', values, _TRANSITION_VALUES)
    _check_strings(models.Upgrade, values, values)
    if not callable(detail):
        detail = _bounded_detail(detail)
    # Each lost race means another writer moved the status forward; the
    # state machine has no cycle, so this loop ends.
    while True:
        outcome = _transition_once(context, upgrade_id, to_state, source,
                                   detail, allowed_from, values, instance_id)
        if outcome is not None:
            return outcome
        LOG.debug('Upgrade %s changed while moving it to %s; retrying.',
                  upgrade_id, to_state)


def timeout_upgrades(context, created_before):
    """Move every unfinished upgrade created before a time to TIMED_OUT.

    Returns the upgrades this call changed; one that reached a final state
    meanwhile is left alone by the compare-and-swap.
    """
    created_before = timeutils.normalize_time(created_before)
    with context_manager.reader.using(context) as session:
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


def _check_agent_values(values):
    _check_keys('agent field', values, _AGENT_VALUES)
    _check_strings(models.Agent, values, _AGENT_VALUES - {'labels'})
    version = values.get('rpc_api_version')
    if version is not None and not (isinstance(version, str)
                                    and _RPC_VERSION_RE.match(version)):
        raise exception.Invalid(
            reason='rpc_api_version must look like x.y, not %r' % (version,))
    if values.get('labels') is not None:
        _check_json_object('labels', values['labels'])


@_retry_on_deadlock
def _update_agent(context, instance_id, values, now):
    with context_manager.writer.using(context) as session:
        return session.execute(
            sa.update(models.Agent)
            .where(models.Agent.instance_id == instance_id)
            .values(updated_at=now, last_heartbeat_at=now, **values)
            .execution_options(synchronize_session=False)).rowcount == 1


@_retry_on_deadlock
def _insert_agent(context, instance_id, values, now):
    values = dict(values)
    values.setdefault('labels', {})
    with context_manager.writer.using(context) as session:
        session.execute(sa.insert(models.Agent.__table__).values(
            instance_id=instance_id, created_at=now, updated_at=now,
            last_heartbeat_at=now, **values))


def register_agent(context, instance_id, values):
    """Record an agent's registration or heartbeat (an upsert).

    Updates first, since heartbeats outnumber registrations; inserts when
    there is no row; and when another process inserted it in between, the
    duplicate key sends it back to the update. Returns nothing: a
    heartbeat is recorded thousands of times a minute, and nobody reads
    the row back.
    """
    _check_strings(models.Agent, {'instance_id': instance_id},
                   ['instance_id'])
    _check_agent_values(values)
    now = timeutils.utcnow()
    if _update_agent(context, instance_id, values, now):
        return
    try:
        _insert_agent(context, instance_id, values, now)
    except db_exc.DBDuplicateEntry:
        _update_agent(context, instance_id, values, now)


def get_agent(context, instance_id):
    """The registered agent of one instance."""
    with context_manager.reader.using(context) as session:
        row = session.get(models.Agent, instance_id)
        if row is None:
            raise exception.AgentNotFound(instance_id=instance_id)
        return _agent_dict(row)


@_retry_on_deadlock
def delete_agent(context, instance_id):
    """Forget an instance's agent, unless an upgrade of it is unfinished.

    The instance's upgrades and their events stay: they are its history.
    The row is deleted before the upgrades are looked at so that an
    instance without an agent is a 404 whatever its upgrades; a refusal
    raised afterwards rolls the deletion back with the transaction.

    :raises: AgentNotFound; AgentBusy, naming the newest unfinished
        upgrade, when the agent may be working on one.
    """
    with context_manager.writer.using(context) as session:
        deleted = session.execute(
            sa.delete(models.Agent)
            .where(models.Agent.instance_id == instance_id)
            .execution_options(synchronize_session=False)).rowcount
        if not deleted:
            raise exception.AgentNotFound(instance_id=instance_id)
        unfinished = session.execute(
            sa.select(models.Upgrade.id, models.Upgrade.status)
            .where(models.Upgrade.instance_id == instance_id,
                   models.Upgrade.status.not_in(states.FINAL_STATES))
            .order_by(models.Upgrade.created_at.desc(),
                      models.Upgrade.id.desc())
            .limit(1)).first()
        if unfinished is not None:
            raise exception.AgentBusy(instance_id=instance_id,
                                      upgrade_id=unfinished.id,
                                      status=unfinished.status)


def _labels_match(agent_labels, wanted):
    return all(agent_labels.get(k) == v for k, v in wanted.items())


def list_agents(context, filters=None, limit=None, marker=None):
    """Agents ordered by instance id, filtered, one page at a time.

    ``labels`` in the filters is a dict every one of whose items the
    agent's labels must contain; it is matched after the query.
    """
    filters = dict(filters or {})
    _check_keys('agent filter', filters, _AGENT_FILTERS)
    _check_limit(limit)
    labels = filters.pop('labels', None)
    if labels is not None and not isinstance(labels, dict):
        raise exception.Invalid(reason='the labels filter must be an object')
    with context_manager.reader.using(context) as session:
        query = session.query(models.Agent)
        for key, value in filters.items():
            query = query.filter(getattr(models.Agent, key) == value)
        marker_row = None
        if marker is not None:
            marker_row = session.get(models.Agent, marker)
            if marker_row is None:
                raise exception.MarkerNotFound(marker=marker)
        query = sqlalchemyutils.paginate_query(
            query, models.Agent, None if labels else limit, ['instance_id'],
            marker=marker_row, sort_dirs=['asc'])
        agents = [_agent_dict(row) for row in query.all()]
    if labels:
        agents = [a for a in agents if _labels_match(a['labels'], labels)]
        agents = agents[:limit]
    return agents


def _version_tuple(version):
    return tuple(int(part) for part in version.split('.'))


def min_agent_rpc_version(context):
    """The lowest RPC API version any registered agent reported, or None."""
    with context_manager.reader.using(context) as session:
        versions = session.scalars(
            sa.select(models.Agent.rpc_api_version).distinct()
            .where(models.Agent.rpc_api_version.is_not(None))).all()
    if not versions:
        return None
    return min(versions, key=_version_tuple)


def list_unfinished_upgrades(context, created_before):
    """Upgrades still in a non-final state created before a time.

    Oldest first; for ``trove-upgrade-status``, which reports what the
    conductor should have timed out, without changing anything.
    """
    created_before = timeutils.normalize_time(created_before)
    with context_manager.reader.using(context) as session:
        rows = session.scalars(
            sa.select(models.Upgrade)
            .where(models.Upgrade.status.not_in(states.FINAL_STATES),
                   models.Upgrade.created_at < created_before)
            .order_by(models.Upgrade.created_at, models.Upgrade.id)).all()
        return [_upgrade_dict(row) for row in rows]


def list_silent_agents(context, heartbeat_before):
    """Agents not heard from since a time, ordered by instance id.

    An agent that never sent a heartbeat counts as silent.
    """
    heartbeat_before = timeutils.normalize_time(heartbeat_before)
    with context_manager.reader.using(context) as session:
        rows = session.scalars(
            sa.select(models.Agent)
            .where(sa.or_(models.Agent.last_heartbeat_at.is_(None),
                          models.Agent.last_heartbeat_at < heartbeat_before))
            .order_by(models.Agent.instance_id)).all()
        return [_agent_dict(row) for row in rows]


def list_agents_below_rpc_version(context, version):
    """Agents that reported an RPC API version lower than ``version``.

    Versions compare numerically (1.10 is above 1.9), which SQL cannot do
    on the column's text, so the few distinct versions are compared here
    and the agents fetched by those. Agents that reported no version are
    not included, as in ``min_agent_rpc_version``.
    """
    if not (isinstance(version, str) and _RPC_VERSION_RE.match(version)):
        raise exception.Invalid(
            reason='an RPC API version looks like x.y, not %r' % (version,))
    wanted = _version_tuple(version)
    with context_manager.reader.using(context) as session:
        reported = session.scalars(
            sa.select(models.Agent.rpc_api_version).distinct()
            .where(models.Agent.rpc_api_version.is_not(None))).all()
        older = [v for v in reported if _version_tuple(v) < wanted]
        if not older:
            return []
        rows = session.scalars(
            sa.select(models.Agent)
            .where(models.Agent.rpc_api_version.in_(older))
            .order_by(models.Agent.instance_id)).all()
        return [_agent_dict(row) for row in rows]


# Rollouts.

_ROLLOUT_REQUIRED = frozenset([
    'name', 'instance_version', 'strategy', 'location', 'selector',
    'canary', 'max_in_flight', 'max_in_flight_kind', 'max_failures',
    'max_failures_kind', 'per_agent_retries', 'agent_deadline', 'status'])
_ROLLOUT_OPTIONAL = frozenset(['start_at', 'status_detail'])
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
        'project_id': row.project_id,
        'user_id': row.user_id,
        'created_at': row.created_at,
        'updated_at': row.updated_at,
        'finished_at': row.finished_at,
    }


def _check_integers(values, names):
    for name in names:
        if name not in values:
            continue
        value = values[name]
        if isinstance(value, bool) or not isinstance(value, int) \
                or value < 0:
            raise exception.Invalid(
                reason='%s must be a non-negative integer, not %r'
                       % (name, value))


def _get_rollout_row(session, rollout_id):
    row = session.get(models.Rollout, rollout_id)
    if row is None:
        raise exception.RolloutNotFound(rollout_id=rollout_id)
    return row


@_retry_on_deadlock
def create_rollout(context, values):
    """Record a new rollout as ``values`` describe it."""
    _check_keys('rollout field', values,
                _ROLLOUT_REQUIRED | _ROLLOUT_OPTIONAL, _ROLLOUT_REQUIRED)
    _check_strings(models.Rollout, values,
                   ['name', 'instance_version', 'strategy', 'location',
                    'max_in_flight_kind', 'max_failures_kind', 'status'])
    _check_integers(values, _ROLLOUT_INTEGERS)
    _check_json_object('selector', values['selector'])
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
    with context_manager.writer.using(context) as session:
        session.add(rollout)
        session.flush()
        return _rollout_dict(rollout)


def get_rollout(context, rollout_id):
    with context_manager.reader.using(context) as session:
        return _rollout_dict(_get_rollout_row(session, rollout_id))


def list_rollouts(context, filters=None, limit=None, marker=None):
    """Rollouts newest first, filtered by exact match, one page at a time."""
    filters = filters or {}
    _check_keys('rollout filter', filters, _ROLLOUT_FILTERS)
    _check_limit(limit)
    with context_manager.reader.using(context) as session:
        return [_rollout_dict(row) for row in _newest_first_page(
            session, models.Rollout, filters, limit, marker)]


def list_rollouts_in(context, statuses):
    """Rollouts in any of ``statuses``, oldest first (their precedence)."""
    with context_manager.reader.using(context) as session:
        rows = session.scalars(
            sa.select(models.Rollout)
            .where(models.Rollout.status.in_(sorted(statuses)))
            .order_by(models.Rollout.created_at, models.Rollout.id)).all()
        return [_rollout_dict(row) for row in rows]


@_retry_on_deadlock
def update_rollout(context, rollout_id, from_states, values,
                   finished=False):
    """Set ``values`` if the rollout is still in one of ``from_states``.

    A compare-and-swap on the status, like the upgrades'. Returns the
    rollout when this call changed it, None when its status had moved.

    :raises: RolloutNotFound
    """
    _check_keys('rollout column', values, _ROLLOUT_UPDATES)
    _check_integers(values, _ROLLOUT_INTEGERS)
    if 'status_detail' in values:
        values = dict(values,
                      status_detail=_bounded_detail(values['status_detail']))
    now = timeutils.utcnow()
    columns = dict(values, updated_at=now)
    if finished:
        columns['finished_at'] = now
    with context_manager.writer.using(context) as session:
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


@_retry_on_deadlock
def acquire_rollout_lease(context, rollout_id, owner, until):
    """Take or renew the right to reconcile a rollout until ``until``.

    True when ``owner`` holds the lease now: nobody held it, it expired,
    or ``owner`` held it already.
    """
    now = timeutils.utcnow()
    rollout = models.Rollout
    with context_manager.writer.using(context) as session:
        result = session.execute(
            sa.update(rollout)
            .where(rollout.id == rollout_id,
                   sa.or_(rollout.lease_owner.is_(None),
                          rollout.lease_owner == owner,
                          rollout.lease_until < now))
            .values(lease_owner=owner,
                    lease_until=timeutils.normalize_time(until))
            .execution_options(synchronize_session=False))
        return result.rowcount == 1


@_retry_on_deadlock
def release_rollout_lease(context, rollout_id, owner):
    """Give up the lease ``owner`` holds, if it still does."""
    with context_manager.writer.using(context) as session:
        session.execute(
            sa.update(models.Rollout)
            .where(models.Rollout.id == rollout_id,
                   models.Rollout.lease_owner == owner)
            .values(lease_owner=None, lease_until=None)
            .execution_options(synchronize_session=False))


@_retry_on_deadlock
def delete_rollout(context, rollout_id, allowed_states):
    """Delete a rollout in one of ``allowed_states`` and its dispatches.

    The upgrades it dispatched stay, tagged with its id.

    :raises: RolloutNotFound; InvalidRolloutState in another state.
    """
    with context_manager.writer.using(context) as session:
        row = _get_rollout_row(session, rollout_id)
        if row.status not in allowed_states:
            raise exception.InvalidRolloutState(
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
    with context_manager.reader.using(context) as session:
        rows = session.execute(
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


def _rollout_upgrade_rows(context, rollout, targets, now):
    """Rows of the upgrades, their first events and their dispatches."""
    upgrades, events, dispatches = [], [], []
    for instance_id, attempt, canary in targets:
        upgrade_id = uuidutils.generate_uuid()
        upgrades.append({
            'id': upgrade_id, 'instance_id': instance_id,
            'instance_version': rollout['instance_version'],
            'from_version': None, 'strategy': rollout['strategy'],
            'location': rollout['location'], 'metadata': {},
            'allow_downgrade': False, 'status': states.PENDING,
            'status_detail': None, 'project_id': context.project_id,
            'user_id': context.user_id, 'request_id': context.request_id,
            'rollout_id': rollout['id'], 'created_at': now,
            'updated_at': now, 'finished_at': None})
        events.append(_event_row(context, upgrade_id, now, 'conductor',
                                 None, states.PENDING))
        dispatches.append({
            'rollout_id': rollout['id'], 'instance_id': instance_id,
            'attempt': attempt, 'canary': canary, 'upgrade_id': upgrade_id,
            'created_at': now})
    return upgrades, events, dispatches


@_retry_on_deadlock
def _create_rollout_upgrades(context, rollout, targets, owner):
    now = timeutils.utcnow()
    upgrades, events, dispatches = _rollout_upgrade_rows(
        context, rollout, targets, now)
    with context_manager.writer.using(context) as session:
        # First statement, so SQLite takes the write lock here: from now
        # on nobody pauses, aborts or takes over the rollout until commit.
        still_ours = session.execute(
            sa.update(models.Rollout)
            .where(models.Rollout.id == rollout['id'],
                   models.Rollout.status == rollout_states.RUNNING,
                   models.Rollout.lease_owner == owner)
            .values(updated_at=now)
            .execution_options(synchronize_session=False)).rowcount
        if not still_ours:
            return None
        # One statement per table for the whole batch: a rollout
        # dispatches hundreds at a time.
        session.execute(sa.insert(models.Upgrade.__table__), upgrades)
        session.execute(sa.insert(models.UpgradeEvent.__table__), events)
        session.execute(sa.insert(models.RolloutDispatch.__table__),
                        dispatches)
    for upgrade in upgrades:
        upgrade['metadata'] = {}
    return upgrades


def create_rollout_upgrades(context, rollout, targets, owner):
    """Record the upgrades a rollout dispatches, each with its dispatch.

    ``targets`` are ``(instance_id, attempt, canary)``. Nothing is recorded
    unless the rollout is still RUNNING and ``owner`` still holds its
    lease. All are recorded in one transaction; when one attempt was
    recorded already (by another conductor), they are recorded one at a
    time and that one is left out. Returns the upgrades recorded, PENDING,
    tagged with the rollout's id.
    """
    try:
        return _create_rollout_upgrades(context, rollout, targets,
                                        owner) or []
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
                                               owner))
    return created


@_retry_on_deadlock
def mark_upgrades_sent(context, upgrade_ids, source):
    """Move those of ``upgrade_ids`` still PENDING to SENT, with events.

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
    upgrade = models.Upgrade
    with context_manager.writer.using(context) as session:
        _take_sqlite_write_lock(session, *upgrade_ids)
        moved = session.scalars(
            sa.select(upgrade.id)
            .where(upgrade.id.in_(upgrade_ids),
                   upgrade.status == states.PENDING)
            .with_for_update(skip_locked=True)).all()
        if moved:
            session.execute(
                sa.update(upgrade)
                .where(upgrade.id.in_(moved))
                .values(status=states.SENT, status_detail=None,
                        updated_at=now)
                .execution_options(synchronize_session=False))
            session.execute(sa.insert(models.UpgradeEvent.__table__), [
                _event_row(context, upgrade_id, now, source, states.PENDING,
                           states.SENT)
                for upgrade_id in moved])
        return list(moved)


def list_busy_instances(context):
    """Instances with an upgrade in a non-final state, from anyone."""
    with context_manager.reader.using(context) as session:
        return set(session.scalars(
            sa.select(models.Upgrade.instance_id).distinct()
            .where(models.Upgrade.status.not_in(states.FINAL_STATES))))


def timeout_rollout_upgrades(context, rollout_id, created_before):
    """TIMED_OUT for a rollout's unfinished upgrades created before a time.

    The rollout's ``agent_deadline`` closes its transactions; returns the
    upgrades this call changed.
    """
    created_before = timeutils.normalize_time(created_before)
    with context_manager.reader.using(context) as session:
        candidates = session.scalars(
            sa.select(models.Upgrade.id)
            .where(models.Upgrade.rollout_id == rollout_id,
                   models.Upgrade.status.not_in(states.FINAL_STATES),
                   models.Upgrade.created_at < created_before)
            .order_by(models.Upgrade.created_at, models.Upgrade.id)).all()
    timed_out = []
    for upgrade_id in candidates:
        changed, upgrade = transition_upgrade(
            context, upgrade_id, states.TIMED_OUT, 'conductor',
            detail="No final state within the rollout's agent deadline.")
        if changed:
            timed_out.append(upgrade)
    return timed_out


def list_selected_agents(context, selector):
    """Agents a rollout's selector picks, ordered by instance id.

    ``selector`` has one of ``instance_ids`` (a list), ``group`` (the
    ``group`` label) or ``labels`` (every item must match). Each agent is
    a dict of ``instance_id``, ``guest_version`` and ``last_heartbeat_at``:
    what a rollout decides on.
    """
    _check_keys('selector field', selector,
                frozenset(['instance_ids', 'group', 'labels']))
    if len(selector) != 1:
        raise exception.Invalid(
            reason='a selector has exactly one of instance_ids, group and '
                   'labels')
    # Plain rows, and the labels as their JSON text: a reconcile pass
    # reads the whole fleet, on every pass.
    agent = models.Agent
    query = sa.select(agent.instance_id, agent.guest_version,
                      agent.last_heartbeat_at,
                      sa.type_coerce(agent.labels, sa.Text)
                      ).order_by(agent.instance_id)
    if 'instance_ids' in selector:
        query = query.where(agent.instance_id.in_(selector['instance_ids']))
    with context_manager.reader.using(context) as session:
        rows = session.execute(query).all()
    if 'instance_ids' not in selector:
        wanted = selector.get('labels') or {'group': selector.get('group')}
        # The agents of a fleet share a few label sets: each text is
        # decoded and matched once, not once per agent, which halved the
        # CPU of a selection of 2,000 agents.
        matching = {text for text in {r[3] for r in rows}
                    if _labels_match(json.loads(text), wanted)}
        rows = [r for r in rows if r[3] in matching]
    return [{'instance_id': r[0], 'guest_version': r[1],
             'last_heartbeat_at': r[2]} for r in rows]


def list_agents_by_health(context, reachable, heartbeat_since, filters=None,
                          limit=None, marker=None):
    """Agents heard from since a time (``reachable``) or not, paged.

    Otherwise as ``list_agents``; an agent that never sent a heartbeat is
    unreachable.
    """
    heartbeat_since = timeutils.normalize_time(heartbeat_since)
    agents = []
    page_marker = marker
    # Pages of list_agents filtered on health until one is full or the
    # agents run out; bounded by the number of agents.
    while True:
        found = list_agents(context, filters=filters, limit=limit,
                            marker=page_marker)
        for agent in found:
            heard = agent['last_heartbeat_at']
            is_reachable = heard is not None and heard >= heartbeat_since
            if is_reachable == reachable:
                agents.append(agent)
        if limit is None or not found or len(agents) >= limit:
            return agents[:limit] if limit else agents
        if len(found) < limit:
            return agents
        page_marker = found[-1]['instance_id']
