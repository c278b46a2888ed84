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

"""Migrations and trove-upgrade-manage db on SQLite."""

import io
import os
from unittest import mock

import fixtures
from oslo_db.sqlalchemy import enginefacade
import sqlalchemy as sa

from trove_upgrade.cmd import manage
from trove_upgrade.common import exception
from trove_upgrade.db import common as db_common
from trove_upgrade.db import migration
from trove_upgrade.tests import base
from trove_upgrade.tests.fixtures import database


def _head():
    script = migration.script_directory()
    return script.get_current_head()


class TestMigration(base.TestCase):

    def test_fixture_database_is_at_head(self):
        fixture = self.useFixture(database.Database())
        self.assertEqual(_head(), migration.version())
        self.assertEqual(_head(), migration.version(engine=fixture.engine))

    def test_one_head(self):
        script = migration.script_directory()
        self.assertEqual(1, len(script.get_heads()))

    def test_upgrade_of_an_empty_database(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path, 'x.db')
        engine = sa.create_engine('sqlite:///' + path)
        self.addCleanup(engine.dispose)
        self.assertIsNone(migration.version(engine=engine))
        migration.upgrade(engine=engine)
        self.assertEqual(_head(), migration.version(engine=engine))
        self.assertEqual(
            ['agents', 'alembic_version', 'desired_version_dispatches',
             'desired_version_events', 'desired_versions', 'instance_keys',
             'packages', 'rollout_dispatches', 'rollouts', 'upgrade_events',
             'upgrades'],
            sorted(sa.inspect(engine).get_table_names()))

    def test_fixtures_are_isolated(self):
        first = self.useFixture(database.Database())
        second = database.Database()
        second.setUp()
        self.addCleanup(second.cleanUp)
        self.assertNotEqual(first.url, second.url)


class TestSchemaAtStart(base.TestCase):
    """The services refuse an empty or older schema, and only that."""

    def setUp(self):
        super().setUp()
        path = os.path.join(self.useFixture(fixtures.TempDir()).path, 'x.db')
        self.url = 'sqlite:///' + path
        self.engine = sa.create_engine(self.url)
        self.addCleanup(self.engine.dispose)
        self.logged = self.useFixture(
            fixtures.FakeLogger(name=migration.__name__))

    def test_an_empty_database_is_refused(self):
        error = self.assertRaises(exception.SchemaNotCurrentError,
                                  migration.check_schema_at_start, self.url)
        self.assertEqual('The database schema is not current: the database '
                         'has no schema; run: trove-upgrade-manage db sync',
                         str(error))

    def test_an_older_schema_is_refused(self):
        older = migration.script_directory().get_revision(_head())
        migration.upgrade(older.down_revision, engine=self.engine)
        error = self.assertRaises(exception.SchemaNotCurrentError,
                                  migration.check_schema_at_start, self.url)
        self.assertIn('at revision %s, not at %s' % (older.down_revision,
                                                     _head()), str(error))

    def test_the_current_schema_passes(self):
        migration.upgrade(engine=self.engine)
        self.assertIsNone(migration.check_schema_at_start(self.url))
        self.assertEqual('', self.logged.output)

    def test_a_newer_schema_passes_with_a_warning(self):
        migration.upgrade(engine=self.engine)
        with self.engine.begin() as connection:
            connection.execute(sa.text(
                "UPDATE alembic_version SET version_num = 'f00dfeedbeef'"))
        self.assertIsNone(migration.check_schema_at_start(self.url))
        self.assertIn('revision f00dfeedbeef, which this release does not '
                      'know', self.logged.output)

    def test_an_unreachable_database_is_left_to_outage_handling(self):
        directory = os.path.join(self.useFixture(fixtures.TempDir()).path,
                                 'missing')
        url = 'sqlite:///%s/x.db' % directory
        self.assertIsNone(migration.check_schema_at_start(url))
        self.assertIn('Could not read the database schema', self.logged.output)
        self.assertFalse(os.path.exists(directory))

    def test_phases(self):
        scripts = migration.script_directory()
        self.assertEqual(migration.EXPAND, migration.phase_of(
            scripts.get_revision(_head())))
        # The revisions from before the phases are expansions.
        self.assertEqual({migration.EXPAND}, {
            phase for _, phase in migration.pending(None)})
        self.assertEqual([], migration.pending(_head()))
        self.assertEqual(_head(), migration.step_target(migration.EXPAND,
                                                        None))
        self.assertIsNone(migration.step_target(migration.CONTRACT, None))

    def test_compare_with_head(self):
        self.assertEqual(migration.CURRENT,
                         migration.compare_with_head(_head()))
        self.assertEqual(migration.EMPTY, migration.compare_with_head(None))
        self.assertEqual(migration.NEWER,
                         migration.compare_with_head('f00dfeedbeef'))
        older = migration.script_directory().get_revision(_head())
        self.assertEqual(migration.OLDER,
                         migration.compare_with_head(older.down_revision))


