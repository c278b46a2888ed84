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

"""Database API of the registered agents.

Registrations and heartbeats, and the queries that pick agents by RPC
version, health, labels or a rollout's selector.
"""

import json
import re

from oslo_db import exception as db_exc
from oslo_db.sqlalchemy import utils as sqlalchemyutils
from oslo_utils import timeutils
import sqlalchemy as sa

from trove_upgrade.common import exception
from trove_upgrade.common import exception as package_exc
from trove_upgrade.common import rpc_interface
from trove_upgrade.common import states
from trove_upgrade.db import common
from trove_upgrade.db import models


_AGENT_VALUES = frozenset(['agent_version', 'guest_version',
                           'rpc_api_version', 'state', 'labels', 'host'])
_AGENT_FILTERS = frozenset(['guest_version', 'state', 'rpc_api_version',
                            'labels'])
_RPC_VERSION_RE = re.compile(r'^\d+\.\d+$')


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


def _check_agent_values(values):
    common.check_keys('agent field', values, _AGENT_VALUES)
    common.check_strings(models.Agent, values, _AGENT_VALUES - {'labels'})
    version = values.get('rpc_api_version')
    if version is not None and not (isinstance(version, str)
                                    and _RPC_VERSION_RE.match(version)):
        raise exception.InvalidInputError(
            reason='rpc_api_version must look like x.y, not %r' % (version,))
    if values.get('labels') is not None:
        common.check_json_object('labels', values['labels'])
        _check_labels(values['labels'])


def _check_labels(labels):
    """Refuse labels no operator gives: too many, too long, not strings.

    Any sender on the bus (without ``require_sealed``) could otherwise
    store megabytes of nested labels in an agent's row and every listing.
    """
    if len(labels) > rpc_interface.MAX_LABELS:
        raise exception.InvalidInputError(
            reason='labels holds %d labels, more than %d'
            % (len(labels), rpc_interface.MAX_LABELS))
    longest = rpc_interface.MAX_LABEL_LENGTH
    for key, value in labels.items():
        if not 0 < len(key) <= longest:
            raise exception.InvalidInputError(
                reason='a label key has 1 to %d characters' % longest)
        if not isinstance(value, str) or len(value) > longest:
            raise exception.InvalidInputError(
                reason='label %s is not a string of at most %d characters'
                % (package_exc.quoted(key), longest))
        common.check_characters('label key', key)
        common.check_characters('label %s' % package_exc.quoted(key), value)


@common.retry_on_deadlock
def _update_agent(context, instance_id, values, now):
    with common.context_manager.writer.using(context) as session:
        return session.execute(
            sa.update(models.Agent)
            .where(models.Agent.instance_id == instance_id)
            .values(updated_at=now, last_heartbeat_at=now, **values)
            .execution_options(synchronize_session=False)).rowcount == 1


@common.retry_on_deadlock
def _insert_agent(context, instance_id, values, now):
    values = dict(values)
    values.setdefault('labels', {})
    with common.context_manager.writer.using(context) as session:
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
    common.check_strings(models.Agent, {'instance_id': instance_id},
                         ['instance_id'])
    _check_agent_values(values)
    now = timeutils.utcnow()
    if _update_agent(context, instance_id, values, now):
        return
    try:
        _insert_agent(context, instance_id, values, now)
    except db_exc.DBDuplicateEntry:
        _update_agent(context, instance_id, values, now)


_AGENTS = models.Agent.__table__
# Built once: a flush writes hundreds of rows a second with it.
_BATCHED_HEARTBEAT = (
    sa.update(_AGENTS)
    .where(_AGENTS.c.instance_id == sa.bindparam('b_instance_id'),
           sa.or_(_AGENTS.c.last_heartbeat_at.is_(None),
                  _AGENTS.c.last_heartbeat_at < sa.bindparam('b_heard_at')))
    .values(dict({name: sa.bindparam('b_' + name)
                  for name in sorted(_AGENT_VALUES)},
                 updated_at=sa.bindparam('b_heard_at'),
                 last_heartbeat_at=sa.bindparam('b_heard_at'))))
_EXISTING_AGENTS = sa.select(_AGENTS.c.instance_id).where(
    _AGENTS.c.instance_id.in_(sa.bindparam('b_instance_ids',
                                           expanding=True)))


def record_heartbeats(context, heartbeats):
    """Record many heartbeats that change nothing but their time.

    ``heartbeats`` maps instance ids to ``(values, heard_at)``, values
    checked as ``register_agent`` checks them. One transaction and one
    batched UPDATE for all of them. A stored heartbeat newer than
    ``heard_at`` (a registration or a change written meanwhile) is left
    alone; an agent whose row is gone (its registration deleted) is
    registered again, as ``register_agent`` would.

    Returns the ids registered again.
    """
    if not heartbeats:
        return []
    for instance_id, (values, _heard_at) in heartbeats.items():
        common.check_strings(models.Agent, {'instance_id': instance_id},
                             ['instance_id'])
        common.check_keys('agent field', values, _AGENT_VALUES,
                          _AGENT_VALUES)
        _check_agent_values(values)
    ids = sorted(heartbeats)
    missing = _write_heartbeats(context, ids, heartbeats)
    for instance_id in missing:
        register_agent(context, instance_id, heartbeats[instance_id][0])
    return missing


