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

"""The conductor service serves its topic and runs its periodic task."""

import base64
import datetime
import os
import time
from unittest import mock

import fixtures
from oslo_utils import fixture as utils_fixture

from trove_upgrade.common import conductor_rpcapi as rpcapi
from trove_upgrade.common import context
from trove_upgrade.common import states
from trove_upgrade.conductor import service
from trove_upgrade.db import agents as db_agents
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.services import upgrades
from trove_upgrade.tests import base
from trove_upgrade.tests.fixtures import database
from trove_upgrade.tests.fixtures import rpc as rpc_fixture

INSTANCE = '1f2e3d4c-5b6a-4978-8695-a4b3c2d1e0f9'


class TestConductorService(base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(database.Database())
        self.useFixture(rpc_fixture.FakeTransport())
        self.flags(group='conductor', topic='conductor-service-test',
                   periodic_interval=1, upgrade_timeout=60)
        self.context = context.get_admin_context()

    def start(self):
        conductor = service.ConductorService(host='conductor-1')
        conductor.start()
        self.addCleanup(conductor.stop)
        return conductor

    def test_warns_when_instance_keys_are_stored_unencrypted(self):
        log = self.useFixture(fixtures.FakeLogger(name=service.__name__))
        self.start()
        self.assertIn('instance keys are stored unencrypted', log.output)
        master = self.create_tempfiles([('master', base64.b64encode(
            os.urandom(32)).decode())])[0]
        self.flags(group='conductor', instance_key_master_key_file=master)
        log = self.useFixture(fixtures.FakeLogger(name=service.__name__))
        self.start()
        self.assertNotIn('unencrypted', log.output)

    def test_serves_the_conductor_topic(self):
        self.start()
        self.assertEqual('1.4', rpcapi.ConductorAPI().register_agent(
            self.context, INSTANCE, '2026.2.0', '21.0.0', '1.0', 'RUNNING',
            {}, 'guest-1'))
        self.assertEqual('RUNNING',
                         db_agents.get_agent(self.context, INSTANCE)['state'])

    def test_periodic_task_times_out_silent_upgrades(self):
        clock = self.useFixture(utils_fixture.TimeFixture(
            datetime.datetime(2026, 11, 29, 9, 0, 0)))
        upgrade = upgrades.create_upgrade(self.context, {
            'instance_id': INSTANCE, 'instance_version': 'v2',
            'strategy': 'swift', 'location': 'swift://c/o'})
        self.start()
        clock.advance_time_seconds(61)
        deadline = time.monotonic() + rpc_fixture.WAIT_TIMEOUT
        while db_upgrades.get_upgrade(
                self.context, upgrade['id'])['status'] != states.TIMED_OUT:
            self.assertLess(time.monotonic(), deadline,
                            'the periodic task never timed the upgrade out')
            time.sleep(0.1)

    def test_stop_stops_serving(self):
        conductor = self.start()
        conductor.stop()
        self.assertIsNone(conductor.rpcserver)
        self.assertEqual([], conductor.tg.timers)

    def test_reports_go_through_the_writer_thread_until_stopped(self):
        conductor = self.start()
        writer = conductor.manager.reports
        upgrade = upgrades.create_upgrade(self.context, {
            'instance_id': INSTANCE, 'instance_version': 'v2',
            'strategy': 'swift', 'location': 'swift://c/o'})
        api = rpcapi.ConductorAPI()
        api.start_upgrade(self.context, INSTANCE, upgrade['id'], 'v1')
        with mock.patch.object(writer, '_write',
                               wraps=writer._write) as written:
            [outcome] = api.report_upgrade_states(
                self.context, INSTANCE, [{
                    'upgrade_id': upgrade['id'], 'to_state': states.SUCCESS,
                    'detail': None, 'from_version': 'v1',
                    'to_version': 'v2'}])
        self.assertTrue(outcome['recorded'])
        self.assertEqual(1, written.call_count)
        conductor.stop()
        # Its thread ended with the stop.
        self.assertEqual([], conductor.tg.threads)
