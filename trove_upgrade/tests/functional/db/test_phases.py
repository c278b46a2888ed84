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

"""The expand, migrate and contract phases, on MariaDB and PostgreSQL.

``trove-upgrade-manage db expand|migrate|contract|check`` run as processes
from the previous release's revision to this one's; the phases' order is
tried on a copy of the revisions with a migrate and a contract revision of
a made-up next release on top.
"""

import os
import shutil
import subprocess
import sys

import fixtures
import sqlalchemy as sa

from trove_upgrade.common import exception
from trove_upgrade.db import common as db_common
from trove_upgrade.db import migration
from trove_upgrade.tests import base
from trove_upgrade.tests.fixtures import database
from trove_upgrade.tests.functional import previous_release

_MANAGE = os.path.join(os.path.dirname(sys.executable),
                       'trove-upgrade-manage')

# The newest revision of the previous release: what its ``db sync`` left.
PREVIOUS_HEAD = previous_release.SCHEMA

# A made-up next release: a table and a column added, the data copied, the
# old column dropped.
_NEXT = {
    'f1000000e001': ('expand', '''
    op.create_table('phase_test', sa.Column('id', sa.Integer,
                                            primary_key=True),
                    sa.Column('old_value', sa.String(64)))
'''),
    'f1000000e002': ('expand', '''
    op.add_column('phase_test', sa.Column('new_value', sa.String(64)))
'''),
    'f1000000a003': ('migrate', '''
    op.execute('UPDATE phase_test SET new_value = old_value '
               'WHERE new_value IS NULL')
'''),
    'f1000000c004': ('contract', '''
    with op.batch_alter_table('phase_test') as batch:
        batch.drop_column('old_value')
'''),
}

_REVISION = '''
from alembic import op
import sqlalchemy as sa

revision = %(revision)r
down_revision = %(down)r
branch_labels = None
depends_on = None
phase = %(phase)r


def upgrade():
%(body)s
'''


class _PhaseTests(database.OpportunisticDBTestMixin):

    def setUp(self):
        super().setUp()
        self.engine = db_common.get_engine()
        self.url = self.engine.url.render_as_string(hide_password=False)
        directory = self.useFixture(fixtures.TempDir()).path
        self.config = os.path.join(directory, 'trove-upgrade.conf')
        with open(self.config, 'w') as conf_file:
            conf_file.write('[DEFAULT]\nstate_path = %s\n[database]\n'
                            'connection = %s\n' % (directory, self.url))

    def _manage(self, *args):
        return subprocess.run(
            [_MANAGE, '--config-file', self.config, 'db'] + list(args),
            capture_output=True, text=True, timeout=120, check=False)

    def _next_release(self):
        """A copy of the revisions with the made-up next release's."""
        location = os.path.join(self.useFixture(fixtures.TempDir()).path,
                                'migrations')
        shutil.copytree(migration._SCRIPT_LOCATION, location,
                        ignore=shutil.ignore_patterns('__pycache__'))
        down = migration.script_directory().get_current_head()
        for revision, (phase, body) in _NEXT.items():
            with open(os.path.join(location, 'versions',
                                   '%s_test.py' % revision), 'w') as f:
                f.write(_REVISION % {'revision': revision, 'down': down,
                                     'phase': phase, 'body': body})
            down = revision
        return location, migration.script_directory(location)

    def test_expand_from_the_previous_release(self):
        migration.upgrade(PREVIOUS_HEAD, engine=self.engine)
        head = migration.script_directory().get_current_head()

        check = self._manage('check')
        self.assertEqual(2, check.returncode, check.stderr)
        self.assertIn('Next: trove-upgrade-manage db expand.', check.stdout)
        self.assertIn('expand: 48bd5900b951, %s' % head, check.stdout)
        # Nothing of the other phases: each says so and changes nothing.
        for phase in ('migrate', 'contract'):
            step = self._manage(phase)
            self.assertEqual(0, step.returncode, step.stderr)
            self.assertIn('Nothing to %s' % phase, step.stdout)
        self.assertEqual(PREVIOUS_HEAD, migration.version(self.engine))

        expand = self._manage('expand')
        self.assertEqual(0, expand.returncode, expand.stderr)
        self.assertEqual('Database is at revision %s; pending: nothing is '
                         'pending.\n' % head, expand.stdout)
        columns = {c['name'] for c in sa.inspect(self.engine).get_columns(
            'upgrades')}
        self.assertTrue({'expected_manifest_sha256',
                         'expected_package'}.issubset(columns))
        check = self._manage('check')
        self.assertEqual(0, check.returncode, check.stderr)
        version = self._manage('version')
        self.assertEqual('%s\nPending: nothing is pending.\n' % head,
                         version.stdout)

    def test_phases_in_their_order(self):
        location, scripts = self._next_release()
        migration.upgrade(engine=self.engine)
        head = migration.script_directory().get_current_head()

        def step(phase):
            target = migration.step_target(
                phase, migration.version(self.engine), scripts)
            if target is not None:
                migration.upgrade(target, engine=self.engine,
                                  script_location=location)
            return target

        self.assertEqual(
            'expand: f1000000e001, f1000000e002; migrate: f1000000a003; '
            'contract: f1000000c004',
            migration.describe_pending(head, scripts))
        # Neither the data nor the removal before the expansion.
        for phase in ('migrate', 'contract'):
            error = self.assertRaises(exception.InvalidInputError, step, phase)
            self.assertIn('run trove-upgrade-manage db expand first',
                          str(error))
        self.assertEqual('f1000000e002', step('expand'))
        self.assertIsNone(step('expand'))
        with self.engine.begin() as connection:
            # The previous release writes the old column only.
            connection.execute(sa.text(
                "INSERT INTO phase_test (id, old_value) VALUES (1, 'kept')"))
        error = self.assertRaises(exception.InvalidInputError, step,
                                  'contract')
        self.assertIn('run trove-upgrade-manage db migrate first',
                      str(error))
        # This release's services refuse the schema until it is
        # migrated, then serve on it before its contraction.
        self.useFixture(fixtures.MockPatchObject(
            migration, 'script_directory', return_value=scripts))
        self.assertEqual(migration.OLDER, migration.compare_with_head(
            migration.version(self.engine)))
        self.assertEqual('f1000000a003', step('migrate'))
        self.assertEqual(migration.CURRENT, migration.compare_with_head(
            migration.version(self.engine)))
        with self.engine.connect() as connection:
            self.assertEqual('kept', connection.execute(sa.text(
                'SELECT new_value FROM phase_test')).scalar())
        self.assertEqual([('f1000000c004', 'contract')],
                         migration.pending(migration.version(self.engine),
                                           scripts))
        self.assertEqual('f1000000c004', step('contract'))
        columns = {c['name'] for c in sa.inspect(self.engine).get_columns(
            'phase_test')}
        self.assertEqual({'id', 'new_value'}, columns)
        self.assertEqual([], migration.pending('f1000000c004', scripts))


class TestPhasesMySQL(_PhaseTests, base.TestCase):
    FIXTURE = database.MySQLOpportunisticFixture


class TestPhasesPostgreSQL(_PhaseTests, base.TestCase):
    FIXTURE = database.PostgresqlOpportunisticFixture
