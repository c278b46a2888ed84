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

"""The rollout rules as a pure function: thresholds, canaries, retries."""

import datetime

from trove_upgrade.common import rollout_states as rs
from trove_upgrade.common import states
from trove_upgrade.services import rollout_plan
from trove_upgrade.tests import base

IDS = ['%08d-0000-0000-0000-000000000000' % n for n in range(10)]
T0 = datetime.datetime(2026, 11, 29, 18, 0, 0)
# Every agent heartbeated after the attempts below ended, unless a test
# says otherwise.
HEARD = T0 + datetime.timedelta(seconds=1)


def rollout(**overrides):
    values = {'instance_version': 'v2.0.0', 'canary': 0,
              'max_in_flight': 3, 'max_in_flight_kind': 'count',
              'max_failures': 0, 'max_failures_kind': 'count',
              'per_agent_retries': 0, 'failures_acknowledged': 0}
    values.update(overrides)
    return values


def agents(count, version='v1.0.0'):
    return [{'instance_id': i, 'guest_version': version,
             'last_heartbeat_at': HEARD} for i in IDS[:count]]


def dispatch(instance_id, status, attempt=1, canary=False):
    return {'instance_id': instance_id, 'attempt': attempt,
            'canary': canary, 'status': status, 'finished_at': T0}


class TestThresholds(base.TestCase):
    """The documented table of boundary examples, row by row."""

    def test_in_flight_limit(self):
        for value, kind, targets, limit in (
                (3, 'count', 10, 3),
                (3, 'count', 0, 3),
                (10, 'percent', 10, 1),
                (10, 'percent', 11, 2),    # 1.1 rounds up
                (10, 'percent', 20, 2),
                (10, 'percent', 21, 3),
                (25, 'percent', 2000, 500),
                (1, 'percent', 5, 1),      # never below 1
                (100, 'percent', 7, 7),
                (50, 'percent', 0, 1)):
            self.assertEqual(limit, rollout_plan.in_flight_limit(
                rollout(max_in_flight=value, max_in_flight_kind=kind),
                targets), (value, kind, targets))

    def test_failure_tolerance(self):
        for value, kind, targets, tolerance in (
                (0, 'count', 10, 0),
                (2, 'count', 10, 2),
                (10, 'percent', 10, 1),
                (10, 'percent', 19, 1),    # 1.9 rounds down
                (10, 'percent', 20, 2),
                (10, 'percent', 9, 0),     # 0.9: the first failure pauses
                (5, 'percent', 2000, 100),
                (0, 'percent', 50, 0),
                (100, 'percent', 7, 7)):
            self.assertEqual(tolerance, rollout_plan.failure_tolerance(
                rollout(max_failures=value, max_failures_kind=kind),
                targets), (value, kind, targets))

    def test_pauses_when_failures_exceed_not_when_they_reach(self):
        failed = [dispatch(IDS[i], states.FAILED) for i in range(2)]
        reached = rollout_plan.plan(rollout(max_failures=2), agents(10),
                                    failed, set())
        self.assertIsNone(reached.action)
        self.assertEqual(2, reached.counters[rs.AGENT_FAILED])
        exceeded = rollout_plan.plan(
            rollout(max_failures=2), agents(10),
            failed + [dispatch(IDS[2], states.FAILED)], set())
        self.assertEqual((rollout_plan.PAUSE, [],
                          '3 failed agent(s) exceed the tolerance of 2.'),
                         (exceeded.action, exceeded.dispatch,
                          exceeded.reason))

    def test_percent_boundary_on_twenty_agents(self):
        # 10% of 20 tolerates 2: the third failure pauses.
        for failures, action in ((2, None), (3, rollout_plan.PAUSE)):
            plan = rollout_plan.plan(
                rollout(max_failures=10, max_failures_kind='percent'),
                agents(10) + [{'instance_id': 'z%d' % i,
                               'guest_version': 'v1.0.0',
                               'last_heartbeat_at': HEARD}
                              for i in range(10)],
                [dispatch(IDS[i], states.FAILED) for i in range(failures)],
                set())
            self.assertEqual(action, plan.action, failures)

    def test_every_unsuccessful_end_counts(self):
        for status in (states.FAILED, states.ROLLED_BACK, states.TIMED_OUT,
                       states.CANCELLED):
            plan = rollout_plan.plan(rollout(), agents(3),
                                     [dispatch(IDS[0], status)], set())
            self.assertEqual(rollout_plan.PAUSE, plan.action, status)

    def test_acknowledged_failures_do_not_count(self):
        failed = [dispatch(IDS[i], states.FAILED) for i in range(3)]
        plan = rollout_plan.plan(rollout(max_failures=1,
                                         failures_acknowledged=3),
                                 agents(6), failed, set())
        self.assertIsNone(plan.action)
        plan = rollout_plan.plan(rollout(max_failures=1,
                                         failures_acknowledged=2),
                                 agents(6), failed, set())
        self.assertIsNone(plan.action)
        plan = rollout_plan.plan(rollout(max_failures=0,
                                         failures_acknowledged=2),
                                 agents(6), failed, set())
        self.assertEqual(rollout_plan.PAUSE, plan.action)


