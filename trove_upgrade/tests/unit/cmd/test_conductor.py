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

"""trove-upgrade-conductor's main: what it does before the launcher forks."""

from unittest import mock

import fixtures

from trove_upgrade.cmd import conductor
from trove_upgrade.common import exception
from trove_upgrade.db import migration
from trove_upgrade.tests import base


class TestMain(base.TestCase):

    def setUp(self):
        super().setUp()
        for name in ('rpc.init_notifier', 'db_common.check_connection_url',
                     'migration.check_schema_at_start', 'logging.setup'):
            self.useFixture(fixtures.MockPatch(
                'trove_upgrade.cmd.conductor.' + name))
        self.steps = mock.Mock()
        self.steps.launch.return_value.wait.return_value = 0
        self.useFixture(fixtures.MockPatch(
            'trove_upgrade.cmd.conductor.gc.freeze', self.steps.freeze))
        self.useFixture(fixtures.MockPatch(
            'trove_upgrade.cmd.conductor.service.launch', self.steps.launch))

    def test_what_is_loaded_is_frozen_before_the_service_forks(self):
        self.assertEqual(0, conductor.main([]))
        self.assertEqual(['freeze', 'launch'],
                         [name for name, _args, _kwargs
                          in self.steps.mock_calls if '.' not in name])

    def test_nothing_is_frozen_when_the_service_cannot_start(self):
        migration.check_schema_at_start.side_effect = (
            exception.InvalidInputError(reason='the schema is behind'))
        self.assertEqual(2, conductor.main([]))
        self.steps.freeze.assert_not_called()
        self.steps.launch.assert_not_called()
