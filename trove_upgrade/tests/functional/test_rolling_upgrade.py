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

"""A rolling upgrade of trove-upgrade itself, as OpenStack's grenade does.

A deployment of the previous release (``tools/previous_release.ini``): its
schema made by its own ``db sync`` on PostgreSQL, its API, conductor and
agent, over real RabbitMQ with every message sealed. Then the documented
order (``doc/source/admin/upgrading.rst``): today's ``db expand`` while
the previous API and conductor serve, today's conductor, today's API, the
agent, ``db contract``. An upgrade of the guest agent is requested at
every stage, one of them across the expansion and one across the
conductor's replacement, and each ends SUCCESS with every report the agent
made recorded.
"""

import hashlib
import os
import subprocess

import fixtures
import requests

from tools.testbed import conffile
from trove_upgrade.common import states
from trove_upgrade.db import migration
from trove_upgrade.services import agent_rpcapi
from trove_upgrade.tests.fixtures import database
from trove_upgrade.tests.functional.agent import harness
from trove_upgrade.tests.functional import previous_release
from trove_upgrade.tests.functional import servers

PROJECT = 'rolling-project'
HEADERS = {'X-User-Id': 'operator', 'X-Project-Id': PROJECT,
           'X-Roles': 'admin'}
LISTENING = 'trove-upgrade-api serving on http://127.0.0.1:'

# What an agent reports of a successful upgrade, in order: the history of
# an upgrade none of whose reports was lost.
REPORTED = [states.DOWNLOADING, states.VERIFYING, states.INSTALLING,
            states.RESTARTING, states.SUCCESS]


class PreviousReleaseDatabase(database.PostgresqlDatabase):
    """An empty PostgreSQL database that the previous release syncs."""

    revision = None

    def __init__(self, env):
        super().__init__()
        self.env = env

    def _setUp(self):
        super()._setUp()
        directory = self.useFixture(fixtures.TempDir()).path
        config = os.path.join(directory, 'manage.conf')
        conffile.write_conf(config, {
            'DEFAULT': {'state_path': directory},
            'database': {'connection': self.url}})
        subprocess.run([os.path.join(harness.BIN, 'trove-upgrade-manage'),
                        '--config-file', config, 'db', 'sync'],
                       env=dict(os.environ, **self.env), check=True,
                       capture_output=True, timeout=120)


