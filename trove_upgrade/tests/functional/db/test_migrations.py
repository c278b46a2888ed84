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

"""The migrations on every supported database.

They run step by step from an empty database, every step is checked, and
the schema they end with must equal the models'. oslo.db's opportunistic
fixtures provide a new database per test on MariaDB and PostgreSQL as user
openstack_citest (see tools/test-setup.sh); the tests skip only when that
database server cannot be reached.
"""

import datetime

from oslo_db.sqlalchemy import test_migrations
import sqlalchemy as sa

from trove_upgrade.db import common as db_common
from trove_upgrade.db import migration
from trove_upgrade.db import models
from trove_upgrade.tests import base
from trove_upgrade.tests.fixtures import database


class _ModelsMigrationsSync(test_migrations.ModelsMigrationsSync):

    def setUp(self):
        super().setUp()
        self.engine = db_common.get_engine()

    def db_sync(self, engine):
        migration.upgrade('head', engine=engine)

    def get_engine(self):
        return self.engine

    def get_metadata(self):
        return models.Base.metadata

    def include_object(self, object_, name, type_, reflected, compare_to):
        # alembic's bookkeeping table is no model.
        return not (type_ == 'table' and name == 'alembic_version')


class _MigrationsWalk:
    """Upgrade one revision at a time and check what each one made."""

    def setUp(self):
        super().setUp()
        self.engine = db_common.get_engine()

    def _revisions(self):
        script = migration.script_directory()
        return [r.revision for r in reversed(list(script.walk_revisions()))]

    def test_every_revision_has_a_check(self):
        for revision in self._revisions():
            self.assertTrue(hasattr(self, '_check_%s' % revision),
                            'no check for revision %s' % revision)

    def test_walk_versions(self):
        self.assertIsNone(migration.version(engine=self.engine))
        for revision in self._revisions():
            migration.upgrade(revision, engine=self.engine)
            self.assertEqual(revision, migration.version(engine=self.engine))
            with self.engine.connect() as connection:
                getattr(self, '_check_%s' % revision)(connection)
        # A second sync at head is a no-op.
        migration.upgrade('head', engine=self.engine)

    def _indexes(self, inspector, table):
        return {i['name']: i['column_names']
                for i in inspector.get_indexes(table)}

    def _check_5a2b7c9d1e3f(self, connection):
        inspector = sa.inspect(connection)
        self.assertTrue({'upgrades', 'upgrade_events', 'agents'}.issubset(
            inspector.get_table_names()))
        self.assertEqual(
            {'upgrades_instance_id_idx': ['instance_id'],
             'upgrades_status_idx': ['status'],
             'upgrades_rollout_id_idx': ['rollout_id'],
             'upgrades_created_at_idx': ['created_at']},
            self._indexes(inspector, 'upgrades'))
        foreign_keys = inspector.get_foreign_keys('upgrade_events')
        self.assertEqual([(['upgrade_id'], 'upgrades', ['id'])],
                         [(fk['constrained_columns'], fk['referred_table'],
                           fk['referred_columns']) for fk in foreign_keys])
        self.assertEqual(['instance_id'], inspector.get_pk_constraint(
            'agents')['constrained_columns'])
        if connection.dialect.name == 'mysql':
            # Events within one second keep their order.
            created_at = {c['name']: c for c in
                          inspector.get_columns('upgrade_events')}
            self.assertEqual(6, created_at['created_at']['type'].fsp)

    def _check_7c4e1a9b2d60(self, connection):
        inspector = sa.inspect(connection)
        self.assertTrue({'rollouts', 'rollout_dispatches'}.issubset(
            inspector.get_table_names()))
        self.assertEqual({'rollouts_status_idx': ['status']},
                         self._indexes(inspector, 'rollouts'))
        unique = inspector.get_unique_constraints('rollout_dispatches')
        self.assertEqual([['rollout_id', 'instance_id', 'attempt']],
                         [u['column_names'] for u in unique])
        foreign_keys = inspector.get_foreign_keys('rollout_dispatches')
        self.assertEqual(
            [(['rollout_id'], 'rollouts', ['id']),
             (['upgrade_id'], 'upgrades', ['id'])],
            sorted((fk['constrained_columns'], fk['referred_table'],
                    fk['referred_columns']) for fk in foreign_keys))

    def _check_3e8d5f2a6b91(self, connection):
        inspector = sa.inspect(connection)
        self.assertIn('instance_keys', inspector.get_table_names())
        self.assertEqual(['key_id'], inspector.get_pk_constraint(
            'instance_keys')['constrained_columns'])
        self.assertEqual({'instance_keys_instance_id_idx': ['instance_id']},
                         self._indexes(inspector, 'instance_keys'))
        columns = {c['name']: c for c in
                   inspector.get_columns('instance_keys')}
        self.assertTrue(columns['expires_at']['nullable'])
        self.assertFalse(columns['key_material']['nullable'])

    def _check_9d3f6b2c8a17(self, connection):
        columns = {c['name']: c for c in
                   sa.inspect(connection).get_columns('upgrades')}
        self.assertFalse(columns['held']['nullable'])
        # Rows written without it (every existing one, and those of a
        # release that does not know it) are not held.
        connection.execute(sa.text(
            "INSERT INTO upgrades (id, instance_id, instance_version, "
            "strategy, location, metadata, allow_downgrade, status, "
            "created_at) VALUES ('u1', 'i1', '2.0', 'local', '/p', '{}', "
            ":no, 'PENDING', :now)"),
            {'no': False, 'now': datetime.datetime(2026, 12, 1)})
        self.assertEqual([False], [bool(v) for v in connection.scalars(
            sa.text("SELECT held FROM upgrades WHERE id = 'u1'"))])
        connection.rollback()

    def _check_c5e2a8f4d7b3(self, connection):
        columns = {c['name']: c for c in
                   sa.inspect(connection).get_columns('upgrades')}
        self.assertTrue(columns['resend_at']['nullable'])
        self.assertFalse(columns['send_count']['nullable'])
        if connection.dialect.name == 'mysql':
            self.assertEqual(6, columns['resend_at']['type'].fsp)
        # Rows written without them (every existing one, and those of a
        # release that does not know them) are never sent again.
        connection.execute(sa.text(
            "INSERT INTO upgrades (id, instance_id, instance_version, "
            "strategy, location, metadata, allow_downgrade, status, "
            "created_at) VALUES ('u1', 'i1', '2.0', 'local', '/p', '{}', "
            ":no, 'SENT', :now)"),
            {'no': False, 'now': datetime.datetime(2026, 12, 1)})
        self.assertEqual([(None, 0)], [tuple(r) for r in connection.execute(
            sa.text("SELECT resend_at, send_count FROM upgrades "
                    "WHERE id = 'u1'"))])
        connection.rollback()

    def _check_48bd5900b951(self, connection):
        columns = {c['name']: c for c in
                   sa.inspect(connection).get_columns('rollouts')}
        self.assertFalse(columns['order_by_topology']['nullable'])
        self.assertFalse(columns['hold_set_on_failure']['nullable'])
        # Rollouts written without them (every existing one, and those of
        # a release that does not know them) follow the topology and hold.
        connection.execute(sa.text(
            "INSERT INTO rollouts (id, name, instance_version, strategy, "
            "location, selector, canary, max_in_flight, max_in_flight_kind, "
            "max_failures, max_failures_kind, per_agent_retries, "
            "agent_deadline, status, failures_acknowledged, created_at) "
            "VALUES ('r1', 'r', '2.0', 'local', '/p', '{}', 0, 1, 'count', "
            "0, 'count', 0, 60, 'RUNNING', 0, :now)"),
            {'now': datetime.datetime(2026, 12, 7)})
        self.assertEqual([(True, True)], [
            (bool(r[0]), bool(r[1])) for r in connection.execute(sa.text(
                "SELECT order_by_topology, hold_set_on_failure FROM "
                "rollouts WHERE id = 'r1'"))])
        connection.rollback()

    def _check_e7a1c4b9d2f5(self, connection):
        # Expand only: nullable columns, and a row the previous release
        # writes without them reads back expecting no manifest.
        for table, names in (
                ('packages', ('manifest_sha256', 'manifest_package')),
                ('upgrades', ('expected_manifest_sha256',
                              'expected_package')),
                ('rollouts', ('expected_manifest_sha256',
                              'expected_package'))):
            columns = {c['name']: c for c in
                       sa.inspect(connection).get_columns(table)}
            for name in names:
                self.assertTrue(columns[name]['nullable'], name)
        connection.execute(sa.text(
            "INSERT INTO upgrades (id, instance_id, instance_version, "
            "strategy, location, metadata, allow_downgrade, status, "
            "created_at) VALUES ('u1', 'i1', '2.0', 'local', '/p', '{}', "
            ":false, 'PENDING', :now)"),
            {'now': datetime.datetime(2026, 12, 7), 'false': False})
        self.assertEqual([(None, None)], list(connection.execute(sa.text(
            "SELECT expected_manifest_sha256, expected_package FROM "
            "upgrades WHERE id = 'u1'"))))
        connection.rollback()

    def _check_9b6f3d2c8e41(self, connection):
        inspector = sa.inspect(connection)
        self.assertTrue({'packages', 'desired_versions',
                         'desired_version_events',
                         'desired_version_dispatches'}.issubset(
            inspector.get_table_names()))
        self.assertEqual([['name', 'version']], [
            u['column_names']
            for u in inspector.get_unique_constraints('packages')])
        self.assertEqual(
            [['desired_version_id', 'instance_id', 'round', 'attempt']],
            [u['column_names'] for u in
             inspector.get_unique_constraints('desired_version_dispatches')])
        foreign_keys = inspector.get_foreign_keys(
            'desired_version_dispatches')
        self.assertEqual(
            [(['desired_version_id'], 'desired_versions', ['id']),
             (['upgrade_id'], 'upgrades', ['id'])],
            sorted((fk['constrained_columns'], fk['referred_table'],
                    fk['referred_columns']) for fk in foreign_keys))
        # The audit trail outlives what it audits: no foreign key.
        self.assertEqual([], inspector.get_foreign_keys(
            'desired_version_events'))
        columns = {c['name']: c for c in inspector.get_columns('packages')}
        # A payload may exceed 2 GiB.
        self.assertIsInstance(columns['size']['type'], sa.BigInteger)
        self.assertTrue(columns['min_upgrade_from']['nullable'])
        self.assertFalse(columns['sha256']['nullable'])


class TestModelsSyncSQLite(_ModelsMigrationsSync,
                           database.OpportunisticDBTestMixin,
                           base.TestCase):
    FIXTURE = database.SQLiteOpportunisticFixture


class TestModelsSyncMySQL(_ModelsMigrationsSync,
                          database.OpportunisticDBTestMixin,
                          base.TestCase):
    FIXTURE = database.MySQLOpportunisticFixture


class TestModelsSyncPostgreSQL(_ModelsMigrationsSync,
                               database.OpportunisticDBTestMixin,
                               base.TestCase):
    FIXTURE = database.PostgresqlOpportunisticFixture


class TestMigrationsWalkSQLite(_MigrationsWalk,
                               database.OpportunisticDBTestMixin,
                               base.TestCase):
    FIXTURE = database.SQLiteOpportunisticFixture


class TestMigrationsWalkMySQL(_MigrationsWalk,
                              database.OpportunisticDBTestMixin,
                              base.TestCase):
    FIXTURE = database.MySQLOpportunisticFixture


class TestMigrationsWalkPostgreSQL(_MigrationsWalk,
                                   database.OpportunisticDBTestMixin,
                                   base.TestCase):
    FIXTURE = database.PostgresqlOpportunisticFixture
