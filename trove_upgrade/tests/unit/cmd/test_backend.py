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

"""oslo.service's threading backend, and no backend where none is needed.

Each import runs in a fresh interpreter, since this test process has
selected the backend already.
"""

import subprocess
import sys

from trove_upgrade.tests import base

_PROBE = '''
import importlib, sys
importlib.import_module(sys.argv[1])
from oslo_service import backend
print(backend.get_backend_type())
'''

# The services, and the commands that load oslo.messaging (and with it
# oslo.service's default backend, eventlet, unless one was selected).
THREADED = ('trove_upgrade.cmd.api', 'trove_upgrade.cmd.conductor',
            'trove_upgrade.cmd.agent', 'trove_upgrade.wsgi',
            'trove_upgrade.cmd.status', 'trove_upgrade.cmd.adopt')
# The commands that need neither.
NO_BACKEND = ('trove_upgrade.cmd.package', 'trove_upgrade.cmd.manage')


def _backend_after_importing(module):
    return subprocess.run([sys.executable, '-c', _PROBE, module],
                          check=True, capture_output=True,
                          text=True).stdout.strip()


class TestBackend(base.TestCase):

    def test_services_and_bus_clients_select_the_threading_backend(self):
        found = {module: _backend_after_importing(module)
                 for module in THREADED}
        self.assertEqual(dict.fromkeys(THREADED, 'BackendType.THREADING'),
                         found)

    def test_package_and_manage_start_no_backend(self):
        found = {module: _backend_after_importing(module)
                 for module in NO_BACKEND}
        self.assertEqual(dict.fromkeys(NO_BACKEND, 'None'), found)
