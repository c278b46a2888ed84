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

"""The transaction factory the services build, on SQLite files."""

import sqlite3
import threading
from unittest import mock

from oslo_db import exception as db_exception
import sqlalchemy as sa

from trove_upgrade.common import context
from trove_upgrade.db import common as db_common
from trove_upgrade.db import models
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.tests import base
from trove_upgrade.tests.fixtures import database


class TestSQLiteFilePool(base.TestCase):

    def setUp(self):
        super().setUp()
        self.fixture = self.useFixture(database.Database())
        self.context = context.get_admin_context()

    def _connection_id(self):
        with db_common.context_manager.writer.connection.using(
                self.context) as connection:
            return id(connection.connection.dbapi_connection)

    def test_ping_queries_the_database(self):
        # It raises when the query fails: tests/functional/api/
        # test_database_outage.py cuts a real database off.
        self.assertIsNone(db_common.ping())

    def test_transactions_reuse_a_pooled_connection(self):
        self.assertIsInstance(self.fixture.engine.pool, sa.pool.QueuePool)
        self.assertEqual(self._connection_id(), self._connection_id())

    def test_pooled_connections_keep_the_engines_setup(self):
        # oslo.db's listeners: foreign keys on, and a BEGIN of its own
        # (the driver's is off), on every connection of the pool.
        def foreign_keys():
            with db_common.context_manager.reader.connection.using(
                    self.context) as connection:
                return (connection.exec_driver_sql(
                    'PRAGMA foreign_keys').scalar(),
                    connection.connection.dbapi_connection.in_transaction)
        results = []
        threads = [threading.Thread(target=lambda: results.append(
            foreign_keys())) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual([(1, True)] * 3, results)

    def test_the_file_is_written_through_a_synced_write_ahead_log(self):
        with db_common.context_manager.writer.connection.using(
                self.context) as connection:
            mode = connection.exec_driver_sql('PRAGMA journal_mode').scalar()
            # 2 is FULL: every commit synced, as in the default mode.
            synchronous = connection.exec_driver_sql(
                'PRAGMA synchronous').scalar()
        self.assertEqual(('wal', 2), (mode, synchronous))

    def test_a_rolled_back_transaction_leaves_none_open(self):
        def fail():
            with db_common.context_manager.writer.connection.using(
                    self.context) as connection:
                connection.exec_driver_sql(
                    "INSERT INTO upgrade_events (upgrade_id, created_at, "
                    "source, to_state) VALUES ('none', '2026-01-01', 'x', "
                    "'PENDING')")
        # The upgrade does not exist: the foreign key refuses the event.
        self.assertRaises(db_exception.DBReferenceError, fail)
        with db_common.context_manager.writer.connection.using(
                self.context) as connection:
            self.assertTrue(
                connection.connection.dbapi_connection.in_transaction)
            self.assertEqual(0, connection.exec_driver_sql(
                'SELECT count(*) FROM upgrade_events').scalar())


class TestSQLiteBegin(base.TestCase):
    """oslo.db's BEGIN, sent to the driver rather than through SQLAlchemy."""

    def setUp(self):
        super().setUp()
        self.fixture = self.useFixture(database.Database())
        self.context = context.get_admin_context()
        self.executed = []
        sa.event.listen(self.fixture.engine, 'before_cursor_execute',
                        self._executed)
        self.addCleanup(sa.event.remove, self.fixture.engine,
                        'before_cursor_execute', self._executed)

    def _executed(self, conn, cursor, statement, *args):
        self.executed.append(statement)

    def test_each_transaction_begins_once_on_the_driver(self):
        with db_common.context_manager.writer.connection.using(
                self.context) as connection:
            # The pool's one connection, which the transactions below reuse.
            driver = connection.connection.driver_connection
        driver_statements = []
        driver.set_trace_callback(driver_statements.append)
        self.addCleanup(driver.set_trace_callback, None)
        for _ in range(2):
            with db_common.context_manager.writer.connection.using(
                    self.context) as connection:
                self.assertIs(driver, connection.connection.driver_connection)
                self.assertTrue(driver.in_transaction)
                connection.exec_driver_sql('SELECT count(*) FROM upgrades')
        self.assertEqual(['SELECT count(*) FROM upgrades'] * 2,
                         self.executed)
        self.assertEqual(['BEGIN', 'SELECT count(*) FROM upgrades',
                          'COMMIT'] * 2, driver_statements)

    def test_a_begin_the_driver_refuses_raises_as_before(self):
        # As oslo.db's BEGIN through SQLAlchemy raised it.
        with self.fixture.engine.connect() as connection:
            # A transaction SQLAlchemy knows nothing of: BEGIN fails.
            connection.connection.driver_connection.execute('BEGIN')
            error = self.assertRaises(sa.exc.OperationalError,
                                      connection.begin)
            self.assertIn('within a transaction', str(error))
            self.assertEqual(['BEGIN'], self.executed)

    def test_an_engine_without_oslo_db_begin_is_left_alone(self):
        engine = sa.create_engine('sqlite://')
        self.addCleanup(engine.dispose)
        db_common._sqlite_begin_on_the_driver(engine)
        self.assertEqual([], list(engine.dispatch.begin))


class TestSQLiteWriteLock(base.TestCase):

    def test_it_takes_the_lock_and_changes_no_row(self):
        fixture = self.useFixture(database.Database())
        ctx = context.get_admin_context()
        upgrade = db_upgrades.create_upgrade(ctx, {
            'instance_id': 'instance', 'instance_version': '2.0.0',
            'strategy': 'swift', 'location': 'agents/2.0.0.tar'})
        other = sqlite3.connect(fixture.url[len('sqlite:///'):], timeout=0,
                                isolation_level=None)
        self.addCleanup(other.close)
        with db_common.context_manager.writer.connection.using(
                ctx) as connection:
            db_common.take_sqlite_write_lock(connection,
                                             models.Upgrade.__table__)
            error = self.assertRaises(sqlite3.OperationalError, other.execute,
                                      'BEGIN IMMEDIATE')
            self.assertIn('database is locked', str(error))
        other.execute('BEGIN IMMEDIATE')
        other.execute('ROLLBACK')
        self.assertEqual(upgrade, db_upgrades.get_upgrade(ctx, upgrade['id']))

    def test_other_databases_get_no_statement(self):
        for name in ('mysql', 'postgresql'):
            connection = mock.Mock()
            connection.dialect.name = name
            db_common.take_sqlite_write_lock(connection,
                                             models.Upgrade.__table__)
            connection.execute.assert_not_called()


class TestKeptConnection(base.TestCase):
    """``KeptConnection`` on an SQLite file, its clock moved by hand."""

    EVENT = ("INSERT INTO upgrade_events (upgrade_id, created_at, source, "
             "to_state) VALUES ('none', '2026-01-01', 'x', 'PENDING')")

    def setUp(self):
        super().setUp()
        self.fixture = self.useFixture(database.Database())
        self.now = 100.0
        self.kept = db_common.KeptConnection(idle=1.0, lifetime=60.0,
                                             timer=lambda: self.now)
        self.addCleanup(self.kept.close)

    def _connection(self):
        with self.kept.transaction() as connection:
            self.assertTrue(connection.in_transaction())
            return connection

    def _checked_out(self):
        return self.fixture.engine.pool.checkedout()

    def test_transactions_that_follow_closely_share_it(self):
        first = self._connection()
        self.now += 0.9
        self.assertIs(first, self._connection())
        self.assertFalse(first.in_transaction())
        self.assertEqual(1, self._checked_out())
        self.kept.close()
        self.assertEqual(0, self._checked_out())

    def test_after_a_pause_one_is_checked_out_again(self):
        first = self._connection()
        self.now += 1.1
        self.assertIsNot(first, self._connection())
        self.assertTrue(first.closed)
        self.assertEqual(1, self._checked_out())

    def test_after_its_lifetime_one_is_checked_out_again(self):
        first = self._connection()
        start = self.now
        while self.now + 0.9 - start <= 60.0:
            self.now += 0.9
            self.assertIs(first, self._connection())
        self.now += 0.9
        self.assertIsNot(first, self._connection())

    def test_a_transaction_commits(self):
        upgrade = db_upgrades.create_upgrade(context.get_admin_context(), {
            'instance_id': '6f1c1a53-9d63-4c43-a0a1-6b1ad1f3c001',
            'instance_version': '2.0.0', 'strategy': 'swift',
            'location': 'agents/2.0.0.tar'})
        with self.kept.transaction() as connection:
            connection.execute(
                sa.text("UPDATE upgrades SET status = 'SENT' "
                        "WHERE id = :id"), {'id': upgrade['id']})
        self.assertEqual('SENT', db_upgrades.get_upgrade(
            context.get_admin_context(), upgrade['id'])['status'])

    def test_an_error_rolls_back_and_gives_it_back(self):
        first = self._connection()

        def fail():
            with self.kept.transaction() as connection:
                connection.exec_driver_sql(self.EVENT)
        # The upgrade does not exist: the foreign key refuses the event.
        self.assertRaises(db_exception.DBReferenceError, fail)
        self.assertTrue(first.closed)
        self.assertEqual(0, self._checked_out())
        self.assertIsNot(first, self._connection())