class TestManage(base.TestCase):
    """The command as a user runs it: options come from a config file."""

    def setUp(self):
        super().setUp()
        self.directory = self.useFixture(fixtures.TempDir()).path
        self.db_path = os.path.join(self.directory, 'manage.sqlite')
        self.stdout = self.useFixture(
            fixtures.MockPatch('sys.stdout', new_callable=io.StringIO)).mock
        self.stderr = self.useFixture(
            fixtures.MockPatch('sys.stderr', new_callable=io.StringIO)).mock
        # A facade that has not started yet, so that it reads the options
        # the command parses.
        facade = enginefacade.transaction_context()
        self.addCleanup(db_common.context_manager.patch_factory(facade))
        self.addCleanup(facade.dispose_pool)

    def _config(self, **database):
        database.setdefault('connection', 'sqlite:///' + self.db_path)
        path = os.path.join(self.directory, 'trove-upgrade.conf')
        with open(path, 'w') as conf_file:
            conf_file.write('[DEFAULT]\nstate_path = %s\n' % self.directory)
            conf_file.write('[database]\n')
            for key, value in database.items():
                conf_file.write('%s = %s\n' % (key, value))
        return path

    def _manage(self, config, *args):
        return manage.main(['--config-file', config] + list(args))

    def test_sync_creates_the_sqlite_database(self):
        config = self._config()
        self.assertEqual(0, self._manage(config, 'db', 'version'))
        self.assertIn('None', self.stdout.getvalue())

        self.assertEqual(0, self._manage(config, 'db', 'sync'))
        self.assertIn('revision %s' % _head(), self.stdout.getvalue())
        engine = sa.create_engine('sqlite:///' + self.db_path)
        self.addCleanup(engine.dispose)
        self.assertEqual(_head(), migration.version(engine=engine))

    def test_version_after_sync(self):
        config = self._config()
        self._manage(config, 'db', 'sync')
        self.stdout.seek(0)
        self.stdout.truncate()
        self.assertEqual(0, self._manage(config, 'db', 'version'))
        self.assertEqual(_head() + '\nPending: nothing is pending.\n',
                         self.stdout.getvalue())

    def test_sync_twice(self):
        config = self._config()
        self.assertEqual(0, self._manage(config, 'db', 'sync'))
        self.assertEqual(0, self._manage(config, 'db', 'sync', 'head'))

    def test_unknown_revision(self):
        config = self._config()
        self.assertEqual(1, self._manage(config, 'db', 'sync', 'nosuchrev'))
        self.assertIn("Migration error: Can't locate revision",
                      self.stderr.getvalue())

    def test_unreachable_database(self):
        config = self._config(
            connection='mysql+pymysql://u:p@127.0.0.1:9/nodb',
            max_retries=1, retry_interval=0)
        with mock.patch('time.sleep'):
            self.assertEqual(1, self._manage(config, 'db', 'sync'))
        self.assertIn('Database error:', self.stderr.getvalue())

    def test_missing_action(self):
        config = self._config()
        error = self.assertRaises(SystemExit, self._manage, config, 'db')
        self.assertEqual(2, error.code)
        self.assertIn('required: action', self.stderr.getvalue())
