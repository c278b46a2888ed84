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

"""Read-only queries of Trove's own database (``[trove] connection``).

Only the columns trove-upgrade reads are declared here, as Trove 25.1.0's
``trove-manage db_sync`` creates them; nothing is ever written. Rows come
back as plain dicts. The engine is built on first use, in the process
that uses it.
"""

import threading

from oslo_db.sqlalchemy import engines
import sqlalchemy as sa

from trove_upgrade import conf

CONF = conf.CONF

_META = sa.MetaData()

INSTANCES = sa.Table(
    'instances', _META,
    sa.Column('id', sa.String(36), primary_key=True),
    sa.Column('name', sa.String(255)),
    sa.Column('tenant_id', sa.String(36)),
    sa.Column('task_id', sa.Integer),
    sa.Column('task_description', sa.String(255)),
    sa.Column('deleted', sa.Boolean),
    sa.Column('datastore_version_id', sa.String(36)),
    sa.Column('region_id', sa.String(255)),
    sa.Column('encrypted_key', sa.String(255)),
    sa.Column('slave_of_id', sa.String(36)),
    sa.Column('cluster_id', sa.String(36)),
)

DATASTORES = sa.Table(
    'datastores', _META,
    sa.Column('id', sa.String(36), primary_key=True),
    sa.Column('name', sa.String(255)),
)

DATASTORE_VERSIONS = sa.Table(
    'datastore_versions', _META,
    sa.Column('id', sa.String(36), primary_key=True),
    sa.Column('datastore_id', sa.String(36)),
    sa.Column('name', sa.String(255)),
    sa.Column('version', sa.String(255)),
)

BACKUPS = sa.Table(
    'backups', _META,
    sa.Column('id', sa.String(36), primary_key=True),
    sa.Column('instance_id', sa.String(36)),
    sa.Column('state', sa.String(32)),
    sa.Column('deleted', sa.Boolean),
)

# Written by trove-conductor from each guest agent's heartbeats.
SERVICE_STATUSES = sa.Table(
    'service_statuses', _META,
    sa.Column('id', sa.String(36), primary_key=True),
    sa.Column('instance_id', sa.String(36)),
    sa.Column('status_description', sa.String(64)),
    sa.Column('updated_at', sa.DateTime),
)

# Trove's BackupState.RUNNING_STATES: a backup in one of these is running.
BACKUP_RUNNING_STATES = ('NEW', 'BUILDING', 'SAVING')

_ENGINE = None
_ENGINE_URL = None
_LOCK = threading.Lock()


def configured():
    """Whether ``[trove] connection`` is set."""
    return bool(CONF.trove.connection)


def _engine():
    global _ENGINE, _ENGINE_URL
    with _LOCK:
        if _ENGINE is None or _ENGINE_URL != CONF.trove.connection:
            if _ENGINE is not None:
                _ENGINE.dispose()
            _ENGINE = engines.create_engine(CONF.trove.connection)
            _ENGINE_URL = CONF.trove.connection
        return _ENGINE


def dispose():
    """Close the engine's connections; the next query opens new ones."""
    global _ENGINE, _ENGINE_URL
    with _LOCK:
        if _ENGINE is not None:
            _ENGINE.dispose()
        _ENGINE = _ENGINE_URL = None


def _instances_query():
    dsv, ds = DATASTORE_VERSIONS, DATASTORES
    return (sa.select(INSTANCES.c.id, INSTANCES.c.name,
                      INSTANCES.c.tenant_id, INSTANCES.c.task_id,
                      INSTANCES.c.task_description, INSTANCES.c.deleted,
                      INSTANCES.c.region_id,
                      ds.c.name.label('datastore'),
                      dsv.c.name.label('datastore_version'),
                      dsv.c.version.label('datastore_version_number'))
            .select_from(INSTANCES
                         .outerjoin(dsv, INSTANCES.c.datastore_version_id
                                    == dsv.c.id)
                         .outerjoin(ds, dsv.c.datastore_id == ds.c.id)))


