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

"""Trove's health as a gate, with the real trove-conductor.

The real ``trove-guestagent`` of Trove 25.1.0, adopted under supervisord
as in ``test_upgrade``, heartbeats to the real ``trove-conductor`` of
the same release (its own process and virtualenv, Trove's defaults,
secure RPC on with the key Trove gave the instance), which records each
heartbeat in Trove's database on MariaDB (``trove-manage db_sync``). The
instance is created by Trove's code (``trove_db``); trove-upgrade's
conductor reads that database, the agent never does.

What a guest VM has and this machine does not is made for the guest
agent alone: the marker Trove's prepare leaves in
``/opt/trove-guestagent`` (the guest agent heartbeats only once its
datastore is prepared) is a temporary directory bind-mounted on ``/opt``
in a mount namespace of the guest agent's own, and the datastore's
container is one Docker API answer (``guest.DockerVersionAPI``). The
guest agent heartbeats as Trove's does, about once a minute (its status
task's spacing, looked at every ``report_interval``, here 2 s), so the
test takes minutes: one scenario.

A build of 26.0.0 whose guest agent answers its ping but never
heartbeats to Trove is rolled back, FAILED with the reason; the genuine
26.0.0 ends SUCCESS once Trove recorded its heartbeat.
"""

import datetime
import os
import re
import uuid

from oslo_utils import timeutils
import sqlalchemy as sa

from tools.testbed import conffile
from trove_upgrade.common import states
from trove_upgrade.db import trove as trove_db_api
from trove_upgrade.tests.functional.agent import harness
from trove_upgrade.tests.functional.trove import test_upgrade
from trove_upgrade.tests.functional.trove import trove_db

# The first heartbeat of a guest agent comes a minute after its start.
GATE_TIMEOUT = 100
HEARTBEAT_WAIT = 150
# How often Trove's guest agent looks whether its status task is due.
REPORT_INTERVAL = 2
PREPARE_END = '.guestagent.prepare.end'
# Trove's default of its [DEFAULT] host option.
TROVE_DEFAULT_HOST = '0.0.0.0'


class TestTroveHealthGate(test_upgrade.TroveGuestTestCase):

    builds = {'good': None, 'silent': 'silent'}

    def provision_key(self, instance_id):
        # No key of trove-upgrade's own: the one Trove gave is used.
        return None

    def agent_conf(self, **overrides):
        agent = super().agent_conf(**overrides)
        if agent.get('instance_key_file') is None:
            agent.pop('instance_key_file', None)
        return agent

    def start_conductor(self):
        self.trove = self.useFixture(trove_db.TroveDatabase())
        self.trove.add_instance('db-1', instance_id=self.instance_id)
        # The test's own API calls seal with Trove's key, as the API does.
        self.flags(group='trove', connection=self.trove.url)
        self.addCleanup(trove_db_api.dispose)
        return super().start_conductor()

    def conductor_conf(self):
        conf = super().conductor_conf()
        conf['trove'] = {'connection': self.trove.url,
                         'health_gate_timeout': GATE_TIMEOUT}
        return conf

    def guest_instance_key(self):
        return self.trove.instance_key(self.instance_id)

    def guest_command(self):
        """The guest agent, heartbeating to this test's trove-conductor."""
        self.trove_conductor_queue = 'trove-conductor-test-%s' % (
            uuid.uuid4().hex[:12])
        # trove-conductor's server is named after Trove's [DEFAULT] host.
        self.bus_queues += [self.trove_conductor_queue,
                            '%s.%s' % (self.trove_conductor_queue,
                                       TROVE_DEFAULT_HOST)]
        conffile.write_conf(
            os.path.join(self.layout.conf_dir, 'test-heartbeats.conf'),
            {'DEFAULT': {'conductor_queue': self.trove_conductor_queue,
                         'report_interval': REPORT_INTERVAL}})
        opt = os.path.join(self.tmp, 'guest-opt')
        os.makedirs(os.path.join(opt, 'trove-guestagent'))
        with open(os.path.join(opt, 'trove-guestagent', PREPARE_END), 'w'):
            pass
        return ('unshare --mount --propagation private sh -c "mount --bind '
                '%s /opt && exec %s"' % (opt, super().guest_command()))

    def provision(self, version):
        super().provision(version)
        path = os.path.join(self.tmp, 'trove.conf')
        conffile.write_conf(path, {
            'DEFAULT': {'transport_url': harness.RABBIT_URL,
                        'control_exchange': self.trove_exchange,
                        'conductor_queue': self.trove_conductor_queue,
                        'trove_conductor_workers': 1,
                        'debug': True},
            'database': {'connection': self.trove.url}})
        self._spawn('trove-conductor', [
            os.path.join(self.trove.venv, 'bin', 'trove-conductor'),
            '--config-file', path])

    def trove_status(self):
        with self.trove.engine.connect() as connection:
            row = connection.execute(sa.text(
                'SELECT status_description, updated_at FROM '
                'service_statuses WHERE instance_id = :id'),
                {'id': self.instance_id}).first()
        return row.status_description, row.updated_at

    def wait_for_trove_heartbeat(self):
        """Trove's record of a heartbeat later than now; its time."""
        start = timeutils.utcnow()

        def fresh():
            status, updated_at = self.trove_status()
            return (updated_at if status == 'healthy' and updated_at
                    and updated_at > start else None)

        return self.wait_for(fresh, 'trove-conductor to record a healthy '
                             'heartbeat\n%s' % self._log('trove-conductor'),
                             HEARTBEAT_WAIT)

    def test_silent_build_rolled_back_genuine_one_passes(self):
        self.wait_for_pong()
        done = self.adopt()
        self.assertEqual(0, done.returncode, done.stdout)
        self.start_agent()
        self.wait_for(lambda: self._agent_registered(),
                      'the agent to register with guest version %s'
                      % test_upgrade.FROM)
        # The image's guest agent heartbeats: Trove records it healthy.
        self.wait_for_trove_heartbeat()

        # 26.0.0 that answers its ping but never heartbeats to Trove:
        # the ping alone would pass it; Trove's record does not.
        failed = self.upgrade('silent')
        self.assertEqual(states.FAILED, failed['status'], failed['events'])
        detail = failed['events'][-1]['detail']
        self.assertIn('Trove\'s health gate did not pass within %ds'
                      % GATE_TIMEOUT, detail)
        self.assertIn('Trove recorded no heartbeat of the restarted guest '
                      'agent: its last one (status healthy)', detail)
        self.assertTrue(detail.endswith(
            'rolled back to %s, which is running' % test_upgrade.FROM),
            detail)
        self.assertEqual(test_upgrade.FROM, self.current_version())
        self.wait_for_pong()

        # The genuine 26.0.0: SUCCESS, on a heartbeat Trove recorded
        # after the agent's marker, taken once the new guest agent ran.
        done = self.upgrade('good')
        self.assertEqual(states.SUCCESS, done['status'], done['events'])
        self.assertEqual(test_upgrade.TO, self.current_version())
        detail = done['events'][-1]['detail']
        recorded = re.search(r'Trove recorded status healthy at (\S+) '
                             r'\(before the upgrade: healthy\)', detail)
        self.assertIsNotNone(recorded, detail)
        marker = re.findall(r'waiting up to \d+s for Trove to record a '
                            r'heartbeat after (\S+)', self._log_all('agent'))
        self.assertEqual(2, len(marker), marker)
        self.assertGreater(
            datetime.datetime.fromisoformat(recorded.group(1)),
            datetime.datetime.fromisoformat(marker[-1]))
        self.assertIsNone(self.pinger.ping())
