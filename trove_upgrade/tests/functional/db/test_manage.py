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

"""trove-upgrade-manage db, run as a process, on every supported database."""

import os
import subprocess
import sys

import fixtures
import sqlalchemy as sa

from trove_upgrade.db import common as db_common
from trove_upgrade.db import migration
from trove_upgrade.tests import base
from trove_upgrade.tests.fixtures import database

_MANAGE = os.path.join(os.path.dirname(sys.executable),
                       'trove-upgrade-manage')


def _head():
    script = migration.script_directory()
    return script.get_current_head()


class _ManageTests:

    def _write_config(self, connection=None):
        self.directory = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(self.directory, 'trove-upgrade.conf')
        with open(path, 'w') as conf_file:
            conf_file.write('[DEFAULT]\nstate_path = %s\n' % self.directory)
            if connection:
                conf_file.write('[database]\nconnection = %s\n' % connection)
        return path

    def _manage(self, config, *args):
        return subprocess.run([_MANAGE, '--config-file', config] + list(args),
                              capture_output=True, text=True, timeout=120,
                              check=False)


class TestManageDefaultSQLite(_ManageTests, base.TestCase):
    """Without a [database] section the database is under state_path."""

    def test_version_sync_version(self):
        config = self._write_config()
        before = self._manage(config, 'db', 'version')
        self.assertEqual(0, before.returncode, before.stderr)
        self.assertEqual('None (the database was never synced)\nPending: '
                         'expand: %s.\n' % ', '.join(
                             r for r, _ in migration.pending(None)),
                         before.stdout)
        sync = self._manage(config, 'db', 'sync')
        self.assertEqual(0, sync.returncode, sync.stderr)
        after = self._manage(config, 'db', 'version')
        self.assertEqual(0, after.returncode, after.stderr)
        self.assertEqual(_head() + '\nPending: nothing is pending.\n',
                         after.stdout)
        path = os.path.join(self.directory, 'trove_upgrade.sqlite')
        engine = sa.create_engine('sqlite:///' + path)
        self.addCleanup(engine.dispose)
        self.assertEqual(_head(), migration.version(engine=engine))


class _OpportunisticManageTests(_ManageTests,
                                database.OpportunisticDBTestMixin):

    def test_sync(self):
        config = self._write_config(
            db_common.get_engine().url.render_as_string(hide_password=False))
        sync = self._manage(config, 'db', 'sync')
        self.assertEqual(0, sync.returncode, sync.stderr)
        self.assertEqual('Database is at revision %s.\n' % _head(),
                         sync.stdout)
        engine = db_common.get_engine()
        self.assertEqual(_head(), migration.version(engine=engine))
        self.assertTrue({'upgrades', 'upgrade_events', 'agents'}.issubset(
            sa.inspect(engine).get_table_names()))


class TestManageMySQL(_OpportunisticManageTests, base.TestCase):
    FIXTURE = database.MySQLOpportunisticFixture


class TestManagePostgreSQL(_OpportunisticManageTests, base.TestCase):
    FIXTURE = database.PostgresqlOpportunisticFixture
