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

"""Verifying pays for no import it does not use.

``trove-upgrade-package verify`` and the agent's child for the untrusted
verify step run the real code, each in a fresh interpreter, and list what
they loaded: none of the services' stack (eventlet, oslo.service,
oslo.messaging, a database), nor the code that builds packages or fetches
them.
"""

import datetime
import json
import os
import subprocess
import sys

import fixtures

from trove_upgrade.agent import untrusted
from trove_upgrade.package_format import keys
from trove_upgrade.tests.unit.package_format import base

# Top-level names, and trove-upgrade modules, verifying never needs.
SERVICE_STACK = ('eventlet', 'futurist', 'oslo_service', 'oslo_messaging',
                 'sqlalchemy', 'oslo_db', 'kombu')
BUILDING = ('trove_upgrade.package_format.build',
            'trove_upgrade.package_format.wheels',
            # Key files hold raw keys: no PEM, DER or SSH support.
            'cryptography.hazmat.primitives.serialization')
# (stevedore is no sign of fetching: oslo.config loads it.)
FETCHING = ('requests', 'swiftclient', 'urllib3',
            'trove_upgrade.agent.strategies.http',
            'trove_upgrade.agent.strategies.swift',
            'trove_upgrade.agent.strategies.rsync')

_COMMAND = '''
import json, sys
from trove_upgrade.cmd import package
code = package.main(sys.argv[2:])
with open(sys.argv[1], 'w') as out:
    json.dump({'code': code, 'modules': sorted(sys.modules)}, out)
'''

# The real child's module, run as ``python -m`` runs it, listing at exit
# what it loaded.
_CHILD = '''
import atexit, json, runpy, sys
def listed():
    with open(%r, 'w') as out:
        json.dump(sorted(sys.modules), out)
atexit.register(listed)
runpy.run_module('trove_upgrade.agent.untrusted', run_name='__main__',
                 alter_sys=True)
'''


def _needless(modules, *names):
    return sorted(m for m in modules
                  if any(m == n or m.startswith(n + '.') for n in names))


def _loaded_by_package_init():
    # trove_upgrade.cmd's own __init__ selected oslo.service's backend for
    # every console script; another change makes the services alone do it.
    # Until both are in, what that __init__ loads is not this test's.
    out = subprocess.run(
        [sys.executable, '-c', 'import json, sys, trove_upgrade.cmd; '
         'print(json.dumps(sorted(sys.modules)))'],
        check=True, capture_output=True, text=True).stdout
    return set(json.loads(out))


class TestStartUp(base.PackagingTestCase):

    def test_verify_command_loads_what_it_checks_only(self):
        now = datetime.datetime.now(datetime.timezone.utc)
        package, _ = self.build(created=now - datetime.timedelta(hours=1),
                                expires=now + datetime.timedelta(days=1))
        _, public = keys.write_signing_key(
            os.path.join(self.tmp, 'signing'), self.signing_key)
        secret = keys.write_encryption_key(
            os.path.join(self.tmp, 'secret'), self.encryption_key)
        listing = os.path.join(self.tmp, 'loaded.json')
        subprocess.run(
            [sys.executable, '-c', _COMMAND, listing, 'verify', package,
             '--trusted-key', public, '--encryption-key', secret],
            check=True, capture_output=True, timeout=120)
        with open(listing) as f:
            result = json.load(f)
        self.assertEqual(0, result['code'])
        loaded = set(result['modules']) - _loaded_by_package_init()
        self.assertEqual([], _needless(loaded, *SERVICE_STACK + BUILDING))

    def test_verify_step_child_loads_no_fetching_or_service_code(self):
        work = self.useFixture(fixtures.TempDir()).path
        listing = os.path.join(self.tmp, 'loaded.json')
        argv = [sys.executable, '-c', _CHILD % listing]
        real_popen = subprocess.Popen
        self.useFixture(fixtures.MockPatch(
            'trove_upgrade.agent.untrusted.subprocess.Popen',
            lambda args, **kwargs: real_popen(argv, **kwargs)))
        steps = untrusted.ChildProcessSteps(self.conf)
        # No trusted key, no package: the step refuses, once the child
        # loaded what it loads to verify.
        self.assertRaises(
            untrusted.StepError, steps._run, untrusted.VERIFY,
            {'id': 'u1', 'strategy': 'local', 'location': '/nowhere',
             'to_version': '2.0.0', 'from_version': '1.0.0'}, work, 120)
        with open(listing) as f:
            loaded = json.load(f)
        self.assertIn('trove_upgrade.package_format.verify', loaded)
        self.assertEqual([], _needless(loaded, *SERVICE_STACK + FETCHING))
