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

"""Load strategies from drop-in files written into a temporary directory."""

import fixtures

from trove_upgrade.agent import strategies
from trove_upgrade.tests import base
from trove_upgrade.tests.functional import servers


class StrategyTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.config_dir = self.useFixture(fixtures.TempDir()).path
        self.flags(group='agent', strategy_config_dir=self.config_dir,
                   download_retry_delay=0)

    def load(self, name, **settings):
        if settings:
            servers.write_strategy_conf(self.config_dir, name, settings)
        return strategies.load(name, self.conf)
