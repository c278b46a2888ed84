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

"""Desired versions' rows on a real SQLite file, with a second writer."""

from oslo_utils import uuidutils

from trove_upgrade.common import exception
from trove_upgrade.db import desired_versions as db_desired
from trove_upgrade.tests.fixtures import database
from trove_upgrade.tests.unit.db import base as db_base

DESIRED = {
    'name': 'blue', 'package_name': 'guest-agent', 'version': '2.0.0',
    'selector': {'group': 'blue'}, 'canary': 0, 'max_in_flight': 2,
    'max_in_flight_kind': 'count', 'max_failures': 0,
    'max_failures_kind': 'count', 'per_agent_retries': 0,
    'agent_deadline': 60}


class TestDeleteDesiredVersion(db_base.DbTestCase):

    def test_a_delete_waits_for_another_writer(self):
        desired = db_desired.create_desired_version(self.context, DESIRED)
        database.while_another_writes(
            self, lambda: db_desired.delete_desired_version(
                self.context, desired['id']))
        self.assertRaises(exception.DesiredVersionNotFoundError,
                          db_desired.get_desired_version, self.context,
                          desired['id'])
        self.assertEqual(['created', 'deleted'], [
            e['action'] for e in db_desired.list_events(self.context,
                                                        desired['id'])])

    def test_deleting_a_missing_one_is_not_found(self):
        self.assertRaises(exception.DesiredVersionNotFoundError,
                          db_desired.delete_desired_version, self.context,
                          uuidutils.generate_uuid())
