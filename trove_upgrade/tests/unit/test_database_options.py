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

"""trove-upgrade's defaults of oslo.db's options."""

from oslo_messaging import opts as messaging_opts

from trove_upgrade.common import exception
from trove_upgrade import conf
from trove_upgrade.db import common as db_common
from trove_upgrade.tests import base


class TestDatabaseDefaults(base.TestCase):

    def test_pool_keeps_a_connection_for_each_rpc_thread(self):
        threads = next(opt.default
                       for group, opts in messaging_opts.list_opts()
                       for opt in opts
                       if opt.dest == 'executor_thread_pool_size')
        self.assertEqual(threads, conf.CONF.database.max_pool_size)

    def test_connection_is_sqlite_under_state_path(self):
        self.flags(state_path='/var/lib/trove-upgrade')
        self.assertEqual(
            'sqlite:////var/lib/trove-upgrade/trove_upgrade.sqlite',
            conf.CONF.database.connection)


class TestConnectionURL(base.TestCase):
    """A connection no query can use is refused at start, not per query."""

    def test_usable_urls_pass(self):
        for url in ('sqlite://', 'sqlite:////var/lib/t/t.sqlite',
                    'mysql+pymysql://root@127.0.0.1/t',
                    'postgresql+psycopg2://u:p@127.0.0.1/t'):
            db_common.check_connection_url(url)

    def test_not_a_url(self):
        # The last two ended with SQLAlchemy's ValueError: a traceback in
        # trove-upgrade-manage and trove-upgrade-conductor.
        for url in ('user:secret@host/db',
                    'mysql+pymysql://root:secret@[::1/x',
                    'postgresql://u:secret@host:port/x'):
            error = self.assertRaises(exception.InvalidInputError,
                                      db_common.check_connection_url, url)
            self.assertIn('[database] connection is not a database URL',
                          str(error))
            self.assertNotIn('secret', str(error))

    def test_a_dialect_or_driver_not_installed(self):
        for url, missing in (('nosuchdb://h/d', 'nosuchdb'),
                             ('postgresql+nosuch://h/d', 'nosuch'),
                             ('mysql://root@127.0.0.1/t', 'MySQLdb')):
            error = self.assertRaises(exception.InvalidInputError,
                                      db_common.check_connection_url, url)
            self.assertIn('names a database driver that is not installed',
                          str(error))
            self.assertIn(missing, str(error))
