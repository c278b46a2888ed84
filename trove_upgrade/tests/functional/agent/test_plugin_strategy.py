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

"""A strategy plugin of another package works end to end.

The plugin is a real distribution: a module and a dist-info directory with
its entry point, as pip leaves them, in a directory on the path of the API
schema's process and of the real agent process, never of this one.
"""

import json
import os
import subprocess
import sys
import textwrap

import fixtures

from trove_upgrade.common import states
from trove_upgrade import strategy_plugins
from trove_upgrade.tests.functional.agent import harness
from trove_upgrade.tests.functional import servers

PLUGIN = textwrap.dedent('''
    """A third party's strategy: copies from a directory, like local."""

    from oslo_config import cfg

    from trove_upgrade.agent.strategies import local


    class CopyStrategy(local.LocalStrategy):
        name = 'copy'
        opt_group = cfg.OptGroup('copy')
''')

# What the API validates a body with, in a process of its own.
_VALIDATE = textwrap.dedent('''
    import json, sys
    from trove_upgrade.api.schemas import upgrades
    from trove_upgrade.api import util
    body = json.loads(sys.argv[1])
    util.validate(body, upgrades.POST_UPGRADE, 'JSON body')
    print(json.dumps(upgrades.STRATEGIES))
''')


def write_plugin(directory):
    with open(os.path.join(directory, 'tu_copy_strategy.py'), 'w') as f:
        f.write(PLUGIN)
    dist_info = os.path.join(directory, 'tu_copy_strategy-1.0.dist-info')
    os.makedirs(dist_info)
    with open(os.path.join(dist_info, 'METADATA'), 'w') as f:
        f.write('Metadata-Version: 2.1\nName: tu-copy-strategy\n'
                'Version: 1.0\n')
    with open(os.path.join(dist_info, 'entry_points.txt'), 'w') as f:
        f.write('[%s]\ncopy = tu_copy_strategy:CopyStrategy\n'
                % strategy_plugins.NAMESPACE)


class TestPluginStrategy(harness.AgentTestCase):

    def setUp(self):
        super().setUp()
        self.plugins = os.path.join(self.tmp, 'plugins')
        os.makedirs(self.plugins)
        write_plugin(self.plugins)
        servers.write_strategy_conf(self.strategy_dir, 'copy',
                                    {'allowed_dirs': [self.repo]})
        self.body = {'upgrade': {
            'instance_id': self.instance_id, 'instance_version': '2.0.0',
            'strategy': 'copy',
            'location': os.path.join(self.repo, 'guest-2.0.0.pkg')}}

    def validate(self, pythonpath=None):
        env = dict(os.environ)
        if pythonpath:
            env['PYTHONPATH'] = pythonpath
        return subprocess.run(
            [sys.executable, '-c', _VALIDATE, json.dumps(self.body)],
            env=env, capture_output=True, text=True)

    def test_api_accepts_only_an_installed_plugin(self):
        refused = self.validate()
        self.assertNotEqual(0, refused.returncode)
        self.assertIn("'copy' is not one of", refused.stderr)
        accepted = self.validate(self.plugins)
        self.assertEqual(0, accepted.returncode, accepted.stderr)
        self.assertIn('copy', json.loads(accepted.stdout))

    def test_agent_upgrades_with_a_plugin_strategy(self):
        self.useFixture(fixtures.EnvironmentVariable(
            'PYTHONPATH', self.plugins))
        self.start_agent(allowed_strategies=['copy'])
        self.wait_for_guest('1.0.0')
        upgrade = self.create_upgrade('2.0.0', strategy='copy')
        done = self.wait_for_status(upgrade['id'], states.FINAL_STATES)
        self.assertEqual(states.SUCCESS, done['status'], done['events'])
        self.assertEqual('copy', done['strategy'])
        self.assertEqual('2.0.0', self.running_guest_version())
