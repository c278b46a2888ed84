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

from trove_upgrade.common import context
from trove_upgrade.common import exception
from trove_upgrade.db import packages as db_packages
from trove_upgrade.tests import base
from trove_upgrade.tests.fixtures import database
from trove_upgrade.tests.fixtures import packages


class TestPackageWrites(base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(database.Database())
        self.ctx = context.get_admin_context()
        self.package = packages.create(self.ctx)

    def test_a_state_change_waits_for_another_writer(self):
        changed = database.while_another_writes(
            self, lambda: db_packages.update_package_state(
                self.ctx, self.package['id'], 'retired'))
        self.assertEqual('retired', changed['state'])
        self.assertEqual('retired', db_packages.get_package(
            self.ctx, self.package['id'])['state'])

    def test_a_delete_waits_for_another_writer(self):
        database.while_another_writes(self, lambda: db_packages.delete_package(
            self.ctx, self.package['id']))
        self.assertRaises(
            exception.PackageNotFoundError, db_packages.get_package,
            self.ctx, self.package['id'])

    def test_a_missing_package_is_not_found(self):
        self.assertRaises(exception.PackageNotFoundError,
                          db_packages.update_package_state, self.ctx,
                          'missing', 'retired')
        self.assertRaises(exception.PackageNotFoundError,
                          db_packages.delete_package, self.ctx, 'missing')
