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

"""Heartbeats that bring nothing new are not written every time."""

import datetime
from unittest import mock

from oslo_utils import fixture as utils_fixture
from oslo_utils import timeutils

from trove_upgrade.common import context
from trove_upgrade.conductor import heartbeats
from trove_upgrade.conductor import manager
from trove_upgrade.db import agents as db_agents
from trove_upgrade.tests import base
from trove_upgrade.tests.fixtures import database
from trove_upgrade.tests.fixtures import rpc as rpc_fixture
from trove_upgrade.tests.unit.conductor import test_manager

INSTANCE = test_manager.INSTANCE
AGENT = test_manager.AGENT
START = datetime.datetime(2026, 11, 29, 10, 0, 0)


class TestHeartbeatWrites(base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(database.Database())
        self.useFixture(rpc_fixture.FakeTransport())
        self.context = context.RequestContext(request_id='req-agent')
        self.manager = manager.ConductorManager()
        # One clock for the database's times and the manager's memory.
        self.clock = self.useFixture(utils_fixture.TimeFixture(START))
        self.manager.heartbeats = heartbeats.HeartbeatWrites(
            clock=lambda: (self.now() - START).total_seconds())

    def now(self):
        return timeutils.utcnow()

    def advance(self, seconds):
        self.clock.advance_time_seconds(seconds)

    def stored(self):
        return db_agents.get_agent(self.context, INSTANCE)['last_heartbeat_at']

    def beat(self, instance_id=INSTANCE, **changes):
        """A heartbeat, and the flush the service runs every second."""
        self.manager.heartbeat(self.context, instance_id,
                               **dict(AGENT, **changes))
        self.manager.heartbeats.flush(self.context)

    def test_unchanged_heartbeat_is_written_once_per_interval(self):
        self.flags(heartbeat_write_interval=60, group='conductor')
        self.manager.register_agent(self.context, INSTANCE, **AGENT)
        self.advance(30)
        with mock.patch.object(db_agents, 'record_heartbeats',
                               wraps=db_agents.record_heartbeats) as write:
            self.beat()
            write.assert_not_called()
            self.assertEqual(START, self.stored())
            self.advance(30)
            self.beat()
            write.assert_called_once()
        self.assertEqual(START + datetime.timedelta(seconds=60),
                         self.stored())

    def test_due_heartbeats_wait_for_one_batch(self):
        self.manager.register_agent(self.context, INSTANCE, **AGENT)
        self.manager.register_agent(self.context, test_manager.OTHER_INSTANCE,
                                    **AGENT)
        self.advance(60)
        for instance_id in (INSTANCE, test_manager.OTHER_INSTANCE):
            self.manager.heartbeat(self.context, instance_id, **AGENT)
        self.assertEqual(START, self.stored())
        self.advance(0.5)
        with mock.patch.object(db_agents, 'record_heartbeats',
                               wraps=db_agents.record_heartbeats) as write:
            self.assertEqual(2, self.manager.heartbeats.flush(self.context))
            self.assertEqual(0, self.manager.heartbeats.flush(self.context))
        write.assert_called_once()
        # Each stored with the time it was heard, not the flush's.
        heard = START + datetime.timedelta(seconds=60)
        self.assertEqual(heard, self.stored())
        self.assertEqual(heard, db_agents.get_agent(
            self.context, test_manager.OTHER_INSTANCE)['last_heartbeat_at'])

    def test_a_change_is_not_undone_by_the_batch(self):
        self.manager.register_agent(self.context, INSTANCE, **AGENT)
        self.advance(60)
        self.manager.heartbeat(self.context, INSTANCE, **AGENT)
        self.advance(1)
        self.manager.heartbeat(self.context, INSTANCE,
                               **dict(AGENT, state='BACKUP'))
        self.manager.heartbeats.flush(self.context)
        agent = db_agents.get_agent(self.context, INSTANCE)
        self.assertEqual('BACKUP', agent['state'])
        self.assertEqual(START + datetime.timedelta(seconds=61),
                         agent['last_heartbeat_at'])

    def test_a_batch_never_moves_the_stored_heartbeat_back(self):
        self.manager.register_agent(self.context, INSTANCE, **AGENT)
        self.advance(60)
        self.manager.heartbeat(self.context, INSTANCE, **AGENT)
        due = dict(self.manager.heartbeats._due)
        self.advance(1)
        # Another conductor stores a newer heartbeat meanwhile.
        db_agents.register_agent(self.context, INSTANCE, dict(AGENT))
        db_agents.record_heartbeats(self.context, due)
        self.assertEqual(START + datetime.timedelta(seconds=61),
                         self.stored())

    def test_a_deleted_agent_is_registered_again_by_the_batch(self):
        self.manager.register_agent(self.context, INSTANCE, **AGENT)
        self.advance(60)
        db_agents.delete_agent(self.context, INSTANCE)
        self.beat()
        self.assertEqual(START + datetime.timedelta(seconds=60),
                         self.stored())

    def test_a_failed_batch_is_written_by_the_next_heartbeat(self):
        self.manager.register_agent(self.context, INSTANCE, **AGENT)
        self.advance(60)
        self.manager.heartbeat(self.context, INSTANCE, **AGENT)
        with mock.patch.object(db_agents, 'record_heartbeats',
                               side_effect=RuntimeError('db down')):
            self.assertRaises(RuntimeError, self.manager.heartbeats.flush,
                              self.context)
        self.assertEqual(START, self.stored())
        self.advance(1)
        self.beat()
        self.assertEqual(START + datetime.timedelta(seconds=61),
                         self.stored())

    def test_a_conductor_killed_before_the_flush_loses_only_times(self):
        self.manager.register_agent(self.context, INSTANCE, **AGENT)
        self.advance(30)
        self.beat(state='BACKUP')
        self.advance(60)
        self.manager.heartbeat(self.context, INSTANCE,
                               **dict(AGENT, state='BACKUP'))
        # Killed: its memory and its batch are gone; a new one starts.
        self.manager = manager.ConductorManager()
        agent = db_agents.get_agent(self.context, INSTANCE)
        self.assertEqual('BACKUP', agent['state'])
        self.assertEqual(START + datetime.timedelta(seconds=30),
                         agent['last_heartbeat_at'])
        self.advance(30)
        with mock.patch.object(db_agents, 'register_agent',
                               wraps=db_agents.register_agent) as write:
            self.manager.heartbeat(self.context, INSTANCE,
                                   **dict(AGENT, state='BACKUP'))
        write.assert_called_once()
        self.assertEqual(START + datetime.timedelta(seconds=120),
                         self.stored())

    def test_a_change_is_written_at_once(self):
        self.manager.register_agent(self.context, INSTANCE, **AGENT)
        self.advance(1)
        self.beat(state='BACKUP')
        agent = db_agents.get_agent(self.context, INSTANCE)
        self.assertEqual('BACKUP', agent['state'])
        self.advance(1)
        self.beat(state='BACKUP', labels={'datastore': 'postgresql'})
        self.assertEqual({'datastore': 'postgresql'},
                         db_agents.get_agent(self.context, INSTANCE)['labels'])

    def test_registration_is_always_written(self):
        self.manager.register_agent(self.context, INSTANCE, **AGENT)
        self.advance(1)
        self.manager.register_agent(self.context, INSTANCE, **AGENT)
        self.assertEqual(START + datetime.timedelta(seconds=1),
                         self.stored())

    def test_zero_writes_every_heartbeat(self):
        self.flags(heartbeat_write_interval=0, group='conductor')
        self.manager.register_agent(self.context, INSTANCE, **AGENT)
        self.advance(1)
        self.beat()
        self.assertEqual(START + datetime.timedelta(seconds=1),
                         self.stored())

    def test_interval_never_exceeds_half_the_down_time(self):
        self.flags(heartbeat_write_interval=600, agent_down_time=100,
                   group='conductor')
        self.assertEqual(50, heartbeats.write_interval())

    def test_a_failed_write_is_not_remembered(self):
        self.manager.register_agent(self.context, INSTANCE, **AGENT)
        self.advance(1)
        with mock.patch.object(db_agents, 'register_agent',
                               side_effect=RuntimeError('db down')):
            self.assertRaises(RuntimeError, self.beat, state='BACKUP')
        self.advance(1)
        self.beat(state='BACKUP')
        self.assertEqual('BACKUP',
                         db_agents.get_agent(self.context, INSTANCE)['state'])

    def test_an_agent_heartbeating_stays_reachable(self):
        # Defaults: write interval 60 s, down time 120 s; agents beat
        # every 30 s, each a little late.
        self.manager.register_agent(self.context, INSTANCE, **AGENT)
        for _ in range(40):
            self.advance(31)
            self.beat()
            age = (self.now() - self.stored()).total_seconds()
            self.assertLess(age, self.flags_value('agent_down_time'))

    def flags_value(self, name):
        return getattr(self.conf.conductor, name)

    def test_memory_of_departed_agents_is_pruned(self):
        writes = self.manager.heartbeats
        self.manager.register_agent(self.context, INSTANCE, **AGENT)
        self.advance(2 * heartbeats.write_interval())
        self.manager.register_agent(self.context, test_manager.OTHER_INSTANCE,
                                    **AGENT)
        self.assertEqual([test_manager.OTHER_INSTANCE],
                         list(writes._written))

    def test_a_heartbeat_not_written_reads_no_keys(self):
        self.manager.register_agent(self.context, INSTANCE, **AGENT)
        self.advance(1)
        with mock.patch.object(self.manager, '_authenticate') as auth:
            self.beat()
            auth.assert_not_called()
            self.beat(state='BACKUP')
            auth.assert_called_once()

    def test_a_malformed_id_is_still_refused(self):
        self.manager.heartbeat(self.context, ['not', 'an', 'id'], **AGENT)
        self.manager.heartbeat(self.context, 'not-a-uuid', **AGENT)
        self.assertEqual([], list(db_agents.list_agents(self.context)))
