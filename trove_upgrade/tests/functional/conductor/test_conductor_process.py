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

"""A real trove-upgrade-conductor process, driven over the real RabbitMQ.

Each test starts the console script with a configuration file and a
``--config-dir`` of drop-ins, pointing at a SQLite file the test reads too
and at RabbitMQ names no other test uses, then talks to it the way agents
do, through ConductorAPI.
"""

import os
import signal
import subprocess
import sys
import time

import fixtures
from oslo_utils import uuidutils
from testtools import content

from tools.testbed import conffile
from trove_upgrade.common import conductor_rpcapi as rpcapi
from trove_upgrade.common import context
from trove_upgrade.common import exception
from trove_upgrade.common import states
from trove_upgrade.db import agents as db_agents
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.services import upgrades
from trove_upgrade.tests import base
from trove_upgrade.tests.fixtures import database
from trove_upgrade.tests.fixtures import rpc as rpc_fixture
from trove_upgrade.tests.functional import rabbit

CONDUCTOR = os.path.join(os.path.dirname(sys.executable),
                         'trove-upgrade-conductor')
READY = 'listening on topic'


def wait_until(predicate, what, timeout=rpc_fixture.WAIT_TIMEOUT):
    """Poll ``predicate`` until it is true; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError('timed out waiting for %s' % what)
        time.sleep(0.1)


class ConductorProcessTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.database = self.useFixture(
            getattr(self, 'database_fixture', database.Database)())
        self.rabbit = self.useFixture(rabbit.RabbitMQ())
        self.admin = context.get_admin_context()
        self.agent_context = context.RequestContext(request_id='req-agent-1')
        self.instance_id = uuidutils.generate_uuid()

    def start_conductor(self, **conductor_options):
        """Start the console script; return it once it listens."""
        command = self.conductor_command(**conductor_options)
        self.log_path = os.path.join(self.tmp, 'conductor.log')
        with open(self.log_path, 'wb') as log:
            process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True)
        # Cleanups run last first: stop it, then keep its log.
        self.addCleanup(lambda: self.addDetail(
            'conductor-log', content.text_content(self.log())))
        self.addCleanup(self.stop_conductor, process)
        wait_until(lambda: process.poll() is not None or READY in self.log(),
                   'the conductor to listen')
        self.assertIsNone(process.poll(), 'the conductor exited:\n%s'
                          % self.log())
        return process

    def conductor_command(self, **conductor_options):
        """Write the conductor's configuration; return its command line."""
        main_conf = os.path.join(self.tmp, 'trove-upgrade.conf')
        conffile.write_conf(main_conf, dict(
            self.rabbit.options,
            DEFAULT=dict(self.rabbit.options['DEFAULT'],
                         state_path=self.tmp, debug='true')))
        drop_ins = os.path.join(self.tmp, 'trove-upgrade.conf.d')
        os.mkdir(drop_ins)
        conffile.write_conf(os.path.join(drop_ins, '10-database.conf'),
                            {'database': {'connection': self.database.url}})
        conffile.write_conf(
            os.path.join(drop_ins, '20-conductor.conf'),
            {'conductor': dict(conductor_options,
                               topic=self.rabbit.conductor_topic)})
        return [CONDUCTOR, '--config-file', main_conf,
                '--config-dir', drop_ins]

    @staticmethod
    def stop_conductor(process):
        """SIGTERM, as an init system would; SIGKILL its group if stuck.

        The launcher forks the service into a child in the same process
        group, which a SIGKILL of the parent alone would leave behind.
        """
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()

    def log(self):
        with open(self.log_path) as f:
            return f.read()

    def create_upgrade(self):
        return upgrades.create_upgrade(self.admin, {
            'instance_id': self.instance_id, 'instance_version': 'v2.0.0',
            'strategy': 'swift', 'location': 'swift://agents/v2.0.0.tgz'})

    def status(self, upgrade_id):
        return db_upgrades.get_upgrade(self.admin, upgrade_id)['status']

    def history(self, upgrade_id):
        upgrade = db_upgrades.get_upgrade(self.admin, upgrade_id,
                                          with_events=True)
        return [(e['source'], e['from_state'], e['to_state'],
                 e['request_id']) for e in upgrade['events']]


