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

"""Strategy names come from the plugin namespace, not from a list."""

import os
import sys

import fixtures

from trove_upgrade import strategy_plugins
from trove_upgrade.tests import base

PLUGIN_MODULE = 'tu_test_copy_strategy'


def write_plugin(directory, name='copy'):
    """A distribution registering strategy ``name``, as pip would leave it.

    Its module raises on import: naming the strategy must not load it.
    """
    with open(os.path.join(directory, PLUGIN_MODULE + '.py'), 'w') as f:
        f.write('raise ImportError("a strategy plugin was imported")\n')
    dist_info = os.path.join(directory, 'tu_test_copy_strategy-1.0.dist-info')
    os.makedirs(dist_info)
    with open(os.path.join(dist_info, 'METADATA'), 'w') as f:
        f.write('Metadata-Version: 2.1\nName: tu-test-copy-strategy\n'
                'Version: 1.0\n')
    with open(os.path.join(dist_info, 'entry_points.txt'), 'w') as f:
        f.write('[%s]\n%s = %s:Strategy\n'
                % (strategy_plugins.NAMESPACE, name, PLUGIN_MODULE))


class TestStrategyPlugins(base.TestCase):

    def test_built_in_strategies_are_installed(self):
        self.assertEqual(['http', 'local', 'rsync', 'swift'],
                         strategy_plugins.built_in())
        self.assertEqual(strategy_plugins.built_in(),
                         strategy_plugins.installed())

    def test_a_plugin_of_another_package_is_named_not_imported(self):
        directory = self.useFixture(fixtures.TempDir()).path
        write_plugin(directory)
        self.useFixture(fixtures.MonkeyPatch(
            'sys.path', [directory] + sys.path))
        self.assertEqual(['copy', 'http', 'local', 'rsync', 'swift'],
                         strategy_plugins.installed())
        # Only trove-upgrade's own are its defaults.
        self.assertNotIn('copy', strategy_plugins.built_in())
        self.assertNotIn(PLUGIN_MODULE, sys.modules)
        self.assertIn('copy', strategy_plugins.listing())

    def test_cli_help_names_the_namespace_and_the_installed(self):
        help_text = strategy_plugins.HELP % strategy_plugins.listing()
        self.assertIn(strategy_plugins.NAMESPACE, help_text)
        self.assertIn('http, local, rsync, swift', help_text)
