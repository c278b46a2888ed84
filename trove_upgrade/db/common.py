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

"""What the database API's per-resource modules share.

The control plane's transaction factory, the retry of deadlocked writes,
the checks of the values callers pass and newest-first paging. Every
function of the database API takes the request context first, runs in its
own enginefacade transaction and returns plain dicts, so that no ORM
object (and no lazy load) escapes this package.
"""

import contextlib
import functools
import json
import sqlite3
import time

from oslo_db import api as oslo_db_api
from oslo_db.sqlalchemy import enginefacade
from oslo_db.sqlalchemy import utils as sqlalchemyutils
from oslo_utils import timeutils
import sqlalchemy as sa

from trove_upgrade.common import exception
from trove_upgrade import conf
from trove_upgrade.conf import database as database_conf

database_conf.register_opts(conf.CONF)


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


def _sqlite_file_in_wal_mode(engine):
    """Write an SQLite file database through a write-ahead log.

    In SQLite's default rollback-journal mode every commit creates, syncs
    twice and deletes a journal file, which cost the API more system CPU
    per upgrade than its statements. In WAL mode a commit appends to the
    log and syncs it once (``synchronous=FULL`` keeps every commit
    durable), and readers no longer wait for a writer. The mode is the
    file's own, so every process that opens it shares it.
    """
    if engine.dialect.name != 'sqlite' or engine.url.database in (
            None, '', ':memory:'):
        return

    @sa.event.listens_for(engine, 'connect')
    def _set_wal(dbapi_connection, connection_record):
        cursor = dbapi_connection.cursor()
        cursor.execute('PRAGMA journal_mode=WAL')
        cursor.execute('PRAGMA synchronous=FULL')
        cursor.close()

    engine.dispose()


# oslo.db's listener that emits BEGIN on SQLite, whose driver's is off.
_OSLO_DB_SQLITE_BEGIN = '_sqlite_emit_begin'


def _sqlite_begin_on_the_driver(engine):
    """Send oslo.db's SQLite BEGIN to the driver connection itself.

    oslo.db turns pysqlite's own BEGIN off and emits one as each
    transaction begins, as a statement through the whole of SQLAlchemy's
    execution (its compiled cache, events and result), far more work
    than the BEGIN itself. The same BEGIN, with oslo.db's
    mark of a transaction begun, goes to the driver here; one the driver
    refuses is sent again through SQLAlchemy, which raises its error as
    for any statement. An oslo.db without that listener keeps its own
    way, untouched.
    """
    if engine.dialect.name != 'sqlite':
        return
    listeners = [listener for listener in engine.dispatch.begin
                 if getattr(listener, '__name__', None)
                 == _OSLO_DB_SQLITE_BEGIN]
    if len(listeners) != 1:
        return
    sa.event.remove(engine, 'begin', listeners[0])

    @sa.event.listens_for(engine, 'begin')
    def _sqlite_begin(connection):
        if 'in_transaction' in connection.info:
            return
        try:
            connection.connection.driver_connection.execute('BEGIN')
        except sqlite3.Error:
            connection.exec_driver_sql('BEGIN')
        connection.info['in_transaction'] = True


def _pool_sqlite_file(engine):
    """Keep an SQLite file database's connections in a pool.

    oslo.db gives SQLite files no pool, so every transaction opened, set
    up and closed a connection of its own, which cost the API more CPU
    than its statements. The pool is SQLAlchemy's own choice for files
    (its connections may cross threads), sized by ``[database]
    max_pool_size`` and ``max_overflow``; the engine's connection
    listeners (oslo.db's BEGIN and foreign keys) carry over to it.
    """
    if (engine.dialect.name != 'sqlite'
            or not isinstance(engine.pool, sa.pool.NullPool)):
        return
    old = engine.pool
    engine.pool = sa.pool.QueuePool(
        old._creator, pool_size=conf.CONF.database.max_pool_size,
        max_overflow=conf.CONF.database.max_overflow,
        recycle=old._recycle, pre_ping=False, dialect=engine.dialect,
        _dispatch=old.dispatch)
    old.dispose()


def new_facade(**options):
    """A transaction factory built the way the services build theirs.

    It reads ``[database]`` of the global CONF when first used, unless
    ``options`` (enginefacade's configure arguments) say otherwise. Foreign
    keys are enforced on SQLite too, whose file databases get a pool and
    a write-ahead log, and whose BEGIN goes to the driver directly.
    """
    facade = enginefacade.transaction_context()
    facade.configure(sqlite_fk=True, **options)
    facade.append_on_engine_create(_use_utf8mb4)
    facade.append_on_engine_create(_sqlite_begin_on_the_driver)
    facade.append_on_engine_create(_sqlite_file_in_wal_mode)
    facade.append_on_engine_create(_pool_sqlite_file)
    return facade


# The control plane's transaction factory.
context_manager = new_facade()


# Characters of a state change's detail that are kept. A longer detail (an
# agent's traceback) is cut rather than refused: losing the change itself
# would be worse than losing the end of its explanation.
MAX_DETAIL = 65536
_CUT_MARK = ' [cut]'