class TestConductorProcess(ConductorProcessTestCase):

    def setUp(self):
        super().setUp()
        self.process = self.start_conductor()
        self.api = rpcapi.ConductorAPI()

    def test_register_and_heartbeat(self):
        labels = {'group': 'blue', 'datastore': 'mysql'}
        self.assertEqual('1.4', self.api.register_agent(
            self.agent_context, self.instance_id, '2026.2.0', '21.0.0',
            '1.0', 'RUNNING', labels, 'guest-1'))
        agent = db_agents.get_agent(self.admin, self.instance_id)
        self.assertEqual(
            ('2026.2.0', '21.0.0', '1.0', 'RUNNING', labels, 'guest-1'),
            (agent['agent_version'], agent['guest_version'],
             agent['rpc_api_version'], agent['state'], agent['labels'],
             agent['host']))
        registered_at = agent['last_heartbeat_at']

        self.api.heartbeat(self.agent_context, self.instance_id, '2026.2.0',
                           '21.0.0', '1.0', 'BACKUP', labels, 'guest-1')
        agent = wait_until(
            lambda: (lambda a: a if a['state'] == 'BACKUP' else None)(
                db_agents.get_agent(self.admin, self.instance_id)),
            'the heartbeat to be recorded')
        self.assertGreaterEqual(agent['last_heartbeat_at'], registered_at)

    def test_bad_registration_is_refused_to_the_agent(self):
        e = self.assertRaises(
            exception.InvalidInputError, self.api.register_agent,
            self.agent_context, 'not-a-uuid', '2026.2.0',
            '21.0.0', '1.0', 'RUNNING', {}, 'guest-1')
        self.assertIn('instance_id must be a UUID', str(e))
        self.assertEqual([], db_agents.list_agents(self.admin))

    def test_upgrade_reported_to_the_end(self):
        upgrade = self.create_upgrade()
        self.assertEqual(
            {'proceed': True, 'status': states.DOWNLOADING, 'reason': None},
            self.api.start_upgrade(self.agent_context, self.instance_id,
                                   upgrade['id'], 'v1.0.0'))
        for state in (states.VERIFYING, states.INSTALLING,
                      states.RESTARTING):
            self.api.report_upgrade_state(
                self.agent_context, self.instance_id, upgrade['id'], state,
                None, 'v1.0.0', 'v2.0.0')
            wait_until(lambda: self.status(upgrade['id']) == state,
                       'the report of %s' % state)
        self.api.report_upgrade_state(
            self.agent_context, self.instance_id, upgrade['id'],
            states.SUCCESS, 'health check passed', 'v1.0.0', 'v2.0.0')
        wait_until(lambda: self.status(upgrade['id']) == states.SUCCESS,
                   'the report of SUCCESS')
        self.assertEqual(
            [('api', None, states.PENDING, self.admin.request_id),
             ('api', states.PENDING, states.SENT, self.admin.request_id),
             # The test's agent has no queue: RabbitMQ returned the cast.
             ('api', states.SENT, states.SENT, self.admin.request_id),
             ('agent', states.SENT, states.DOWNLOADING, 'req-agent-1'),
             ('agent', states.DOWNLOADING, states.VERIFYING, 'req-agent-1'),
             ('agent', states.VERIFYING, states.INSTALLING, 'req-agent-1'),
             ('agent', states.INSTALLING, states.RESTARTING, 'req-agent-1'),
             ('agent', states.RESTARTING, states.SUCCESS, 'req-agent-1')],
            self.history(upgrade['id']))
        recorded = db_upgrades.get_upgrade(self.admin, upgrade['id'])
        self.assertEqual(('v1.0.0', 'health check passed'),
                         (recorded['from_version'],
                          recorded['status_detail']))
        # The claim is over: asking again does not restart anything.
        self.assertEqual(
            {'proceed': False, 'status': states.SUCCESS,
             'reason': 'Upgrade %s is SUCCESS.' % upgrade['id']},
            self.api.start_upgrade(self.agent_context, self.instance_id,
                                   upgrade['id'], 'v1.0.0'))

    def test_deferred_then_claimed(self):
        upgrade = self.create_upgrade()
        self.api.report_upgrade_state(
            self.agent_context, self.instance_id, upgrade['id'],
            states.DEFERRED, 'backup running', None, None)
        wait_until(lambda: self.status(upgrade['id']) == states.DEFERRED,
                   'the report of DEFERRED')
        self.assertTrue(self.api.start_upgrade(
            self.agent_context, self.instance_id, upgrade['id'],
            'v1.0.0')['proceed'])

    def test_cancelled_upgrade_is_not_started(self):
        upgrade = self.create_upgrade()
        upgrades.cancel_upgrade(self.admin, upgrade['id'])
        self.assertEqual(
            {'proceed': False, 'status': states.CANCELLED,
             'reason': 'Upgrade %s is CANCELLED.' % upgrade['id']},
            self.api.start_upgrade(self.agent_context, self.instance_id,
                                   upgrade['id'], 'v1.0.0'))
        self.assertEqual(states.CANCELLED, self.status(upgrade['id']))

    def test_report_from_another_instance_is_ignored(self):
        upgrade = self.create_upgrade()
        before = self.history(upgrade['id'])
        intruder = uuidutils.generate_uuid()
        self.api.report_upgrade_state(
            self.agent_context, intruder, upgrade['id'], states.SUCCESS,
            None, None, None)
        wait_until(lambda: 'belongs to instance %s' % self.instance_id
                   in self.log(), 'the conductor to refuse the report')
        self.assertEqual(before, self.history(upgrade['id']))

    def test_sigterm_stops_it_cleanly(self):
        self.process.send_signal(signal.SIGTERM)
        self.assertEqual(0, self.process.wait(60))
        self.assertIn('stopped', self.log())


class TestTimeOut(ConductorProcessTestCase):

    def test_silent_upgrade_times_out(self):
        self.start_conductor(upgrade_timeout=1, periodic_interval=1)
        upgrade = self.create_upgrade()
        wait_until(lambda: self.status(upgrade['id']) == states.TIMED_OUT,
                   'the conductor to time the upgrade out')
        [(source, from_state, to_state, _request_id)] = (
            self.history(upgrade['id'])[-1:])
        self.assertEqual(('conductor', states.SENT, states.TIMED_OUT),
                         (source, from_state, to_state))
        self.assertIsNotNone(
            db_upgrades.get_upgrade(self.admin, upgrade['id'])['finished_at'])
