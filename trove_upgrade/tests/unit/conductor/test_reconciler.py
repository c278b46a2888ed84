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

"""The reconciler on a real SQLite file and the in-memory transport."""

import datetime
from unittest import mock

import fixtures
import oslo_messaging as messaging
from oslo_utils import timeutils
from oslo_utils import uuidutils
import sqlalchemy as sa
from sqlalchemy import exc as sa_exc

from trove_upgrade.common import context
from trove_upgrade.common import rollout_states as rs
from trove_upgrade.common import states
from trove_upgrade.conductor import reconciler
from trove_upgrade.db import agents as db_agents
from trove_upgrade.db import common as db_common
from trove_upgrade.db import rollouts as db_rollouts
from trove_upgrade.db import transitions as db_transitions
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.services import resends
from trove_upgrade.services import rollout_plan
from trove_upgrade.services import rollouts
from trove_upgrade.tests import base
from trove_upgrade.tests.fixtures import database
from trove_upgrade.tests.fixtures import rpc as rpc_fixture


class TestReconciler(base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(database.Database())
        self.useFixture(rpc_fixture.FakeTransport())
        self.ctx = context.get_admin_context()
        self.ids = sorted(uuidutils.generate_uuid() for _ in range(6))
        for instance_id in self.ids:
            db_agents.register_agent(self.ctx, instance_id, {
                'guest_version': 'v1.0.0', 'labels': {'group': 'blue'}})
        self.reconciler = reconciler.Reconciler('host-a')

    def create(self, **overrides):
        values = {
            'name': 'r', 'instance_version': 'v2.0.0', 'strategy': 'http',
            'location': 'https://repo/a.tar', 'selector': {'group': 'blue'},
            'canary': 0, 'max_in_flight': 2, 'max_in_flight_kind': 'count',
            'max_failures': 0, 'max_failures_kind': 'count',
            'per_agent_retries': 0, 'agent_deadline': 60}
        values.update(overrides)
        return rollouts.create_rollout(self.ctx, values)

    def upgrades(self, rollout_id):
        return db_upgrades.list_upgrades(self.ctx,
                                         filters={'rollout_id': rollout_id})

    def finish(self, rollout_id, status=states.SUCCESS):
        for upgrade in self.upgrades(rollout_id):
            if upgrade['status'] not in states.FINAL_STATES:
                db_transitions.transition_upgrade(self.ctx, upgrade['id'],
                                                  status, 'agent')

    def test_dispatches_sent_tagged_upgrades_within_the_limit(self):
        rollout = self.create()
        self.reconciler.run(self.ctx)
        self.reconciler.run(self.ctx)
        found = self.upgrades(rollout['id'])
        self.assertEqual(sorted(self.ids[:2]),
                         sorted(u['instance_id'] for u in found))
        for upgrade in found:
            self.assertEqual((states.SENT, rollout['id'], 'v2.0.0'),
                             (upgrade['status'], upgrade['rollout_id'],
                              upgrade['instance_version']))

    def test_database_gone_after_the_list_is_one_line(self):
        """As every part of a pass: no traceback for an outage.

        The fault-schedule run closed the database between the pass's
        list of rollouts and its lease of one, and the log got a
        traceback per rollout and pass.
        """
        rollout = self.create()
        logger = self.useFixture(fixtures.FakeLogger(name='trove_upgrade'))
        gone = sa_exc.OperationalError(
            'UPDATE rollouts', {}, Exception('server closed the connection'
                                             '\nunexpectedly'))
        with mock.patch.object(db_rollouts, 'lease_rollout',
                               side_effect=gone):
            self.reconciler.run(self.ctx)
        self.assertIn('Reconciling rollout %s failed, the database is '
                      'unavailable; the next pass tries again: server '
                      'closed the connection' % rollout['id'],
                      logger.output)
        self.assertNotIn('Traceback', logger.output)
        self.assertEqual([], self.upgrades(rollout['id']))
        self.reconciler.run(self.ctx)
        self.assertEqual(2, len(self.upgrades(rollout['id'])))

    def waits(self, rollout):
        """The quick plan of ``rollout`` decides that it can only wait."""
        found = rollouts.quick_plan(self.ctx, rollout)
        return found is not None and found.action == rollout_plan.WAIT

    def running(self, rollout):
        return db_rollouts.get_rollout(self.ctx, rollout['id'])

    def test_a_full_window_skips_the_plan_until_a_slot_frees(self):
        rollout = self.create()
        self.reconciler.run(self.ctx)
        with mock.patch.object(rollouts, 'plan_for',
                               wraps=rollouts.plan_for) as plan_for:
            self.reconciler.run(self.ctx)
            self.assertTrue(self.waits(self.running(rollout)))
            first = self.upgrades(rollout['id'])[0]
            db_transitions.transition_upgrade(self.ctx, first['id'],
                                              states.SUCCESS, 'agent')
            # The freed slot goes to the next agent without a plan.
            self.reconciler.run(self.ctx)
            self.assertEqual(0, plan_for.call_count)
        self.assertEqual(sorted(self.ids[:3]), sorted(
            u['instance_id'] for u in self.upgrades(rollout['id'])))

    def test_the_tail_of_a_rollout_skips_the_plan(self):
        """All dispatched, some in flight: only waiting, until they end."""
        rollout = self.create(max_in_flight=4)
        self.reconciler.run(self.ctx)
        self.finish(rollout['id'])
        self.reconciler.run(self.ctx)
        self.assertEqual(6, len(self.upgrades(rollout['id'])))
        with mock.patch.object(rollouts, 'plan_for',
                               wraps=rollouts.plan_for) as plan_for:
            self.reconciler.run(self.ctx)
            self.assertTrue(self.waits(self.running(rollout)))
            # An agent that registers late is dispatched to at once.
            late = 'f' * 8 + uuidutils.generate_uuid()[8:]
            db_agents.register_agent(self.ctx, late, {
                'guest_version': 'v1.0.0', 'labels': {'group': 'blue'}})
            self.reconciler.run(self.ctx)
            self.assertEqual(7, len(self.upgrades(rollout['id'])))
            # One already at the version waits for nothing.
            db_agents.register_agent(self.ctx, uuidutils.generate_uuid(), {
                'guest_version': 'v2.0.0', 'labels': {'group': 'blue'}})
            self.assertTrue(self.waits(self.running(rollout)))
            self.reconciler.run(self.ctx)
            self.assertEqual(0, plan_for.call_count)
            # Nothing unfinished: only the plan can complete it.
            self.finish(rollout['id'])
            self.reconciler.run(self.ctx)
            self.assertEqual(1, plan_for.call_count)
        done = db_rollouts.get_rollout(self.ctx, rollout['id'])
        self.assertEqual(rs.COMPLETED, done['status'])

    def test_the_quick_dispatch_is_the_plans(self):
        """The next free waiting agents, in order, as the plan picks them."""
        # An agent at the version already, and one busy with an upgrade
        # of an operator's, both among the first in instance order.
        db_agents.register_agent(self.ctx, self.ids[1], {
            'guest_version': 'v2.0.0'})
        db_upgrades.create_upgrade(self.ctx, {
            'instance_id': self.ids[2], 'instance_version': 'v3.0.0',
            'strategy': 'http', 'location': 'https://repo/b.tar'})
        rollout = self.create(max_in_flight=3)
        self.reconciler.run(self.ctx)
        self.assertEqual([self.ids[0], self.ids[3], self.ids[4]], sorted(
            u['instance_id'] for u in self.upgrades(rollout['id'])))
        self.finish(rollout['id'])
        running = self.running(rollout)
        quick = rollouts.quick_plan(self.ctx, running)
        planned = rollouts.plan_for(self.ctx, running)
        self.assertEqual([(self.ids[5], 1, False)], quick.dispatch)
        self.assertEqual(planned.dispatch, quick.dispatch)
        self.assertEqual(planned.action, quick.action)

    def transactions(self):
        """The connections checked out from now on: one per transaction."""
        checkouts = []
        engine = db_common.get_engine()

        def checkout(*args):
            checkouts.append(args)
        sa.event.listen(engine, 'checkout', checkout)
        self.addCleanup(sa.event.remove, engine, 'checkout', checkout)
        return checkouts

    def test_the_quick_plan_reads_in_one_transaction(self):
        """Its count, the busy instances and the waiting agents: one."""
        rollout = self.create(max_in_flight=3)
        running = self.running(rollout)
        transactions = self.transactions()
        quick = rollouts.quick_plan(self.ctx, running)
        self.assertEqual([(i, 1, False) for i in self.ids[:3]],
                         quick.dispatch)
        self.assertEqual(1, len(transactions))

    def test_a_waiting_pass_costs_four_transactions(self):
        """The lists of rollouts and desired versions share the first.

        Then the lease, the overdue upgrades and the quick plan.
        """
        rollout = self.create()
        self.reconciler.run(self.ctx)
        transactions = self.transactions()
        self.reconciler.run(self.ctx)
        self.assertEqual(4, len(transactions))
        self.assertTrue(self.waits(self.running(rollout)))

    def test_an_agent_an_older_rollout_owns_is_not_dispatched(self):
        older = self.create(name='older', selector={'labels': {'zone': 'x'}},
                            max_in_flight=1)
        rollout = self.create(max_in_flight=6)
        self.reconciler.run(self.ctx)
        self.finish(rollout['id'])
        # Registered since: both select it, the older one takes it.
        shared = 'f' * 8 + uuidutils.generate_uuid()[8:]
        db_agents.register_agent(self.ctx, shared, {
            'guest_version': 'v1.0.0',
            'labels': {'group': 'blue', 'zone': 'x'}})
        running = self.running(rollout)
        self.assertIsNone(rollouts.quick_plan(self.ctx, running))
        self.assertEqual([], rollouts.plan_for(self.ctx, running).dispatch)
        self.reconciler.run(self.ctx)
        self.assertEqual([shared], [u['instance_id']
                                    for u in self.upgrades(older['id'])])
        self.assertNotIn(shared, [u['instance_id']
                                  for u in self.upgrades(rollout['id'])])

    def test_the_canary_phase_is_planned(self):
        rollout = self.create(canary=1, max_in_flight=3)
        self.reconciler.run(self.ctx)
        self.finish(rollout['id'])
        self.assertIsNone(rollouts.quick_plan(self.ctx, self.running(rollout)))
        self.reconciler.run(self.ctx)
        # The first agent beyond the canary ends the phase.
        self.assertEqual(4, len(self.upgrades(rollout['id'])))
        self.finish(rollout['id'])
        quick = rollouts.quick_plan(self.ctx, self.running(rollout))
        self.assertEqual([(self.ids[4], 1, False), (self.ids[5], 1, False)],
                         quick.dispatch)

    def test_a_tail_with_a_retry_left_is_planned(self):
        rollout = self.create(max_in_flight=6, per_agent_retries=1,
                              max_failures=1)
        self.reconciler.run(self.ctx)
        first = self.upgrades(rollout['id'])[0]
        db_transitions.transition_upgrade(self.ctx, first['id'], states.FAILED,
                                          'agent')
        self.assertIsNone(rollouts.quick_plan(self.ctx,
                                              self.running(rollout)))
        self.reconciler.run(self.ctx)
        self.assertEqual(7, len(self.upgrades(rollout['id'])))

    def test_a_failure_sends_the_next_dispatch_to_the_plan(self):
        rollout = self.create(max_in_flight=3, max_failures=2)
        self.reconciler.run(self.ctx)
        self.finish(rollout['id'], states.FAILED)
        self.assertIsNone(rollouts.quick_plan(self.ctx,
                                              self.running(rollout)))

    def test_a_full_window_with_a_failure_is_planned(self):
        """A retry fills the window again; the failure still gets judged."""
        rollout = self.create(per_agent_retries=1)
        self.reconciler.run(self.ctx)
        first = self.upgrades(rollout['id'])[0]
        db_transitions.transition_upgrade(self.ctx, first['id'], states.FAILED,
                                          'agent')
        self.reconciler.run(self.ctx)
        self.assertEqual((2, 1, True), db_rollouts.count_rollout_upgrades(
            self.ctx, rollout['id']))
        running = self.running(rollout)
        self.assertFalse(self.waits(running))
        # Within a count tolerance of one, the window is full again.
        tolerant = dict(running, max_failures=1)
        self.assertTrue(self.waits(tolerant))
        # But not with canaries, whose phase tolerates no failure.
        self.assertFalse(self.waits(dict(tolerant, canary=1)))

    def test_a_percent_window_counts_every_registered_agent(self):
        for _ in range(4):
            db_agents.register_agent(self.ctx, uuidutils.generate_uuid(), {
                'guest_version': 'v1.0.0', 'labels': {'group': 'green'}})
        # 50% of the 6 selected is 3; of the 10 registered, 5.
        rollout = self.create(max_in_flight=50, max_in_flight_kind='percent')
        self.reconciler.run(self.ctx)
        self.assertEqual(3, len(self.upgrades(rollout['id'])))
        running = self.running(rollout)
        self.assertIsNone(rollouts.quick_plan(self.ctx, running))
        self.assertTrue(self.waits(dict(running, max_in_flight=30)))
        self.reconciler.run(self.ctx)
        self.assertEqual(3, len(self.upgrades(rollout['id'])))

    def test_an_empty_window_is_never_full(self):
        rollout = self.create()
        self.assertIsNone(rollouts.quick_plan(
            self.ctx, dict(rollout, max_in_flight=0)))
        self.assertIsNone(rollouts.quick_plan(
            self.ctx,
            dict(rollout, status_detail=rollout_plan.NOTHING_SELECTED)))

    def test_runs_to_completion(self):
        rollout = self.create()
        for _ in range(4):
            self.reconciler.run(self.ctx)
            self.finish(rollout['id'])
        self.reconciler.run(self.ctx)
        done = db_rollouts.get_rollout(self.ctx, rollout['id'])
        self.assertEqual(rs.COMPLETED, done['status'])
        self.assertIsNotNone(done['finished_at'])
        self.assertEqual(6, len(self.upgrades(rollout['id'])))

    def test_pauses_with_the_reason(self):
        rollout = self.create(max_failures=1)
        self.reconciler.run(self.ctx)
        self.finish(rollout['id'], states.FAILED)
        self.reconciler.run(self.ctx)
        paused = db_rollouts.get_rollout(self.ctx, rollout['id'])
        self.assertEqual(
            (rs.PAUSED, '2 failed agent(s) exceed the tolerance of 1.'),
            (paused['status'], paused['status_detail']))
        self.reconciler.run(self.ctx)
        self.assertEqual(2, len(self.upgrades(rollout['id'])))

    def test_another_conductor_waits_for_the_lease(self):
        rollout = self.create()
        other = reconciler.Reconciler('host-b')
        self.reconciler.run(self.ctx)
        self.finish(rollout['id'])
        other.run(self.ctx)
        self.assertEqual(2, len(self.upgrades(rollout['id'])))
        # Once the lease expired, the other one takes over.
        later = timeutils.utcnow() + datetime.timedelta(seconds=3600)
        with mock.patch.object(timeutils, 'utcnow', return_value=later):
            other.run(self.ctx)
        self.assertEqual(4, len(self.upgrades(rollout['id'])))
        # And the first one, its lease lost, dispatches nothing.
        self.finish(rollout['id'])
        self.reconciler.run(self.ctx)
        self.assertEqual(4, len(self.upgrades(rollout['id'])))

    def test_an_attempt_is_recorded_once(self):
        rollout = self.create()
        db_rollouts.lease_rollout(self.ctx, rollout['id'],
                                  self.reconciler.owner,
                                  timeutils.utcnow() +
                                  datetime.timedelta(seconds=60))
        targets = [(self.ids[0], 1, False), (self.ids[1], 1, False)]
        first = db_rollouts.create_rollout_upgrades(self.ctx, rollout, targets,
                                                    self.reconciler.owner)
        again = db_rollouts.create_rollout_upgrades(
            self.ctx, rollout, targets + [(self.ids[2], 1, False)],
            self.reconciler.owner)
        self.assertEqual(2, len(first))
        self.assertEqual([self.ids[2]], [u['instance_id'] for u in again])
        self.assertEqual(3, len(self.upgrades(rollout['id'])))

    def test_nothing_is_recorded_once_paused_or_not_ours(self):
        rollout = self.create()
        targets = [(self.ids[0], 1, False)]
        self.assertEqual([], db_rollouts.create_rollout_upgrades(
            self.ctx, rollout, targets, self.reconciler.owner))
        db_rollouts.lease_rollout(self.ctx, rollout['id'],
                                  self.reconciler.owner,
                                  timeutils.utcnow() +
                                  datetime.timedelta(seconds=60))
        rollouts.pause_rollout(self.ctx, rollout['id'])
        self.assertEqual([], db_rollouts.create_rollout_upgrades(
            self.ctx, rollout, targets, self.reconciler.owner))
        self.assertEqual([], self.upgrades(rollout['id']))

    def test_agent_deadline_times_out_and_a_retry_follows(self):
        rollout = self.create(per_agent_retries=1, max_in_flight=1)
        self.reconciler.run(self.ctx)
        later = timeutils.utcnow() + datetime.timedelta(seconds=61)
        with mock.patch.object(timeutils, 'utcnow', return_value=later):
            self.reconciler.run(self.ctx)
        # No retry before the agent says which version it runs.
        self.assertEqual(1, len(self.upgrades(rollout['id'])))
        heard = later + datetime.timedelta(seconds=1)
        with mock.patch.object(timeutils, 'utcnow', return_value=heard):
            db_agents.register_agent(self.ctx, self.ids[0],
                                     {'guest_version': 'v1.0.0'})
            self.reconciler.run(self.ctx)
        found = sorted(self.upgrades(rollout['id']),
                       key=lambda u: u['created_at'])
        self.assertEqual([(self.ids[0], states.TIMED_OUT),
                          (self.ids[0], states.SENT)],
                         [(u['instance_id'], u['status']) for u in found])
        dispatches = db_rollouts.list_rollout_dispatches(self.ctx,
                                                         rollout['id'])
        self.assertEqual([1, 2], [d['attempt'] for d in dispatches])

    def test_upgrade_of_a_conductor_killed_before_its_cast_is_sent(self):
        rollout = self.create(max_in_flight=1)

        class Killed(BaseException):
            """kill -9 of the conductor, as far as the pass can tell."""

        with mock.patch.object(self.reconciler.agent_api, 'upgrade_many',
                               side_effect=Killed):
            self.assertRaises(Killed, self.reconciler.run, self.ctx)
        [upgrade] = self.upgrades(rollout['id'])
        self.assertEqual(states.PENDING, upgrade['status'])
        # Another conductor's pass, once it is due: not its agent_deadline.
        due = timeutils.utcnow() + datetime.timedelta(
            seconds=self.conf.conductor.resend_interval + 1)
        with mock.patch.object(timeutils, 'utcnow', return_value=due):
            sent = resends.send_unclaimed_upgrades(
                self.ctx, reconciler.Reconciler('host-b').agent_api)
        self.assertEqual([upgrade['id']], sent)
        upgrade = db_upgrades.get_upgrade(self.ctx, upgrade['id'],
                                          with_events=True)
        self.assertEqual((states.PENDING, 2), (upgrade['status'],
                                               upgrade['send_count']))
        self.assertEqual('Sent to the agent again (send 2): not claimed '
                         'since it was last sent.',
                         upgrade['events'][-1]['detail'])

    def test_waits_for_start_at(self):
        start_at = timeutils.utcnow() + datetime.timedelta(seconds=600)
        rollout = self.create(start_at=start_at)
        self.assertEqual(rs.PENDING, rollout['status'])
        self.reconciler.run(self.ctx)
        self.assertEqual([], self.upgrades(rollout['id']))
        later = start_at + datetime.timedelta(seconds=1)
        with mock.patch.object(timeutils, 'utcnow', return_value=later):
            self.reconciler.run(self.ctx)
        self.assertEqual(rs.RUNNING,
                         db_rollouts.get_rollout(self.ctx, rollout['id'])[
                             'status'])
        self.assertEqual(2, len(self.upgrades(rollout['id'])))

    def test_a_cast_that_cannot_work_fails_the_attempt(self):
        rollout = self.create(max_in_flight=1, max_failures=6)
        with mock.patch.object(
                self.reconciler.agent_api, '_cast_upgrade',
                side_effect=messaging.RPCVersionCapError('1.3', '1.0')):
            self.reconciler.run(self.ctx)
        upgrade, = self.upgrades(rollout['id'])
        self.assertEqual(states.FAILED, upgrade['status'])
        self.assertIn('RPCVersionCapError: ', upgrade['status_detail'])

    def test_a_broker_out_of_reach_leaves_the_attempt_to_the_resends(self):
        # A broker restart during a pass once failed its attempts, which
        # could pause the rollout.
        rollout = self.create(max_in_flight=1, max_failures=0)
        with mock.patch.object(
                self.reconciler.agent_api, '_cast_upgrade',
                side_effect=messaging.MessageDeliveryFailure('down')):
            self.reconciler.run(self.ctx)
        upgrade, = self.upgrades(rollout['id'])
        self.assertEqual(states.SENT, upgrade['status'])
        self.assertEqual(
            'Not sent: the messaging server could not be reached '
            '(MessageDeliveryFailure: down). It is sent again until the '
            'agent claims it.', upgrade['status_detail'])
        self.assertEqual(rs.RUNNING, db_rollouts.get_rollout(
            self.ctx, rollout['id'])['status'])
        due = timeutils.utcnow() + datetime.timedelta(
            seconds=self.conf.conductor.resend_interval + 1)
        with mock.patch.object(timeutils, 'utcnow', return_value=due):
            sent = resends.send_unclaimed_upgrades(
                self.ctx, self.reconciler.agent_api)
        self.assertEqual([upgrade['id']], sent)

    def test_the_older_rollout_owns_a_late_agent(self):
        first = self.create(selector={'group': 'blue'})
        # No agent has the label yet: no conflict at creation.
        second = self.create(selector={'labels': {'colour': 'green'}})
        late = uuidutils.generate_uuid()
        db_agents.register_agent(self.ctx, late, {
            'guest_version': 'v1.0.0',
            'labels': {'group': 'blue', 'colour': 'green'}})
        self.assertEqual([], rollouts.targets(
            self.ctx, db_rollouts.get_rollout(self.ctx, second['id'])))
        self.assertIn(late, [a['instance_id'] for a in rollouts.targets(
            self.ctx, db_rollouts.get_rollout(self.ctx, first['id']))])
        # The same from the active rollouts a pass read once for all.
        active = db_rollouts.list_rollouts_in(self.ctx, rs.ACTIVE_STATES)
        read = {r['id']: r for r in active}
        self.assertEqual([], rollouts.targets(self.ctx, read[second['id']],
                                              active))
        self.assertEqual(
            rollouts.targets(self.ctx, first),
            rollouts.targets(self.ctx, read[first['id']], active))
        # Once the first ended, the second may have it.
        rollouts.abort_rollout(self.ctx, first['id'])
        self.assertEqual([late], [a['instance_id'] for a in rollouts.targets(
            self.ctx, db_rollouts.get_rollout(self.ctx, second['id']))])