@common.retry_on_deadlock
def _write_heartbeats(context, ids, heartbeats):
    with common.context_manager.writer.connection.using(
            context) as connection:
        # The conductor's other threads and the API write meanwhile.
        common.take_sqlite_write_lock(connection, _AGENTS)
        found = set(connection.scalars(_EXISTING_AGENTS,
                                       {'b_instance_ids': ids}))
        rows = []
        for instance_id in ids:
            if instance_id in found:
                values, heard_at = heartbeats[instance_id]
                row = {'b_' + k: v for k, v in values.items()}
                row.update(b_instance_id=instance_id, b_heard_at=heard_at)
                rows.append(row)
        if rows:
            connection.execute(_BATCHED_HEARTBEAT, rows)
    return [i for i in ids if i not in found]


def get_agent(context, instance_id):
    """The registered agent of one instance."""
    with common.context_manager.reader.using(context) as session:
        row = session.get(models.Agent, instance_id)
        if row is None:
            raise exception.AgentNotFoundError(instance_id=instance_id)
        return _agent_dict(row)


@common.retry_on_deadlock
def delete_agent(context, instance_id):
    """Forget an instance's agent, unless an upgrade of it is unfinished.

    The instance's upgrades and their events stay: they are its history.
    The row is deleted before the upgrades are looked at so that an
    instance without an agent is a 404 whatever its upgrades; a refusal
    raised afterwards rolls the deletion back with the transaction.

    :raises: AgentNotFoundError; AgentBusyError, naming the newest unfinished
        upgrade, when the agent may be working on one.
    """
    with common.context_manager.writer.using(context) as session:
        deleted = session.execute(
            sa.delete(models.Agent)
            .where(models.Agent.instance_id == instance_id)
            .execution_options(synchronize_session=False)).rowcount
        if not deleted:
            raise exception.AgentNotFoundError(instance_id=instance_id)
        unfinished = session.execute(
            sa.select(models.Upgrade.id, models.Upgrade.status)
            .where(models.Upgrade.instance_id == instance_id,
                   models.Upgrade.status.not_in(states.FINAL_STATES))
            .order_by(models.Upgrade.created_at.desc(),
                      models.Upgrade.id.desc())
            .limit(1)).first()
        if unfinished is not None:
            raise exception.AgentBusyError(instance_id=instance_id,
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
    common.check_keys('agent filter', filters, _AGENT_FILTERS)
    common.check_limit(limit)
    labels = filters.pop('labels', None)
    if labels is not None and not isinstance(labels, dict):
        raise exception.InvalidInputError(
            reason='the labels filter must be an object')
    with common.context_manager.reader.using(context) as session:
        query = session.query(models.Agent)
        for key, value in filters.items():
            query = query.filter(getattr(models.Agent, key) == value)
        marker_row = None
        if marker is not None:
            marker_row = session.get(models.Agent, marker)
            if marker_row is None:
                raise exception.MarkerNotFoundError(marker=marker)
        query = sqlalchemyutils.paginate_query(
            query, models.Agent, None if labels else limit, ['instance_id'],
            marker=marker_row, sort_dirs=['asc'])
        agents = [_agent_dict(row) for row in query.all()]
    if labels:
        agents = [a for a in agents if _labels_match(a['labels'], labels)]
        agents = agents[:limit]
    return agents


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


# Rows read at once while matching labels for a page of a selection.
_SELECTION_CHUNK = 1000
_LABELS_TEXT = sa.type_coerce(models.Agent.labels, sa.Text)


def list_selected_agents(context, selector, after=None, limit=None):
    """Agents a rollout's selector picks, ordered by instance id.

    ``selector`` has one of ``instance_ids`` (a list), ``group`` (the
    ``group`` label) or ``labels`` (every item must match), and may add
    ``availability_zone``, matched against the label the agents report it
    in. Each agent is a dict of ``instance_id``, ``guest_version`` and
    ``last_heartbeat_at``: what a rollout decides on. ``after`` and
    ``limit`` give one page: the first ``limit`` agents whose instance id
    sorts after ``after``.
    """
    common.check_limit(limit)
    # Plain rows, and the labels as their JSON text: a reconcile pass
    # reads the whole fleet, on every pass.
    agent = models.Agent
    query = sa.select(agent.instance_id, agent.guest_version,
                      agent.last_heartbeat_at, _LABELS_TEXT
                      ).order_by(agent.instance_id)
    query, wanted = _selecting(query, selector)
    if wanted:
        found = _rows_matching(context, query, wanted, after, limit)
    else:
        found = _agent_rows(context, query, after, limit)
    for row in found:
        del row['labels']
    return found


def _selecting(query, selector):
    """``query`` narrowed in SQL by ``selector``, and the labels it wants.

    The labels are matched in Python, on each agent's labels' JSON text.
    """
    common.check_keys('selector field', selector, frozenset(
        ['instance_ids', 'group', 'labels', 'availability_zone']))
    if len(set(selector) & {'instance_ids', 'group', 'labels'}) != 1:
        raise exception.InvalidInputError(
            reason='a selector has exactly one of instance_ids, group and '
                   'labels')
    wanted = {}
    if 'instance_ids' in selector:
        query = query.where(
            models.Agent.instance_id.in_(selector['instance_ids']))
    elif 'labels' in selector:
        wanted = dict(selector['labels'])
    else:
        wanted = {'group': selector['group']}
    if 'availability_zone' in selector:
        wanted[rpc_interface.AVAILABILITY_ZONE_LABEL] = (
            selector['availability_zone'])
    return query, wanted


def selected_undispatched_agents(context, selector, rollout_id,
                                 first_page=_SELECTION_CHUNK):
    """``(instance_id, guest_version)`` of the agents the rollout never tried.

    Of those ``selector`` picks, ordered by instance id. A generator, a
    page at a time, each page in a transaction of its own: a pass reads
    only as far as it needs (the first agent that waits, or the few it
    dispatches to next), not the fleet. The first page holds
    ``first_page`` agents, each further one twice as many, up to
    ``_SELECTION_CHUNK``. Each distinct labels text is decoded and
    matched once.
    """
    agent, dispatch = models.Agent, models.RolloutDispatch
    query = (sa.select(agent.instance_id, agent.guest_version, _LABELS_TEXT)
             .where(~sa.exists().where(
                 dispatch.rollout_id == rollout_id,
                 dispatch.instance_id == agent.instance_id))
             .order_by(agent.instance_id))
    query, wanted = _selecting(query, selector)
    decided, after = {}, None
    size = max(1, min(first_page, _SELECTION_CHUNK))
    while True:
        page = query.limit(size)
        if after is not None:
            page = page.where(agent.instance_id > after)
        with common.context_manager.reader.connection.using(
                context) as connection:
            rows = connection.execute(page).all()
        for instance_id, version, labels in rows:
            if labels not in decided:
                decided[labels] = _labels_match(json.loads(labels), wanted)
            if decided[labels]:
                yield instance_id, version
        if len(rows) < size:
            return
        after = rows[-1][0]
        size = min(2 * size, _SELECTION_CHUNK)


def _rows_matching(context, query, wanted, after, limit):
    """The first ``limit`` rows after ``after`` whose labels match.

    Labels are matched here, not in SQL: a page reads the rows a chunk at
    a time until it has ``limit`` matches.
    """
    chunk = None if limit is None else max(limit, _SELECTION_CHUNK)
    matches, decided = [], {}
    while True:
        rows = _agent_rows(context, query, after, chunk)
        # The agents of a fleet share a few label sets: each text is
        # decoded and matched once, not once per agent.
        for row in rows:
            if row['labels'] not in decided:
                decided[row['labels']] = _labels_match(
                    json.loads(row['labels']), wanted)
            if decided[row['labels']]:
                matches.append(row)
        if chunk is None or len(rows) < chunk or len(matches) >= limit:
            return matches[:limit]
        after = rows[-1]['instance_id']


def _agent_rows(context, query, after, limit):
    agent = models.Agent
    if after is not None:
        query = query.where(agent.instance_id > after)
    if limit is not None:
        query = query.limit(limit)
    # On a connection, not a session: every reconcile pass reads the
    # whole selection, and ORM objects of its rows are thrown away.
    with common.context_manager.reader.connection.using(
            context) as connection:
        rows = connection.execute(query).all()
    return [{'instance_id': r[0], 'guest_version': r[1],
             'last_heartbeat_at': r[2], 'labels': r[3]} for r in rows]


_COUNT_AGENTS = sa.select(sa.func.count()).select_from(models.Agent)


def count_agents(context):
    """How many agents are registered."""
    with common.context_manager.reader.connection.using(
            context) as connection:
        return connection.scalar(_COUNT_AGENTS)


def _version_tuple(version):
    return tuple(int(part) for part in version.split('.'))


def min_agent_rpc_version(context):
    """The lowest RPC API version any registered agent reported, or None."""
    with common.context_manager.reader.using(context) as session:
        versions = session.scalars(
            sa.select(models.Agent.rpc_api_version).distinct()
            .where(models.Agent.rpc_api_version.is_not(None))).all()
    if not versions:
        return None
    return min(versions, key=_version_tuple)


def list_silent_agents(context, heartbeat_before):
    """Agents not heard from since a time, ordered by instance id.

    An agent that never sent a heartbeat counts as silent.
    """
    heartbeat_before = timeutils.normalize_time(heartbeat_before)
    with common.context_manager.reader.using(context) as session:
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
        raise exception.InvalidInputError(
            reason='an RPC API version looks like x.y, not %r' % (version,))
    wanted = _version_tuple(version)
    with common.context_manager.reader.using(context) as session:
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
