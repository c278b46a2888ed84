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

"""What the database API tests share: a fresh database, a hand-moved clock."""

import datetime

import fixtures
from oslo_utils import timeutils

from trove_upgrade.common import context
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.tests import base
from trove_upgrade.tests.fixtures import database


T0 = datetime.datetime(2026, 1, 2, 3, 4, 5, 123456)
INSTANCE = '6f1c1a53-9d63-4c43-a0a1-6b1ad1f3c001'
OTHER_INSTANCE = '6f1c1a53-9d63-4c43-a0a1-6b1ad1f3c002'


class DbTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(database.Database())
        # The db API's clock, moved by hand.
        self.now = T0
        self.useFixture(fixtures.MockPatchObject(
            timeutils, 'utcnow', side_effect=lambda: self.now))
        self.context = context.RequestContext(
            project_id='admin-project', user_id='admin-user',
            request_id='req-6f1c1a53-9d63-4c43-a0a1-6b1ad1f3c0ff')

    def _values(self, **kw):
        values = {'instance_id': INSTANCE, 'instance_version': '2.0.0',
                  'strategy': 'swift', 'location': 'agents/2.0.0.tar'}
        values.update(kw)
        return values

    def _create(self, **kw):
        return db_upgrades.create_upgrade(self.context, self._values(**kw))

    def _advance(self, seconds=1):
        self.now += datetime.timedelta(seconds=seconds)
