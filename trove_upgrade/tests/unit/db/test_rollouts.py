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

"""The rollout functions of the db API on SQLite."""

import datetime

import fixtures
from oslo_utils import uuidutils
import sqlalchemy as sa

from trove_upgrade.common import exception
from trove_upgrade.common import rollout_states as rs
from trove_upgrade.common import rpc_interface
from trove_upgrade.common import states
from trove_upgrade.db import agents as db_agents
from trove_upgrade.db import common as db_common
from trove_upgrade.db import rollouts as db_rollouts
from trove_upgrade.db import transitions as db_transitions
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.tests.fixtures import database
from trove_upgrade.tests.unit.db import base as db_base

ROLLOUT = {
    'name': 'blue', 'instance_version': 'v2.0.0', 'strategy': 'http',
    'location': 'https://repo/a.tar', 'selector': {'group': 'blue'},
    'canary': 0, 'max_in_flight': 2, 'max_in_flight_kind': 'count',
    'max_failures': 0, 'max_failures_kind': 'count',
    'per_agent_retries': 0, 'agent_deadline': 60, 'status': rs.RUNNING}


class TestRolloutsDb(db_base.DbTestCase):

    def rollout(self, **overrides):
        rollout = db_rollouts.create_rollout(self.context,
                                             dict(ROLLOUT, **overrides))
        self.assertIsNotNone(db_rollouts.lease_rollout(
            self.context, rollout['id'], 'me',
            self.now + datetime.timedelta(seconds=60)))
        return rollout

    def test_create_refuses_bad_values_and_records_nothing(self):
        for overrides, reason in (
                ({'canary': -1}, 'canary must be a non-negative integer'),
                ({'max_failures': True}, 'max_failures must be'),
                ({'selector': ['a']}, 'selector must be an object'),
                ({'name': ''}, 'name must be a non-empty string'),
                ({'colour': 'red'}, 'unknown rollout field: colour')):
            e = self.assertRaises(exception.InvalidInputError,
                                  db_rollouts.create_rollout,
                                  self.context, dict(ROLLOUT, **overrides))
            self.assertIn(reason, str(e))
        values = dict(ROLLOUT)
        del values['status']
        self.assertRaises(
            exception.InvalidInputError, db_rollouts.create_rollout,
            self.context, values)
        self.assertEqual([], db_rollouts.list_rollouts(self.context))

    def test_update_is_a_compare_and_swap(self):
        rollout = self.rollout()
        paused = db_rollouts.update_rollout(self.context, rollout['id'],
                                            {rs.RUNNING},
                                            {'status': rs.PAUSED,
                                             'status_detail': 'why'})
        self.assertEqual((rs.PAUSED, 'why'),
                         (paused['status'], paused['status_detail']))
        self.assertIsNone(db_rollouts.update_rollout(
            self.context, rollout['id'], {rs.RUNNING},
            {'status': rs.COMPLETED}))
        self.assertRaises(exception.RolloutNotFoundError,
                          db_rollouts.update_rollout, self.context,
                          uuidutils.generate_uuid(), {rs.RUNNING},
                          {'status': rs.PAUSED})
        self.assertRaises(
            exception.InvalidInputError, db_rollouts.update_rollout,
            self.context, rollout['id'], {rs.PAUSED},
            {'name': 'x'})

    def test_lease(self):
        rollout = self.rollout()
        later = self.now + datetime.timedelta(seconds=120)
        self.assertIsNone(db_rollouts.lease_rollout(
            self.context, rollout['id'], 'other', later))
        self.assertIsNotNone(db_rollouts.lease_rollout(
            self.context, rollout['id'], 'me', later))
        self.now += datetime.timedelta(seconds=121)
        self.assertIsNotNone(db_rollouts.lease_rollout(
            self.context, rollout['id'], 'other',
            self.now + datetime.timedelta(seconds=60)))
        # Releasing a lease one no longer holds changes nothing.
        db_rollouts.release_rollout_lease(self.context, rollout['id'], 'me')
        self.assertIsNone(db_rollouts.lease_rollout(
            self.context, rollout['id'], 'me', self.now))
        db_rollouts.release_rollout_lease(self.context, rollout['id'], 'other')
        self.assertIsNotNone(db_rollouts.lease_rollout(
            self.context, rollout['id'], 'me', self.now))

    def test_lease_rollout_reads_the_rollout_it_leased(self):
        rollout = self.rollout()
        later = self.now + datetime.timedelta(seconds=120)
        db_rollouts.update_rollout(self.context, rollout['id'],
                                   {rs.RUNNING},
                                   {'status_detail': 'changed since read'})
        leased = db_rollouts.lease_rollout(self.context, rollout['id'],
                                           'me', later)
        self.assertEqual('changed since read', leased['status_detail'])
        self.assertEqual(db_rollouts.get_rollout(self.context,
                                                 rollout['id']), leased)
        # Held by "me": another gets nothing, and changes nothing.
        self.assertIsNone(db_rollouts.lease_rollout(
            self.context, rollout['id'], 'other', later))
        self.assertIsNone(db_rollouts.lease_rollout(
            self.context, rollout['id'], 'other', later))
        self.assertIsNotNone(db_rollouts.lease_rollout(
            self.context, rollout['id'], 'me', later))

    def test_mark_sent_leaves_claimed_upgrades_alone(self):
        rollout = self.rollout()
        first, second = db_rollouts.create_rollout_upgrades(
            self.context, rollout, [(db_base.INSTANCE, 1, False),
                                    (db_base.OTHER_INSTANCE, 1, True)],
            'me')
        db_transitions.transition_upgrade(self.context, second['id'],
                                          states.DOWNLOADING, 'agent')
        self.now += datetime.timedelta(seconds=1)
        self.assertEqual([first['id']], db_upgrades.mark_upgrades_sent(
            self.context, [first['id'], second['id']], 'conductor'))
        history = db_upgrades.get_upgrade(self.context, first['id'],
                                          with_events=True)['events']
        self.assertEqual([(None, states.PENDING, 'conductor'),
                          (states.PENDING, states.SENT, 'conductor')],
                         [(e['from_state'], e['to_state'], e['source'])
                          for e in history])
        self.assertEqual(states.DOWNLOADING, db_upgrades.get_upgrade(
            self.context, second['id'])['status'])
        self.assertEqual([], db_upgrades.mark_upgrades_sent(self.context, [],
                                                            'conductor'))
        dispatches = db_rollouts.list_rollout_dispatches(self.context,
                                                         rollout['id'])
        self.assertEqual(
            [(db_base.INSTANCE, 1, False, states.SENT),
             (db_base.OTHER_INSTANCE, 1, True, states.DOWNLOADING)],
            [(d['instance_id'], d['attempt'], d['canary'], d['status'])
             for d in dispatches])
        self.assertEqual({db_base.OTHER_INSTANCE, db_base.INSTANCE},
                         db_upgrades.list_busy_instances(self.context))

    def test_a_batch_records_each_event_of_its_own_upgrades(self):
        rollout = self.rollout()
        other = self._create(instance_id=db_base.OTHER_INSTANCE)
        recorded_at = self.now
        first, second = db_rollouts.create_rollout_upgrades(
            self.context, rollout, [(db_base.INSTANCE, 1, False),
                                    (db_base.OTHER_INSTANCE, 1, True)],
            'me')
        self.now += datetime.timedelta(seconds=1)
        self.assertEqual([second['id']], db_upgrades.mark_upgrades_sent(
            self.context, [second['id']], 'conductor', detail='returned'))

        def history(upgrade):
            return [(e['created_at'], e['source'], e['from_state'],
                     e['to_state'], e['detail'], e['request_id'])
                    for e in db_upgrades.get_upgrade(
                        self.context, upgrade['id'],
                        with_events=True)['events']]

        pending = (recorded_at, 'conductor', None, states.PENDING, None,
                   self.context.request_id)
        self.assertEqual([pending], history(first))
        self.assertEqual(
            [pending, (self.now, 'conductor', states.PENDING, states.SENT,
                       'returned', self.context.request_id)],
            history(second))
        # An upgrade outside the batches gets none of their events.
        self.assertEqual([(None, states.PENDING)],
                         [e[2:4] for e in history(other)])

    def _upgrade_inserts(self):
        """The INSERTs of upgrades sent to the driver from now on."""
        inserts = []

        def record(conn, cursor, statement, parameters, context,
                   executemany):
            if statement.startswith('INSERT INTO upgrades '):
                inserts.append((statement, parameters, executemany))
        engine = db_common.get_engine()
        sa.event.listen(engine, 'before_cursor_execute', record)
        self.addCleanup(sa.event.remove, engine, 'before_cursor_execute',
                        record)
        return inserts

    def test_a_batch_binds_what_its_upgrades_share_once(self):
        # Binding every column of every row cost a reconciler pass a
        # third of its CPU: only the ids and instances are bound per row.
        rollout = self.rollout()
        inserts = self._upgrade_inserts()
        targets = [(uuidutils.generate_uuid(), 1, False) for _ in range(300)]
        batch = db_rollouts.create_rollout_upgrades(self.context, rollout,
                                                    targets, 'me')
        [(statement, parameters, executemany)] = inserts
        self.assertFalse(executemany)
        for upgrade in batch:
            self.assertEqual(1, parameters.count(upgrade['id']))
            self.assertEqual(1, parameters.count(upgrade['instance_id']))
        for shared in rollout['location'], rollout['id']:
            self.assertEqual(1, parameters.count(shared))
        # Compiling a statement of hundreds of rows costs about as much as
        # binding them: batches of near sizes run one and the same.
        del inserts[:]
        for size in 5, 6, 7, 8:
            db_rollouts.create_rollout_upgrades(
                self.context, rollout,
                [(uuidutils.generate_uuid(), 1, False)
                 for _ in range(size)], 'me')
        self.assertEqual(1, len({statement for statement, _, _ in inserts}))
        self.assertEqual(326, len(db_upgrades.list_upgrades(
            self.context, filters={'rollout_id': rollout['id']})))

    def test_timeout_only_this_rollouts_old_upgrades(self):
        rollout = self.rollout()
        mine, = db_rollouts.create_rollout_upgrades(
            self.context, rollout, [(db_base.INSTANCE, 1, False)], 'me')
        other = db_upgrades.create_upgrade(self.context, self._values(
            instance_id=db_base.OTHER_INSTANCE))
        self.now += datetime.timedelta(seconds=61)
        timed_out = db_rollouts.timeout_rollout_upgrades(
            self.context, rollout['id'],
            self.now - datetime.timedelta(seconds=60))
        self.assertEqual([mine['id']], [u['id'] for u in timed_out])
        self.assertEqual(states.PENDING, db_upgrades.get_upgrade(
            self.context, other['id'])['status'])

    def test_delete_keeps_the_tagged_upgrades(self):
        rollout = self.rollout()
        upgrade, = db_rollouts.create_rollout_upgrades(
            self.context, rollout, [(db_base.INSTANCE, 1, False)], 'me')
        e = self.assertRaises(exception.InvalidRolloutStateError,
                              db_rollouts.delete_rollout, self.context,
                              rollout['id'], rs.FINISHED_STATES)
        self.assertIn('is RUNNING: it cannot be deleted', str(e))
        db_rollouts.update_rollout(self.context, rollout['id'], {rs.RUNNING},
                                   {'status': rs.ABORTED}, finished=True)
        db_rollouts.delete_rollout(self.context, rollout['id'],
                                   rs.FINISHED_STATES)
        self.assertRaises(
            exception.RolloutNotFoundError, db_rollouts.get_rollout,
            self.context, rollout['id'])
        self.assertEqual(rollout['id'], db_upgrades.get_upgrade(
            self.context, upgrade['id'])['rollout_id'])

    def test_a_delete_waits_for_another_writer(self):
        rollout = db_rollouts.create_rollout(
            self.context, dict(ROLLOUT, status=rs.ABORTED))
        database.while_another_writes(
            self, lambda: db_rollouts.delete_rollout(
                self.context, rollout['id'], rs.FINISHED_STATES))
        self.assertRaises(
            exception.RolloutNotFoundError, db_rollouts.get_rollout,
            self.context, rollout['id'])

    def test_deleting_a_missing_rollout_is_not_found(self):
        self.assertRaises(exception.RolloutNotFoundError,
                          db_rollouts.delete_rollout, self.context,
                          uuidutils.generate_uuid(), rs.FINISHED_STATES)

    def test_selected_agents(self):
        # A third agent shares the first one's labels: each labels text
        # is matched once, and that answer serves every agent holding it.
        third = '6f1c1a53-9d63-4c43-a0a1-6b1ad1f3c003'
        for instance_id, labels in ((db_base.INSTANCE, {'group': 'blue'}),
                                    (db_base.OTHER_INSTANCE,
                                     {'group': 'red', 'az': 'a'}),
                                    (third, {'group': 'blue'})):
            db_agents.register_agent(self.context, instance_id,
                                     {'labels': labels})

        def ids(selector):
            return [a['instance_id'] for a in
                    db_agents.list_selected_agents(self.context, selector)]

        self.assertEqual([db_base.INSTANCE, third], ids({'group': 'blue'}))
        self.assertEqual([db_base.OTHER_INSTANCE],
                         ids({'labels': {'az': 'a'}}))
        self.assertEqual([], ids({'labels': {'az': 'b'}}))
        # Every agent, and the zone reported in the zone's label.
        self.assertEqual([db_base.INSTANCE, db_base.OTHER_INSTANCE, third],
                         sorted(ids({'labels': {}})))
        db_agents.register_agent(self.context, third, {'labels': {
            'group': 'blue', rpc_interface.AVAILABILITY_ZONE_LABEL: 'nova'}})
        self.assertEqual([third], ids({'labels': {},
                                       'availability_zone': 'nova'}))
        self.assertEqual([third], ids({'group': 'blue',
                                       'availability_zone': 'nova'}))
        self.assertEqual([third], ids({
            'instance_ids': [third, db_base.INSTANCE],
            'availability_zone': 'nova'}))
        self.assertEqual([], ids({'group': 'red',
                                  'availability_zone': 'nova'}))
        self.assertEqual(
            {'instance_id', 'guest_version', 'last_heartbeat_at'},
            set(db_agents.list_selected_agents(self.context,
                                               {'group': 'red'})[0]))
        self.assertEqual([db_base.OTHER_INSTANCE], ids(
            {'instance_ids': [db_base.OTHER_INSTANCE,
                              uuidutils.generate_uuid()]}))
        for selector in ({}, {'group': 'a', 'labels': {'b': 'c'}},
                         {'colour': 'red'}):
            self.assertRaises(exception.InvalidInputError,
                              db_agents.list_selected_agents, self.context,
                              selector)

    def test_selected_agents_one_page_at_a_time(self):
        ids = ['6f1c1a53-9d63-4c43-a0a1-6b1ad1f3c10%d' % n for n in range(9)]
        for number, instance_id in enumerate(ids):
            db_agents.register_agent(self.context, instance_id, {
                'labels': {'group': 'blue' if number % 3 else 'red'}})
        blue = [i for n, i in enumerate(ids) if n % 3]

        def page(selector, after, limit):
            return [a['instance_id'] for a in db_agents.list_selected_agents(
                self.context, selector, after, limit)]

        # Chunks as small as the page: a page of blue agents reads past the red
        # ones until it is full, and stops at the end of the table.
        self.useFixture(fixtures.MockPatchObject(
            db_agents, '_SELECTION_CHUNK', 2))
        self.assertEqual(blue[:3], page({'group': 'blue'}, None, 3))
        self.assertEqual(blue[3:], page({'group': 'blue'}, blue[2], 3))
        self.assertEqual([], page({'group': 'blue'}, ids[-1], 3))
        self.assertEqual(blue, page({'group': 'blue'}, None, None))
        self.assertEqual(ids[4:6], page({'instance_ids': ids}, ids[3], 2))
        self.assertRaises(exception.InvalidInputError, page, {'group': 'blue'},
                          None, 0)

    def test_agents_by_health(self):
        for number in range(5):
            db_agents.register_agent(self.context,
                                     '6f1c1a53-9d63-4c43-a0a1-6b1ad1f3c10%d'
                                     % number, {})
            self.now += datetime.timedelta(seconds=10)
        since = self.now - datetime.timedelta(seconds=25)

        def ids(reachable, **kwargs):
            return [a['instance_id'][-1] for a in
                    db_agents.list_agents_by_health(self.context, reachable,
                                                    since, **kwargs)]

        self.assertEqual(['3', '4'], ids(True))
        self.assertEqual(['0', '1', '2'], ids(False))
        self.assertEqual(['0', '1'], ids(False, limit=2))
        self.assertEqual(['4'], ids(True, limit=1, marker=(
            '6f1c1a53-9d63-4c43-a0a1-6b1ad1f3c103')))
        self.assertEqual(['3'], ids(True, limit=1))
