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

"""``openstack database upgrade create --wait`` following a real upgrade.

The agent tests' harness runs RabbitMQ on an exchange of the test's own, a
real conductor and a real agent on a provisioned guest; this test adds the
real ``trove-upgrade-api`` process (``auth_strategy = noauth2``, the way
the demo runs it) and drives it with the real ``openstack`` command, which
must print every stage on stderr as the agent reports it and exit with the
outcome.
"""

import json
import os
import subprocess

import fixtures
import kombu

from tools.testbed import conffile
from trove_upgrade.common import states
from trove_upgrade.tests.functional.agent import harness
from trove_upgrade.tests.functional import servers

TIMEOUT = 300
# The harness's broker, as kombu names it.
AMQP_URL = 'amqp://guest:guest@127.0.0.1:5672//'


class TestWaitWithARealAgent(harness.AgentTestCase):

    packages = {'1.0.0': 'ok', '2.0.0': 'ok', '3.0.0': 'crash'}

    def setUp(self):
        super().setUp()
        self.addCleanup(self._delete_exchange)
        port = servers.free_port()
        path = os.path.join(self.tmp, 'api.conf')
        conffile.write_conf(path, {
            'DEFAULT': {'transport_url': harness.RABBIT_URL,
                        'control_exchange': self.exchange,
                        'state_path': self.tmp},
            'api': {'bind_host': servers.LOOPBACK, 'bind_port': port,
                    'auth_strategy': 'noauth2'},
            'database': {'connection': self.db.url},
        })
        api = self._spawn('api', [os.path.join(harness.BIN,
                                               'trove-upgrade-api'),
                                  '--config-file', path])
        servers.wait_for_port(port, process=api)
        self.url = 'http://%s:%d/v1.0/admin' % (servers.LOOPBACK, port)
        self.home = self.useFixture(fixtures.TempDir()).path
        self.start_agent()
        self.wait_for_guest('1.0.0')

    def _delete_exchange(self):
        with kombu.Connection(AMQP_URL) as connection:
            connection.default_channel.exchange_delete(self.exchange)

    def create_and_wait(self, version):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith('OS_')}
        env['HOME'] = self.home
        argv = [os.path.join(harness.BIN, 'openstack'),
                '--os-auth-type', 'none', '--os-guest-upgrade-url', self.url,
                'database', 'upgrade', 'create', self.instance_id,
                '--instance-version', version, '--strategy', 'local',
                '--location',
                os.path.join(self.repo, 'guest-%s.pkg' % version),
                '--wait', '-f', 'json']
        try:
            proc = subprocess.run(argv, capture_output=True, text=True,
                                  env=env, timeout=TIMEOUT)
        except subprocess.TimeoutExpired as exc:
            self.fail('no final state after %s s; the command printed:\n%s'
                      '\nagent log:\n%s\nconductor log:\n%s' % (
                          TIMEOUT, exc.stderr, self._log('agent'),
                          self._log('conductor')))
        return proc.returncode, proc.stdout, proc.stderr

    def assertProgress(self, upgrade, err):
        """One line per recorded event, in order, as the history has it."""
        lines = err.splitlines()
        self.assertEqual('Waiting for upgrade %s of instance %s to %s'
                         % (upgrade['id'], self.instance_id,
                            upgrade['instance_version']), lines[0])
        shown = [line.split(' ', 1)[1] for line in lines[1:]
                 if line.startswith('20')]
        recorded = ['%s -> %s (%s)%s' % (
            e['from_state'] or '-', e['to_state'], e['source'],
            ': %s' % e['detail'] if e['detail'] else '')
            for e in upgrade['events']]
        self.assertEqual(recorded, shown)

    def test_success_shows_each_stage_and_exits_zero(self):
        code, out, err = self.create_and_wait('2.0.0')

        self.assertEqual(0, code, err)
        upgrade = json.loads(out)
        self.assertEqual(states.SUCCESS, upgrade['status'])
        self.assertEqual('1.0.0', upgrade['from_version'])
        # Under load the conductor may drop a stage the agent reported as
        # stale when a later one was recorded first; what was recorded is
        # what is shown.
        self.assertProgress(upgrade, err)
        self.assertIn(' -> SUCCESS (agent): ', err)
        self.assertEqual('2.0.0', self.running_guest_version())

    def test_a_rolled_back_upgrade_exits_non_zero_with_the_reason(self):
        code, out, err = self.create_and_wait('3.0.0')

        self.assertEqual(1, code, err)
        upgrade = json.loads(out)
        self.assertIn(upgrade['status'], (states.FAILED, states.ROLLED_BACK))
        self.assertIn('failed 2 start attempt(s)', upgrade['status_detail'])
        self.assertProgress(upgrade, err[:err.rindex('\nUpgrade ')])
        self.assertEqual('Upgrade %s ended %s: %s' % (
            upgrade['id'], upgrade['status'], upgrade['status_detail']),
            err.splitlines()[-1])
        self.assertEqual('1.0.0', self.running_guest_version())