class TestDispatch(base.TestCase):

    def test_never_more_than_max_in_flight(self):
        plan = rollout_plan.plan(rollout(max_in_flight=3), agents(10),
                                 [dispatch(IDS[0], states.SENT)], set())
        self.assertEqual([(IDS[1], 1, False), (IDS[2], 1, False)],
                         plan.dispatch)
        self.assertEqual((1, 3), (plan.counters['in_flight'],
                                  plan.counters['in_flight_limit']))
        full = rollout_plan.plan(
            rollout(max_in_flight=2), agents(10),
            [dispatch(IDS[0], states.SENT),
             dispatch(IDS[1], states.INSTALLING)], set())
        self.assertEqual([], full.dispatch)

    def test_agents_at_the_version_are_done_without_an_upgrade(self):
        fleet = agents(2) + [{'instance_id': IDS[2],
                              'guest_version': '2.0.0',
                              'last_heartbeat_at': HEARD}]
        plan = rollout_plan.plan(rollout(), fleet, [], set())
        self.assertEqual([(IDS[0], 1, False), (IDS[1], 1, False)],
                         plan.dispatch)
        self.assertEqual(rs.AGENT_CURRENT, plan.agents[IDS[2]])
        done = rollout_plan.plan(rollout(), agents(3, 'v2.0.0'), [], set())
        self.assertEqual(
            (rollout_plan.COMPLETE,
             '0 agent(s) succeeded, 3 already current, 0 failed.'),
            (done.action, done.reason))

    def test_selecting_nothing_waits_instead_of_completing(self):
        plan = rollout_plan.plan(rollout(), [], [], set())
        self.assertEqual(
            (rollout_plan.WAIT, rollout_plan.NOTHING_SELECTED, []),
            (plan.action, plan.reason, plan.dispatch))
        self.assertEqual(0, plan.counters['targets'])
        # Agents that were dispatched to and left the selection: done.
        gone = rollout_plan.plan(rollout(), [],
                                 [dispatch(IDS[0], states.SUCCESS)], set())
        self.assertEqual(rollout_plan.COMPLETE, gone.action)

    def test_busy_agents_are_skipped(self):
        plan = rollout_plan.plan(rollout(), agents(3), [], {IDS[0]})
        self.assertEqual([(IDS[1], 1, False), (IDS[2], 1, False)],
                         plan.dispatch)

    def test_retries_come_first_with_the_next_attempt(self):
        history = [dispatch(IDS[3], states.FAILED),
                   dispatch(IDS[4], states.FAILED),
                   dispatch(IDS[4], states.TIMED_OUT, attempt=2)]
        plan = rollout_plan.plan(rollout(per_agent_retries=1, max_failures=5),
                                 agents(6), history, set())
        self.assertEqual(rs.AGENT_RETRYING, plan.agents[IDS[3]])
        self.assertEqual(rs.AGENT_FAILED, plan.agents[IDS[4]])
        self.assertEqual([(IDS[3], 2, False), (IDS[0], 1, False),
                          (IDS[1], 1, False)], plan.dispatch)

    def test_a_timeout_waits_for_the_agents_word(self):
        fleet = agents(2)
        fleet[0]['last_heartbeat_at'] = T0 - datetime.timedelta(seconds=1)
        history = [dispatch(IDS[0], states.TIMED_OUT)]
        soon = T0 + datetime.timedelta(seconds=10)
        plan = rollout_plan.plan(rollout(per_agent_retries=1), fleet, history,
                                 set(), now=soon, down_time=60)
        # Maybe it is still at work: in flight, neither retried nor failed.
        self.assertEqual(rs.AGENT_IN_PROGRESS, plan.agents[IDS[0]])
        self.assertEqual([(IDS[1], 1, False)], plan.dispatch)
        # Its heartbeat says it runs the old version: retried.
        fleet[0]['last_heartbeat_at'] = T0 + datetime.timedelta(seconds=2)
        plan = rollout_plan.plan(rollout(per_agent_retries=1), fleet, history,
                                 set(), now=soon, down_time=60)
        self.assertEqual(rs.AGENT_RETRYING, plan.agents[IDS[0]])
        # Its heartbeat says it runs the new one: done, not retried.
        fleet[0]['guest_version'] = 'v2.0.0'
        plan = rollout_plan.plan(rollout(per_agent_retries=1), fleet, history,
                                 set(), now=soon, down_time=60)
        self.assertEqual(rs.AGENT_CURRENT, plan.agents[IDS[0]])

    def test_a_silent_agent_is_judged_after_the_down_time(self):
        fleet = agents(1)
        fleet[0]['last_heartbeat_at'] = None
        history = [dispatch(IDS[0], states.TIMED_OUT)]
        for seconds, state in ((60, rs.AGENT_IN_PROGRESS),
                               (61, rs.AGENT_FAILED)):
            plan = rollout_plan.plan(
                rollout(), fleet, history, set(),
                now=T0 + datetime.timedelta(seconds=seconds), down_time=60)
            self.assertEqual(state, plan.agents[IDS[0]], seconds)

    def test_success_after_a_retry(self):
        history = [dispatch(IDS[0], states.FAILED),
                   dispatch(IDS[0], states.SUCCESS, attempt=2)]
        plan = rollout_plan.plan(rollout(per_agent_retries=1), agents(1),
                                 history, set())
        self.assertEqual((rollout_plan.COMPLETE, rs.AGENT_SUCCEEDED),
                         (plan.action, plan.agents[IDS[0]]))

    def test_completes_with_failures_within_tolerance(self):
        history = [dispatch(IDS[0], states.FAILED),
                   dispatch(IDS[1], states.SUCCESS)]
        plan = rollout_plan.plan(rollout(max_failures=1), agents(2), history,
                                 set())
        self.assertEqual(
            (rollout_plan.COMPLETE,
             '1 agent(s) succeeded, 0 already current, 1 failed.'),
            (plan.action, plan.reason))

    def test_in_progress_is_not_complete(self):
        plan = rollout_plan.plan(rollout(), agents(1),
                                 [dispatch(IDS[0], states.DOWNLOADING)], set())
        self.assertEqual((None, []), (plan.action, plan.dispatch))


