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

"""A real conductor writes unchanged heartbeats rarely, agents stay reachable.

The conductor process runs on a real MariaDB or PostgreSQL database, with
a short ``agent_down_time`` and ``heartbeat_write_interval``; the test
heartbeats as an agent does, through ``ConductorAPI``, and reads what
``agent list`` reads.
"""

import datetime
import time

from oslo_utils import timeutils

from trove_upgrade.common import conductor_rpcapi as rpcapi
from trove_upgrade.db import agents as db_agents
from trove_upgrade.tests.fixtures import database
from trove_upgrade.tests.functional.conductor import test_conductor_process

wait_until = test_conductor_process.wait_until
DOWN_TIME = 6
WRITE_INTERVAL = 2
AGENT = dict(agent_version='2026.2.0', guest_version='v1.0.0',
             rpc_api_version='1.1', labels={'group': 'blue'}, host='guest')


class _HeartbeatWrites:

    def setUp(self):
        super().setUp()
        self.start_conductor(agent_down_time=DOWN_TIME,
                             heartbeat_write_interval=WRITE_INTERVAL)
        self.api = rpcapi.ConductorAPI()

    def reachable(self):
        since = timeutils.utcnow() - datetime.timedelta(seconds=DOWN_TIME)
        return [a['instance_id'] for a in db_agents.list_agents_by_health(
            self.admin, True, since)]

    def agent(self):
        return db_agents.get_agent(self.admin, self.instance_id)

    def test_heartbeating_agent_stays_reachable_with_few_writes(self):
        self.api.register_agent(self.agent_context, self.instance_id,
                                state='RUNNING', **AGENT)
        stored, sent = set(), 0
        deadline = time.monotonic() + 2 * DOWN_TIME
        while time.monotonic() < deadline:
            self.api.heartbeat(self.agent_context, self.instance_id,
                               state='RUNNING', **AGENT)
            sent += 1
            time.sleep(0.5)
            self.assertIn(self.instance_id, self.reachable())
            stored.add(self.agent()['last_heartbeat_at'])
        # Every heartbeat was a write before; now one per write interval.
        self.assertLessEqual(len(stored), sent // 2)
        # A change is written at once, whatever the interval.
        self.api.heartbeat(self.agent_context, self.instance_id,
                           state='BACKUP', **AGENT)
        wait_until(lambda: self.agent()['state'] == 'BACKUP',
                   'the changed state to be stored')
        # Silent, it becomes unreachable, as before.
        wait_until(lambda: self.instance_id not in self.reachable(),
                   'the silent agent to become unreachable')


class TestHeartbeatWritesPostgreSQL(
        _HeartbeatWrites, test_conductor_process.ConductorProcessTestCase):

    def setUp(self):
        self.database_fixture = database.PostgresqlDatabase
        super().setUp()


class TestHeartbeatWritesMariaDB(
        _HeartbeatWrites, test_conductor_process.ConductorProcessTestCase):

    def setUp(self):
        self.database_fixture = database.MariaDBDatabase
        super().setUp()
