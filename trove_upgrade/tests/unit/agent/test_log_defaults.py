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

"""The agent's log file is rotated by size unless its operator says not."""

import os

import fixtures
from oslo_config import cfg
from oslo_log import log

from tools.testbed import conffile
from trove_upgrade.cmd import agent as agent_cmd
from trove_upgrade.tests import base


class TestAgentLogDefaults(base.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        # The configuration only: the test's own logging stays as it is.
        self.setup = self.useFixture(fixtures.MockPatch(
            'trove_upgrade.cmd.agent.logging.setup')).mock

    def parse(self, defaults=None):
        path = os.path.join(self.dir, 'agent.conf')
        conffile.write_conf(path, {'DEFAULT': defaults or {}})
        agent_cmd.parse_config(['--config-file', path])
        self.setup.assert_called_once_with(self.conf, 'trove-upgrade-agent')

    def test_rotated_by_size_by_default(self):
        self.parse()
        self.assertEqual('size', self.conf.log_rotation_type)
        self.assertEqual(10, self.conf.max_logfile_size_mb)
        self.assertEqual(5, self.conf.max_logfile_count)

    def test_a_configuration_file_overrides_them(self):
        self.parse({'log_rotation_type': 'none', 'max_logfile_size_mb': 1,
                    'max_logfile_count': 2})
        self.assertEqual('none', self.conf.log_rotation_type)
        self.assertEqual(1, self.conf.max_logfile_size_mb)
        self.assertEqual(2, self.conf.max_logfile_count)

    def test_the_control_plane_keeps_oslo_logs_defaults(self):
        # The agent's defaults are on its ConfigOpts, not on oslo.log's
        # option objects, which every other service (and the sample
        # config) reads.
        self.parse()
        other = cfg.ConfigOpts()
        log.register_options(other)
        other([], default_config_files=[])
        self.assertEqual('none', other.log_rotation_type)
        self.assertEqual(200, other.max_logfile_size_mb)
        self.assertEqual(30, other.max_logfile_count)