# Writes that MySQL or PostgreSQL chose as a deadlock victim are retried.
retry_on_deadlock = oslo_db_api.wrap_db_retry(
    max_retries=5, retry_on_deadlock=True)


def check_connection_url(url):
    """Refuse a ``[database] connection`` that no query could ever use.

    A URL SQLAlchemy cannot parse, or whose dialect or driver is not
    installed, failed every query with a traceback for as long as the
    service ran; the services check it at start instead. The URL itself
    is not quoted: it may hold a password.
    """
    try:
        sa.engine.make_url(url).get_dialect().import_dbapi()
    except (sa.exc.NoSuchModuleError, ImportError) as e:
        # NoSuchModuleError first: it is an ArgumentError too.
        raise exception.InvalidInputError(
            reason='[database] connection names a database driver that is '
                   'not installed: %s' % e) from None
    # ValueError: a port that is no number ("[::1" unclosed, "h:x").
    except (sa.exc.ArgumentError, ValueError):
        raise exception.InvalidInputError(
            reason='[database] connection is not a database URL') from None


def get_engine():
    """The writer engine, for the migrations and the manage command."""
    return context_manager.writer.get_engine()


def ping():
    """Run a trivial query on the database; raise what it raises.

    For the API's health check: one connection from the writer's pool
    (checked out with the pool's own ping, reconnecting once if that
    fails) and ``SELECT 1``, without any retry of its own, so a database
    that refuses or hangs fails it within the engine's connection and
    pool timeouts.
    """
    with get_engine().connect() as connection:
        connection.execute(sa.select(1)).scalar()


def reading(context):
    """One transaction for several reads of any tables, with ``with``.

    Each transaction costs a connection checkout and its ping: the reads
    of one decision (a rollout's plan: its selection, the busy instances,
    its dispatches) share one. A connection rather than a session: the
    reads it holds are plain; one that wants a session gets one on it.
    """
    return context_manager.reader.connection.using(context)


class KeptConnection:
    """A writer connection kept between one writer's transactions.

    Each transaction checked out of the pool pays the checkout, oslo.db's
    ping of the connection (``pool_pre_ping``: a round trip) and the
    checkin, a large part of a short transaction such as the conductor's
    report writer's. A writer that writes transaction after transaction
    keeps its connection instead and begins each transaction on it, as
    long as they follow within ``idle`` seconds of each other and for
    ``lifetime`` seconds at most. After a pause, after the lifetime, or
    after any error the connection goes back to the pool, and the next
    transaction checks one out again, pinged (and recycled) as before.

    The ping's guarantee is the caller's to keep: a kept connection that
    broke since its last transaction (the database restarted) fails the
    next one, which the caller then tries once more in a transaction of
    its own (``report_writer`` writes each chain alone). For one writer
    at a time, whichever thread it is.
    """

    IDLE = 1.0
    LIFETIME = 60.0

    def __init__(self, idle=IDLE, lifetime=LIFETIME, timer=time.monotonic):
        self._idle = idle
        self._lifetime = lifetime
        self._timer = timer
        self._connection = None
        self._since = self._used = None

    @contextlib.contextmanager
    def transaction(self):
        """A writer connection in a transaction, committed on success."""
        now = self._timer()
        if self._connection is not None and (
                now - self._used > self._idle
                or now - self._since > self._lifetime):
            self.close()
        if self._connection is None:
            self._connection = get_engine().connect()
            self._since = now
        try:
            with self._connection.begin():
                yield self._connection
        except BaseException:
            self.close()
            raise
        self._used = self._timer()

    def close(self):
        """Give the connection back to the pool, if one is kept."""
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                connection.close()
            except Exception:  # broken already: the pool discards it
                pass


def check_keys(what, given, allowed, required=frozenset()):
    """Refuse keys outside ``allowed`` and missing ``required`` ones."""
    unknown = set(given) - allowed
    if unknown:
        raise exception.InvalidInputError(reason='unknown %s: %s' % (
            what, ', '.join(sorted(unknown))))
    missing = required - set(given)
    if missing:
        raise exception.InvalidInputError(reason='missing %s: %s' % (
            what, ', '.join(sorted(missing))))


def check_strings(model, values, names):
    """Reject what the column would refuse or silently truncate."""
    for name in names:
        column = model.__table__.c[name]
        value = values.get(name)
        if value is None and column.nullable:
            continue
        length = column.type.length
        if not isinstance(value, str) or not value:
            raise exception.InvalidInputError(
                reason='%s must be a non-empty string' % name)
        if len(value) > length:
            raise exception.InvalidInputError(
                reason='%s is longer than %d characters'
                % (name, length))
        check_characters(name, value)