class TestRollingUpgrade(harness.AgentTestCase):

    packages = {'2.0.0': 'ok', '3.0.0': 'ok', '4.0.0': 'ok', '5.0.0': 'ok'}

    def previous(self):
        if not hasattr(self, '_previous'):
            self._previous = self.useFixture(
                previous_release.PreviousRelease())
        return self._previous

    def database_fixture(self):
        return PreviousReleaseDatabase(self.previous().env)

    def conductor_env(self):
        # The previous release's until replace_conductor() says otherwise.
        return getattr(self, 'release_env', self.previous().env)

    def conductor_conf(self):
        conf = super().conductor_conf()
        conf['upgrade_levels'] = {'agent': 'auto'}
        return conf

    # The steps.

    def manage(self, *args, env=None):
        path = os.path.join(self.tmp, 'manage.conf')
        conffile.write_conf(path, {
            'DEFAULT': {'state_path': self.tmp},
            'database': {'connection': self.db.url}})
        return subprocess.run(
            [os.path.join(harness.BIN, 'trove-upgrade-manage'),
             '--config-file', path, 'db'] + list(args),
            env=dict(os.environ, **(env or {})), capture_output=True,
            text=True, timeout=120, check=False)

    def start_api(self, env=None):
        path = os.path.join(self.tmp, 'api.conf')
        conffile.write_conf(path, {
            'DEFAULT': {'transport_url': self.rabbit_url,
                        'control_exchange': self.exchange,
                        'state_path': self.tmp},
            'database': {'connection': self.db.url},
            'api': {'auth_strategy': 'noauth2', 'bind_host': '127.0.0.1',
                    'bind_port': servers.free_port()},
            'conductor': {'topic': self.conductor_topic,
                          'require_sealed': True},
            'upgrade_levels': {'agent': 'auto'},
        })
        # The log of the API it replaces comes first in the same file.
        start = self._log_size('api')
        self._spawn('api', [os.path.join(harness.BIN, 'trove-upgrade-api'),
                            '--config-file', path], env=env)
        line = self.wait_for(lambda: self._listening(start),
                             'the API to listen')
        self.mgmt = 'http://127.0.0.1:%s/v1.0/%s/mgmt' % (line, PROJECT)

    def _log_size(self, name):
        try:
            return os.path.getsize(os.path.join(self.tmp, '%s.log' % name))
        except FileNotFoundError:
            return 0

    def _listening(self, start):
        text = self._log_all('api')[start:]
        at = text.rfind(LISTENING)
        if at < 0:
            return None
        return text[at + len(LISTENING):].split()[0]

    def stop(self, name):
        self._kill(self.processes.pop(name))

    def request_upgrade(self, version, **body):
        resp = requests.post(self.mgmt + '/upgrades', headers=HEADERS,
                             timeout=60, json=dict({
                                 'instance_id': self.instance_id,
                                 'instance_version': version,
                                 'strategy': 'local',
                                 'location': os.path.join(
                                     self.repo, 'guest-%s.pkg' % version)},
                                 **body))
        self.assertEqual(202, resp.status_code, resp.text)
        return resp.json()['upgrade']

    def show_upgrade(self, upgrade_id):
        """The upgrade as the API serving now shows it, with its events.

        Through the API, not the database: today's models cannot read
        the previous release's schema before its expansion.
        """
        resp = requests.get('%s/upgrades/%s' % (self.mgmt, upgrade_id),
                            headers=HEADERS, timeout=60)
        self.assertEqual(200, resp.status_code, resp.text)
        return resp.json()['upgrade']

    def assertSucceeds(self, upgrade):
        """SUCCESS, with every report of the agent recorded in order."""
        done = self.wait_for(
            lambda: (lambda u: u if u['status'] in states.FINAL_STATES
                     else None)(self.show_upgrade(upgrade['id'])),
            'upgrade %s to end' % upgrade['id'])
        self.assertEqual(states.SUCCESS, done['status'], done['events'])
        reported = [s for s in self.history(done) if s in REPORTED]
        self.assertEqual(REPORTED, reported, done['events'])
        self.assertEqual(upgrade['instance_version'],
                         self.running_guest_version())
        return done

    def roll_agents(self):
        """The agents onto today's release.

        The hook for the agent's self-upgrade (issue 38, item 3): until
        the product upgrades its own agent, the agent is restarted on
        today's release, as a rebuilt image would start it. Its install
        root, journal and key carry over.
        """
        self.kill_agent()
        self.start_agent()
        self.wait_for_agent(agent_rpcapi.AgentAPI.RPC_API_VERSION)

    def wait_for_agent(self, rpc_api_version):
        return self.wait_for(
            lambda: (self.registered() or {}).get('rpc_api_version')
            == rpc_api_version,
            'the agent to register with RPC API %s' % rpc_api_version)

    def test_previous_release_to_today_in_the_documented_order(self):
        previous = self.previous().env
        # The previous release's deployment.
        self.assertEqual(previous_release.SCHEMA,
                         migration.version(self.db.engine))
        self.start_api(env=previous)
        self.start_agent(env=previous)
        self.wait_for_agent(previous_release.AGENT_API)
        first = self.request_upgrade('2.0.0')
        # The previous release's API, which shows no expectation.
        self.assertNotIn('expected_manifest', first)
        self.assertSucceeds(first)

        # 1. Expand, with an upgrade in flight through the previous
        # release's API and conductor.
        in_flight = self.request_upgrade('3.0.0')
        expand = self.manage('expand')
        self.assertEqual(0, expand.returncode, expand.stderr)
        self.assertEqual(
            migration.script_directory().get_current_head(),
            migration.version(self.db.engine))
        self.assertSucceeds(in_flight)

        # 2. Today's conductor, replacing the previous one under an
        # upgrade in flight: the agent's reports wait in its outbox.
        in_flight = self.request_upgrade('4.0.0')
        self.stop('conductor')
        self.release_env = {}
        self.start_conductor()
        self.assertSucceeds(in_flight)

        # 3. Today's API.
        self.stop('api')
        self.start_api()
        upgrade = self.request_upgrade('5.0.0')
        self.assertIsNone(upgrade['expected_manifest'])
        self.assertSucceeds(upgrade)

        # 4. The agents; then the binding the previous agent lacked.
        self.roll_agents()
        with open(os.path.join(self.repo, 'guest-2.0.0.pkg.manifest'),
                  'rb') as f:
            expected = {'sha256': hashlib.sha256(f.read()).hexdigest(),
                        'package': None}
        bound = self.request_upgrade('2.0.0', allow_downgrade=True,
                                     expected_manifest=expected)
        self.assertEqual(expected, bound['expected_manifest'])
        self.assertSucceeds(bound)

        # 5. Contract: nothing of the previous release runs any more.
        contract = self.manage('contract')
        self.assertEqual(0, contract.returncode, contract.stderr)
        check = self.manage('check')
        self.assertEqual(0, check.returncode, check.stdout)
        self.assertEqual({}, {name: proc.returncode for name, proc
                              in self.processes.items()
                              if proc.poll() is not None})
