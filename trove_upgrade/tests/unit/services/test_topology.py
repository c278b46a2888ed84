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

"""Trove's sets in a rollout's plan: one member at a time, replicas first."""

from unittest import mock

from trove_upgrade.common import rollout_states as rs
from trove_upgrade.common import states
from trove_upgrade.services import rollout_plan
from trove_upgrade.services import rollouts
from trove_upgrade.services import topology
from trove_upgrade.tests import base
from trove_upgrade.tests.unit.services import test_rollout_plan as test_plan

# The documented example fleet: set A (primary A0, replicas A1 and A2, and
# A3 a replica of A2), set B (primary B0, replica B1), cluster C (C0-C2),
# singles S0 and S1.
A0, A1, A2, A3, B0, B1, C0, C1, C2, S0, S1 = (
    '%s-0000-0000-0000-000000000000' % name for name in (
        'a0', 'a1', 'a2', 'a3', 'b0', 'b1', 'c0', 'c1', 'c2', 's0', 's1'))
ROWS = [(A1, A0, None), (A2, A0, None), (A3, A2, None), (B1, B0, None),
        (C2, None, 'cluster-c'), (C0, None, 'cluster-c'),
        (C1, None, 'cluster-c')]
FLEET = [A0, A1, A2, A3, B0, B1, C0, C1, C2, S0, S1]


def agents(ids=FLEET):
    return [{'instance_id': i, 'guest_version': 'v1.0.0',
             'last_heartbeat_at': test_plan.HEARD} for i in sorted(ids)]


def plan(dispatches=(), busy=(), rows=ROWS, **values):
    values.setdefault('max_in_flight', 20)
    return rollout_plan.plan(test_plan.rollout(**values), agents(),
                             list(dispatches), set(busy),
                             topology=topology.Topology(rows))


def sent(found):
    return sorted(i for i, _attempt, _canary in found.dispatch)


class TestTopology(base.TestCase):

    def test_sets_and_their_order(self):
        found = topology.Topology(ROWS)
        self.assertEqual([A3, A1, A2, A0], [
            m.instance_id for m in found.members((topology.REPLICATION, A0))])
        self.assertEqual(
            [topology.REPLICA] * 3 + [topology.PRIMARY],
            [m.role for m in found.members((topology.REPLICATION, A0))])
        self.assertEqual([C0, C1, C2], [
            m.instance_id for m in found.members((topology.CLUSTER,
                                                  'cluster-c'))])
        self.assertEqual((topology.REPLICATION, A0), found.set_of(A3))
        self.assertIsNone(found.set_of(S0))

    def test_a_cycle_ends(self):
        found = topology.Topology([(A0, A1, None), (A1, A0, None)])
        self.assertEqual(2, len(found.members(found.set_of(A0))))

    def test_empty_without_trove(self):
        with mock.patch.object(topology.trove_db, 'configured',
                               return_value=False):
            self.assertIs(topology.EMPTY, topology.read())
        self.assertFalse(topology.EMPTY)


class TestPlanWithTopology(base.TestCase):

    def test_first_pass_sends_the_first_of_each_set_and_the_singles(self):
        found = plan()
        self.assertEqual(sorted([A3, B1, C0, S0, S1]), sent(found))
        self.assertEqual(
            [(topology.CLUSTER, 'cluster-c', [C0, C1, C2]),
             (topology.REPLICATION, A0, [A3, A1, A2, A0]),
             (topology.REPLICATION, B0, [B1, B0])],
            [(s['kind'], s['id'], [m['instance_id'] for m in s['members']])
             for s in found.sets])

    def test_one_member_in_flight_per_set(self):
        found = plan([test_plan.dispatch(A3, states.SENT),
                      test_plan.dispatch(C0, states.SENT)])
        self.assertEqual(sorted([B1, S0, S1]), sent(found))

    def test_anyones_upgrade_closes_the_set(self):
        # B0's agent is upgraded by someone else: B1 waits.
        self.assertNotIn(B1, sent(plan(busy=[B0])))

    def test_primary_last(self):
        done = [test_plan.dispatch(i, states.SUCCESS)
                for i in (A3, A1, B1, C0)]
        self.assertEqual(sorted([A2, B0, C1, S0, S1]), sent(plan(done)))
        done += [test_plan.dispatch(A2, states.SUCCESS)]
        self.assertIn(A0, sent(plan(done)))

    def test_a_failure_holds_its_set(self):
        found = plan([test_plan.dispatch(A3, states.FAILED)],
                     max_failures=5)
        self.assertEqual(sorted([B1, C0, S0, S1]), sent(found))
        self.assertEqual({A1: rs.AGENT_HELD, A2: rs.AGENT_HELD,
                          A0: rs.AGENT_HELD},
                         {i: found.agents[i] for i in (A1, A2, A0)})
        self.assertEqual(3, found.counters[rs.AGENT_HELD])

    def test_without_hold_the_set_goes_on(self):
        found = plan([test_plan.dispatch(A3, states.FAILED)],
                     max_failures=5, hold_set_on_failure=False)
        self.assertIn(A1, sent(found))
        self.assertEqual(0, found.counters[rs.AGENT_HELD])

    def test_held_agents_settle_the_rollout(self):
        done = [test_plan.dispatch(i, states.SUCCESS)
                for i in FLEET if i not in (A3, A1, A2, A0)]
        found = plan(done + [test_plan.dispatch(A3, states.FAILED)],
                     max_failures=5)
        self.assertEqual(
            (rollout_plan.COMPLETE, '7 agent(s) succeeded, 0 already '
                                    'current, 1 failed, 3 held by a failed '
                                    'member of their set.'),
            (found.action, found.reason))

    def test_a_retry_goes_before_the_rest_of_its_set(self):
        found = plan([test_plan.dispatch(A3, states.FAILED)],
                     per_agent_retries=1)
        self.assertIn((A3, 2, False), found.dispatch)
        self.assertNotIn(A1, sent(found))

    def test_failover_changes_the_order(self):
        # A1 promoted: A0 and A2 now replicate from it, A3 still from A2.
        promoted = [(A0, A1, None), (A2, A1, None), (A3, A2, None)]
        done = [test_plan.dispatch(A3, states.SUCCESS),
                test_plan.dispatch(A1, states.SUCCESS)]
        self.assertIn(A2, sent(plan(done)))
        # A1 was upgraded already; A0, now a replica, goes before A1 would.
        found = plan([test_plan.dispatch(A3, states.SUCCESS)],
                     rows=promoted)
        self.assertIn(A0, sent(found))
        self.assertNotIn(A1, sent(found))

    def test_canaries_follow_the_order(self):
        found = plan(canary=2)
        self.assertEqual([(A3, 1, True), (B1, 1, True)], found.dispatch)

    def test_off_when_the_rollout_says_so(self):
        found = rollout_plan.plan(
            test_plan.rollout(max_in_flight=20, order_by_topology=False),
            agents(), [], set(),
            topology=rollouts.followed_topology(
                {'order_by_topology': False}, topology.Topology(ROWS)))
        self.assertEqual(sorted(FLEET), sent(found))
        self.assertIsNone(found.sets)