def check_characters(name, value):
    """Refuse a lone surrogate, which no database driver can encode, and NUL.

    JSON and the message bus carry one (``"\\ud800"``) as any character;
    PostgreSQL fails any statement with a NUL in a string (a DBError).
    """
    if '\x00' in value:
        raise exception.InvalidInputError(
            reason='%s holds a NUL character, which the database cannot '
                   'store' % name)
    if not value.isascii():
        try:
            value.encode('utf-8')
        except UnicodeEncodeError:
            raise exception.InvalidInputError(
                reason='%s holds a lone UTF-16 surrogate, not a character'
                % name) from None


# As rpc_interface.EXPECTED_MANIFEST_FIELDS, which imports the messaging
# library the manage command must not load.
EXPECTED_MANIFEST_FIELDS = ('sha256', 'package')


def expected_manifest_columns(expected):
    """The columns of a row that holds ``expected_manifest``."""
    expected = expected or {}
    return {'expected_manifest_sha256': expected.get('sha256'),
            'expected_package': expected.get('package')}


def expected_manifest_of(row):
    """A row's ``expected_manifest``: None when it expects nothing."""
    if row.expected_manifest_sha256 is None and row.expected_package is None:
        return None
    return {'sha256': row.expected_manifest_sha256,
            'package': row.expected_package}


def bounded_detail(detail):
    if detail is None:
        return None
    if not isinstance(detail, str):
        raise exception.InvalidInputError(reason='detail must be a string')
    # A NUL in an agent's output must not cost the state change it
    # explains: it is replaced rather than refused.
    detail = detail.replace('\x00', '\ufffd')
    check_characters('detail', detail)
    if len(detail) <= MAX_DETAIL:
        return detail
    return detail[:MAX_DETAIL - len(_CUT_MARK)] + _CUT_MARK


def check_json_object(name, value):
    """Refuse what the JSON column (stdlib json) cannot store as given."""
    if not isinstance(value, dict):
        raise exception.InvalidInputError(reason='%s must be an object' % name)
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        # RecursionError: nested deeper than the encoder goes from here.
        raise exception.InvalidInputError(
            reason='%s cannot be stored as JSON: %s' % (name, exc))
    if not all(isinstance(key, str) for key in value):
        raise exception.InvalidInputError(
            reason='%s keys must be strings' % name)


def check_limit(limit):
    """Refuse a page size that is not a positive integer."""
    if limit is None:
        return
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise exception.InvalidInputError(
            reason='limit must be a positive integer, not %r' % (limit,))


# table -> its no-op UPDATE, built once: the conductor runs one for each
# agent report it records.
_SQLITE_WRITE_LOCKS = {}


def take_sqlite_write_lock(connection, table):
    """On SQLite, make the transaction's first statement a write.

    SQLite has a single writer. A transaction that read first and then
    writes is refused at once ("database is locked") when another holds
    the write lock or committed since that read: it cannot wait, its
    snapshot would be stale. A transaction whose first statement writes
    waits for the lock (the busy timeout) like any writer. So a writer
    that must read first starts with an UPDATE of ``table`` that matches
    no row, which takes the lock all the same. MySQL and PostgreSQL lock
    rows, not the database: nothing is run on them.

    ``connection`` is the transaction's (a session's ``connection()``).
    """
    if connection.dialect.name != 'sqlite':
        return
    statement = _SQLITE_WRITE_LOCKS.get(table)
    if statement is None:
        key = list(table.primary_key.columns)[0]
        statement = _SQLITE_WRITE_LOCKS[table] = (
            sa.update(table).where(sa.false()).values({key.name: key}))
    connection.execute(statement)


@functools.lru_cache(maxsize=None)
def _lease_update(model):
    """``model``'s lease UPDATE, built once per model.

    Every reconcile pass takes one per rollout, and building it cost more
    CPU than running it.
    """
    table = model.__table__
    return (sa.update(table)
            .where(table.c.id == sa.bindparam('b_id'),
                   sa.or_(table.c.lease_owner.is_(None),
                          table.c.lease_owner == sa.bindparam('b_owner'),
                          table.c.lease_until < sa.bindparam('b_now')))
            .values(lease_owner=sa.bindparam('b_owner'),
                    lease_until=sa.bindparam('b_until')))


def take_lease(session, model, row_id, owner, until):
    """Whether ``owner`` now holds the lease on a row, until ``until``.

    It does when nobody held it, it expired, or ``owner`` held it already:
    one conditional UPDATE, so two conductors never both win it.
    ``session`` may be a session or a connection in a transaction.
    """
    return session.execute(_lease_update(model), {
        'b_id': row_id, 'b_owner': owner, 'b_now': timeutils.utcnow(),
        'b_until': timeutils.normalize_time(until)}).rowcount == 1


def newest_first_page(session, model, filters, limit, marker):
    """Rows of ``model`` matching ``filters`` exactly, newest first."""
    query = session.query(model)
    for key, value in filters.items():
        query = query.filter(getattr(model, key) == value)
    marker_row = None
    if marker is not None:
        marker_row = session.get(model, marker)
        if marker_row is None:
            raise exception.MarkerNotFoundError(marker=marker)
    return sqlalchemyutils.paginate_query(
        query, model, limit, ['created_at', 'id'], marker=marker_row,
        sort_dirs=['desc', 'desc']).all()
