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

import datetime

import fixtures
import sqlalchemy as sa
from sqlalchemy.dialects import mysql
from sqlalchemy.dialects import postgresql

from trove_upgrade.db import driver_sql
from trove_upgrade.tests import base

_METADATA = sa.MetaData()
_TABLE = sa.Table('t', _METADATA,
                  sa.Column('id', sa.Integer, primary_key=True),
                  sa.Column('name', sa.String(16)),
                  sa.Column('at', sa.DateTime))
_AT = datetime.datetime(2026, 3, 4, 5, 6, 7, 654321)


def _update():
    return driver_sql.DriverStatement(
        sa.update(_TABLE).where(_TABLE.c.id == sa.bindparam('b_id'))
        .values(name=sa.bindparam('b_name', type_=sa.String),
                at=sa.bindparam('b_at', type_=sa.DateTime)))


class TestDriverStatement(base.TestCase):

    def setUp(self):
        super().setUp()
        self.engine = sa.create_engine('sqlite://')
        self.addCleanup(self.engine.dispose)
        _METADATA.create_all(self.engine)
        with self.engine.begin() as connection:
            connection.execute(sa.insert(_TABLE), [{'id': 1}, {'id': 2}])

    def _rows(self):
        with self.engine.connect() as connection:
            return connection.execute(
                sa.select(_TABLE).order_by(_TABLE.c.id)).all()

    def test_values_go_through_their_types(self):
        # SQLite stores a datetime as the text its type's processor makes.
        with self.engine.begin() as connection:
            result = _update().execute(
                connection, {'b_id': 1, 'b_name': 'a', 'b_at': _AT})
        self.assertEqual(1, result.rowcount)
        self.assertEqual([(1, 'a', _AT), (2, None, None)], self._rows())

    def test_several_rows_in_one_execution(self):
        with self.engine.begin() as connection:
            _update().execute(connection, [
                {'b_id': 1, 'b_name': 'a', 'b_at': _AT},
                {'b_id': 2, 'b_name': 'b', 'b_at': None}])
        self.assertEqual([(1, 'a', _AT), (2, 'b', None)], self._rows())

    def test_compiled_once_per_dialect(self):
        statement = _update()
        compile_ = self.useFixture(fixtures.MockPatchObject(
            statement._statement, 'compile',
            wraps=statement._statement.compile)).mock
        for _ in range(3):
            with self.engine.begin() as connection:
                statement.execute(
                    connection, {'b_id': 1, 'b_name': 'a', 'b_at': _AT})
        self.assertEqual(1, compile_.call_count)

    def test_named_and_positional_paramstyles(self):
        statement = _update()
        text, names, _ = statement._for(postgresql.psycopg2.dialect())
        self.assertIn('name=%(b_name)s', text)
        self.assertEqual({'b_id', 'b_name', 'b_at'}, set(names))
        text, names, _ = statement._for(mysql.pymysql.dialect())
        self.assertEqual('UPDATE t SET name=%s, at=%s WHERE t.id = %s',
                         text)
        self.assertEqual(('b_name', 'b_at', 'b_id'), names)

    def test_a_statement_that_needs_core_is_refused(self):
        statement = driver_sql.DriverStatement(
            sa.delete(_TABLE).where(
                _TABLE.c.id.in_(sa.bindparam('b_ids', expanding=True))))
        with self.engine.begin() as connection:
            self.assertRaises(ValueError, statement.execute, connection,
                              {'b_ids': [1]})