class TestCanaries(base.TestCase):

    def test_canaries_first_in_instance_order(self):
        plan = rollout_plan.plan(rollout(canary=2, max_in_flight=5), agents(6),
                                 [], set())
        self.assertEqual([(IDS[0], 1, True), (IDS[1], 1, True)],
                         plan.dispatch)

    def test_canaries_respect_max_in_flight(self):
        plan = rollout_plan.plan(rollout(canary=4, max_in_flight=3), agents(6),
                                 [], set())
        self.assertEqual([(IDS[0], 1, True), (IDS[1], 1, True),
                          (IDS[2], 1, True)], plan.dispatch)
        more = rollout_plan.plan(
            rollout(canary=4, max_in_flight=3), agents(6),
            [dispatch(IDS[i], states.SUCCESS, canary=True)
             for i in range(3)], set())
        self.assertEqual([(IDS[3], 1, True)], more.dispatch)

    def test_the_rest_waits_for_every_canary(self):
        history = [dispatch(IDS[0], states.SUCCESS, canary=True),
                   dispatch(IDS[1], states.INSTALLING, canary=True)]
        plan = rollout_plan.plan(rollout(canary=2, max_in_flight=5), agents(6),
                                 history, set())
        self.assertEqual([], plan.dispatch)
        history[1] = dispatch(IDS[1], states.SUCCESS, canary=True)
        plan = rollout_plan.plan(rollout(canary=2, max_in_flight=5), agents(6),
                                 history, set())
        self.assertEqual([(IDS[i], 1, False) for i in range(2, 6)],
                         plan.dispatch)

    def test_a_failed_canary_pauses_whatever_the_tolerance(self):
        history = [dispatch(IDS[0], states.FAILED, canary=True),
                   dispatch(IDS[1], states.INSTALLING, canary=True)]
        plan = rollout_plan.plan(rollout(canary=2, max_failures=5), agents(6),
                                 history, set())
        self.assertEqual(
            (rollout_plan.PAUSE, '1 failed agent(s) exceed the tolerance of '
                                 '0 during the canary phase.'),
            (plan.action, plan.reason))

    def test_a_retried_canary_keeps_the_rest_waiting(self):
        history = [dispatch(IDS[0], states.FAILED, canary=True)]
        plan = rollout_plan.plan(rollout(canary=1, per_agent_retries=1),
                                 agents(3), history, set())
        self.assertEqual([(IDS[0], 2, True)], plan.dispatch)

    def test_resume_after_a_failed_canary_goes_on(self):
        history = [dispatch(IDS[0], states.FAILED, canary=True)]
        plan = rollout_plan.plan(
            rollout(canary=1, max_failures=5, failures_acknowledged=1),
            agents(3), history, set())
        self.assertEqual([(IDS[1], 1, False), (IDS[2], 1, False)],
                         plan.dispatch)

    def test_fewer_agents_than_canaries(self):
        plan = rollout_plan.plan(rollout(canary=5), agents(2), [], set())
        self.assertEqual([(IDS[0], 1, True), (IDS[1], 1, True)],
                         plan.dispatch)
        done = rollout_plan.plan(
            rollout(canary=5), agents(2),
            [dispatch(IDS[i], states.SUCCESS, canary=True)
             for i in range(2)], set())
        self.assertEqual(rollout_plan.COMPLETE, done.action)

    def test_a_late_agent_joins_after_the_canaries(self):
        history = [dispatch(IDS[0], states.SUCCESS, canary=True),
                   dispatch(IDS[1], states.SUCCESS)]
        plan = rollout_plan.plan(rollout(canary=1), agents(3), history, set())
        self.assertEqual([(IDS[2], 1, False)], plan.dispatch)


class TestOverlap(base.TestCase):

    def test_first_other_sharing_an_agent_and_what_it_shares(self):
        picks = {'a': [{'instance_id': 'i2'}, {'instance_id': 'i9'}],
                 'b': [{'instance_id': 'i3'}, {'instance_id': 'i1'}],
                 'c': [{'instance_id': 'i1'}]}
        others = [{'selector': s} for s in ('a', 'b', 'c')]
        other, shared = rollout_plan.first_overlap(
            {'i1', 'i3', 'i4'}, others, picks.get)
        self.assertIs(others[1], other)
        self.assertEqual(['i1', 'i3'], shared)

    def test_no_overlap(self):
        self.assertEqual((None, []), rollout_plan.first_overlap(
            {'i1'}, [{'selector': 'a'}], lambda s: [{'instance_id': 'i2'}]))

    def test_listed_shows_five_then_an_ellipsis(self):
        ids = ['i%d' % n for n in range(7)]
        self.assertEqual('i0, i1, i2, i3, i4, ...', rollout_plan.listed(ids))
        self.assertEqual('i0, i1', rollout_plan.listed(ids[:2]))
