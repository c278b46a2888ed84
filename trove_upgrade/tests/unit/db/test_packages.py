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

"""Package rows on a real SQLite file, with a second writer at work."""

import threading

from trove_upgrade import context
from trove_upgrade.db import common as db_common
from trove_upgrade.db import packages as db_packages
from trove_upgrade import exception
from trove_upgrade.tests import base
from trove_upgrade.tests.fixtures import database
from trove_upgrade.tests.fixtures import packages


class TestPackageWrites(base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(database.Database())
        self.ctx = context.get_admin_context()
        self.package = packages.create(self.ctx)

    def _while_another_writes(self, call):
        """``call()`` while another connection holds SQLite's write lock.

        The other transaction commits once ``call`` has begun: a change
        that read before it wrote was refused then ("database is
        locked", a 503 of the API in a CI run), one that writes first
        waits for the lock.
        """
        locked, started = threading.Event(), threading.Event()

        def other_writer():
            with db_common.get_engine().begin() as connection:
                connection.exec_driver_sql(
                    "UPDATE packages SET updated_at = updated_at")
                locked.set()
                started.wait(10)
        thread = threading.Thread(target=other_writer)
        thread.start()
        self.addCleanup(thread.join)
        locked.wait(10)

        # The other commits a moment after this call began: while it waits
        # for the lock, or right after its first read.
        timer = threading.Timer(0.2, started.set)
        timer.start()
        self.addCleanup(timer.cancel)
        return call()

    def test_a_state_change_waits_for_another_writer(self):
        changed = self._while_another_writes(
            lambda: db_packages.update_package_state(
                self.ctx, self.package['id'], 'retired'))
        self.assertEqual('retired', changed['state'])
        self.assertEqual('retired', db_packages.get_package(
            self.ctx, self.package['id'])['state'])

    def test_a_delete_waits_for_another_writer(self):
        self._while_another_writes(lambda: db_packages.delete_package(
            self.ctx, self.package['id']))
        self.assertRaises(exception.PackageNotFound, db_packages.get_package,
                          self.ctx, self.package['id'])

    def test_a_missing_package_is_not_found(self):
        self.assertRaises(exception.PackageNotFound,
                          db_packages.update_package_state, self.ctx,
                          'missing', 'retired')
        self.assertRaises(exception.PackageNotFound,
                          db_packages.delete_package, self.ctx, 'missing')