def _with_backups(connection, rows):
    """The instances' dicts, each with ``backup_running``."""
    found = [dict(r._mapping) for r in rows]
    ids = [r['id'] for r in found]
    running = set()
    if ids:
        running = set(connection.scalars(
            sa.select(BACKUPS.c.instance_id).distinct()
            .where(BACKUPS.c.instance_id.in_(ids),
                   BACKUPS.c.state.in_(BACKUP_RUNNING_STATES),
                   sa.or_(BACKUPS.c.deleted.is_(None),
                          sa.not_(BACKUPS.c.deleted)))))
    for instance in found:
        instance['deleted'] = bool(instance['deleted'])
        instance['backup_running'] = instance['id'] in running
    return found


def find_instances(id_or_name, tenant_id=None):
    """The instances, deleted ones too, whose id or name is ``id_or_name``.

    With ``tenant_id`` only that tenant's. Ordered by id.
    """
    query = _instances_query().where(
        sa.or_(INSTANCES.c.id == id_or_name,
               INSTANCES.c.name == id_or_name)).order_by(INSTANCES.c.id)
    if tenant_id is not None:
        query = query.where(INSTANCES.c.tenant_id == tenant_id)
    with _engine().connect() as connection:
        return _with_backups(connection, connection.execute(query))


def get_instances(instance_ids):
    """``{id: instance}`` of the live (not deleted) ``instance_ids``."""
    if not instance_ids:
        return {}
    query = _instances_query().where(
        INSTANCES.c.id.in_(sorted(instance_ids)),
        sa.or_(INSTANCES.c.deleted.is_(None), sa.not_(INSTANCES.c.deleted)))
    with _engine().connect() as connection:
        return {i['id']: i
                for i in _with_backups(connection,
                                       connection.execute(query))}


def get_encrypted_keys(instance_ids):
    """``{id: encrypted_key}`` of the live instances that have a key."""
    if not instance_ids:
        return {}
    query = sa.select(INSTANCES.c.id, INSTANCES.c.encrypted_key).where(
        INSTANCES.c.id.in_(sorted(instance_ids)),
        INSTANCES.c.encrypted_key.is_not(None),
        sa.or_(INSTANCES.c.deleted.is_(None), sa.not_(INSTANCES.c.deleted)))
    with _engine().connect() as connection:
        return {r.id: r.encrypted_key for r in connection.execute(query)}


def get_topology_rows():
    """``(id, slave_of_id, cluster_id)`` of every live replica and member.

    Of every live instance that has a replication source or a cluster, in
    one query: a primary is known by its replicas' ``slave_of_id``.
    """
    query = sa.select(INSTANCES.c.id, INSTANCES.c.slave_of_id,
                      INSTANCES.c.cluster_id).where(
        sa.or_(INSTANCES.c.slave_of_id.is_not(None),
               INSTANCES.c.cluster_id.is_not(None)),
        sa.or_(INSTANCES.c.deleted.is_(None), sa.not_(INSTANCES.c.deleted)))
    with _engine().connect() as connection:
        return [tuple(r) for r in connection.execute(query)]


def get_service_status(instance_id):
    """``{'status', 'updated_at'}`` Trove recorded for the instance, or None.

    ``status`` is Trove's status description (``healthy``, ``crashed``,
    ...), ``updated_at`` trove-conductor's time (UTC, naive) of the last
    heartbeat it recorded. Trove keeps one row per instance.
    """
    query = (sa.select(SERVICE_STATUSES.c.status_description,
                       SERVICE_STATUSES.c.updated_at)
             .where(SERVICE_STATUSES.c.instance_id == instance_id)
             .order_by(SERVICE_STATUSES.c.id).limit(1))
    with _engine().connect() as connection:
        row = connection.execute(query).first()
    if row is None:
        return None
    return {'status': row.status_description, 'updated_at': row.updated_at}
