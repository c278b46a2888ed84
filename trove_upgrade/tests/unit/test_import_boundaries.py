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

"""Guests and the CLI never load the control plane's database code.

Each import runs in a fresh interpreter, since this test process has
imported everything already.
"""

import json
import subprocess
import sys

from trove_upgrade.tests import base

# Top-level packages (and their submodules) a guest or a CLI must not load.
_SERVER_ONLY = ('trove_upgrade.db', 'sqlalchemy', 'oslo_db', 'alembic')

_PROBE = '''
import importlib, json, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
print(json.dumps(sorted(sys.modules)))
'''


def _loaded(*modules):
    """Every module loaded by importing ``modules`` in a new interpreter."""
    out = subprocess.run([sys.executable, '-c', _PROBE, *modules],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def _server_only(loaded):
    return sorted(name for name in loaded
                  if any(name == top or name.startswith(top + '.')
                         for top in _SERVER_ONLY))


class TestImportBoundaries(base.TestCase):

    def assertNoServerCode(self, *modules):
        found = _server_only(_loaded(*modules))
        self.assertEqual([], found, 'importing %s loads %s' % (
            ', '.join(modules), ', '.join(found[:10])))

    def test_agent_service_loads_no_database_code(self):
        # cmd.agent first: it picks oslo.service's backend, as the
        # console script does.
        self.assertNoServerCode('trove_upgrade.cmd.agent',
                                'trove_upgrade.agent.service')

    def test_cli_plugin_loads_no_database_code(self):
        self.assertNoServerCode('trove_upgrade.osc.plugin',
                                'trove_upgrade.osc.v1.upgrades',
                                'trove_upgrade.osc.v1.agents',
                                'trove_upgrade.osc.v1.rollouts')

    def test_untrusted_child_loads_no_control_plane_or_bus_code(self):
        # What the child imports (its main's imports included): it reads
        # untrusted bytes, so it loads no database, RPC or messaging code.
        loaded = _loaded('trove_upgrade.agent.untrusted',
                         'trove_upgrade.agent.strategies',
                         'trove_upgrade.agent.verifier', 'trove_upgrade.conf',
                         'trove_upgrade.version')
        self.assertEqual([], _server_only(loaded))
        self.assertEqual([], sorted(
            name for name in loaded
            if name.split('.')[0] == 'oslo_messaging'
            or name in ('trove_upgrade.common.rpc',
                        'trove_upgrade.common.rpc_interface',
                        'trove_upgrade.agent.journal')))

    def test_probe_sees_the_control_planes_client_load_the_database(self):
        # The agent's RPC client reads the database: were the probe blind
        # to it, the tests above would pass whatever the agent imports.
        found = _server_only(_loaded('trove_upgrade.services.agent_rpcapi'))
        self.assertIn('trove_upgrade.db', found)
        self.assertIn('sqlalchemy', found)
