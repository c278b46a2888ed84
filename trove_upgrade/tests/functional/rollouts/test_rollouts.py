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

"""Rollouts end to end: real conductors, RabbitMQ, simulated agents.

Each test runs real ``trove-upgrade-conductor`` processes with short
reconcile intervals, 50 or more simulated agents (real RPC consumers in
two or three processes) and creates rollouts through the business layer,
then checks what the database recorded and what the agents saw: every
granted claim is logged by the simulators, so an agent upgraded twice
shows there and as two upgrades in the database.
"""

import collections
import os
import time

import fixtures
from testtools import content

from tools.testbed import fleet as fleet_fixture
from trove_upgrade.common import context
from trove_upgrade.common import rollout_states as rs
from trove_upgrade.common import states
from trove_upgrade.db import rollouts as db_rollouts
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.services import agent_rpcapi
from trove_upgrade.services import rollouts
from trove_upgrade.tests import base
from trove_upgrade.tests.fixtures import database
from trove_upgrade.tests.functional import rabbit

WAIT_TIMEOUT = 150


def wait_until(predicate, what, timeout=WAIT_TIMEOUT):
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError('timed out waiting for %s' % what)
        time.sleep(0.2)


class RolloutTestCase(base.TestCase):

    conductor_options = {'rollout_interval': '0.3',
                         'rollout_lease_time': '3'}

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.database = self.useFixture(database.PostgresqlDatabase())
        self.rabbit = self.useFixture(self.rabbit_fixture())
        self.fleet = self.useFixture(fleet_fixture.Fleet(
            self.tmp, self.rabbit.options, self.database.url,
            self.conductor_options, heartbeat_interval=2,
            delete_queues=self.rabbit.shared))
        self.addCleanup(lambda: self.addDetail(
            'conductor-logs', content.text_content(self.fleet.logs())))
        self.admin = context.get_admin_context()
        self.fail_file = os.path.join(self.tmp, 'failing.txt')

    def rabbit_fixture(self):
        """The broker the fleet talks to: the shared RabbitMQ here."""
        return rabbit.RabbitMQ()

    def fail(self, instance_ids):
        with open(self.fail_file, 'w') as f:
            f.write('\n'.join(instance_ids) + '\n')

    def create(self, **values):
        defaults = {
            'name': 'test', 'instance_version': 'v2.0.0',
            'strategy': 'http', 'location': 'https://repo/agent.tar',
            'selector': {'group': 'blue'}, 'canary': 0,
            'max_in_flight': 10, 'max_in_flight_kind': 'count',
            'max_failures': 0, 'max_failures_kind': 'count',
            'per_agent_retries': 0, 'agent_deadline': 120}
        return rollouts.create_rollout(self.admin, dict(defaults, **values))

    def rollout(self, rollout_id):
        return db_rollouts.get_rollout(self.admin, rollout_id)

    def wait_for_status(self, rollout_id, *statuses):
        return wait_until(
            lambda: (lambda r: r if r['status'] in statuses else None)(
                self.rollout(rollout_id)),
            'rollout %s to be %s' % (rollout_id, ' or '.join(statuses)))

    def upgrades(self, rollout_id):
        found = db_upgrades.list_upgrades(self.admin,
                                          filters={'rollout_id': rollout_id})
        return sorted(found, key=lambda u: u['created_at'])

    def assertUpgradedOnce(self, rollout_id, instance_ids):
        """One granted claim and one upgrade per agent, all SUCCESS."""
        claims = self.fleet.claims()
        self.assertEqual({i: 1 for i in instance_ids},
                         {i: claims[i] for i in instance_ids})
        per_instance = collections.defaultdict(list)
        for upgrade in self.upgrades(rollout_id):
            per_instance[upgrade['instance_id']].append(upgrade['status'])
        self.assertEqual({i: [states.SUCCESS] for i in instance_ids},
                         {i: per_instance[i] for i in instance_ids})

    def statuses(self, rollout_id):
        """Each instance's upgrade statuses, oldest attempt first."""
        found = collections.defaultdict(list)
        for upgrade in self.upgrades(rollout_id):
            found[upgrade['instance_id']].append(upgrade['status'])
        return found

    def assertInFlightAtMost(self, rollout_id, limit):
        """At no recorded instant were more upgrades unfinished."""
        edges = []
        for upgrade in self.upgrades(rollout_id):
            edges.append((upgrade['created_at'], 1))
            edges.append((upgrade['finished_at'], -1))
        in_flight = peak = 0
        # At equal times an end comes before a start (-1 sorts first).
        for _when, step in sorted(edges):
            in_flight += step
            peak = max(peak, in_flight)
        self.assertLessEqual(peak, limit)
        return peak


class TestRollouts(RolloutTestCase):

    def test_completes_with_canaries_and_a_late_agent(self):
        self.fleet.start_conductor()
        blue = (self.fleet.start_agents(25) + self.fleet.start_agents(25))
        current = self.fleet.start_agents(3, guest_version='2.0.0')
        rollout = self.create(canary=3, max_in_flight=8)
        wait_until(lambda: len(self.upgrades(rollout['id'])) >= 20,
                   'twenty upgrades to be dispatched')
        # Hold the rollout while two more agents register, so that they
        # surely register while it is unfinished however fast it runs.
        rollouts.pause_rollout(self.admin, rollout['id'])
        late = self.fleet.start_agents(2)
        rollouts.resume_rollout(self.admin, rollout['id'])
        done = self.wait_for_status(rollout['id'], rs.COMPLETED)

        self.assertUpgradedOnce(rollout['id'], blue + late)
        self.assertEqual(0, sum(self.fleet.claims()[i] for i in current))
        self.assertEqual('52 agent(s) succeeded, 3 already current, '
                         '0 failed.', done['status_detail'])
        self.assertInFlightAtMost(rollout['id'], 8)
        # The three canaries, first in instance order, ended before any
        # other upgrade was created.
        dispatches = db_rollouts.list_rollout_dispatches(self.admin,
                                                         rollout['id'])
        canaries = sorted(d['instance_id'] for d in dispatches
                          if d['canary'])
        self.assertEqual(sorted(blue)[:3], canaries)
        upgrades = {u['instance_id']: u for u in self.upgrades(
            rollout['id'])}
        last_canary_end = max(upgrades[i]['finished_at'] for i in canaries)
        first_other = min(u['created_at'] for i, u in upgrades.items()
                          if i not in canaries)
        self.assertLessEqual(last_canary_end, first_other)
        # Each upgrade carries the rollout's tag and ends with the agent's
        # own final report.
        for upgrade in upgrades.values():
            self.assertEqual(rollout['id'], upgrade['rollout_id'])
        plan = rollouts.plan_for(self.admin, done)
        self.assertEqual((52, 3), (plan.counters[rs.AGENT_SUCCEEDED],
                                   plan.counters[rs.AGENT_CURRENT]))

    def test_failures_pause_exactly_past_the_tolerance(self):
        self.fleet.start_conductor()
        blue = (self.fleet.start_agents(25, fail_file=self.fail_file)
                + self.fleet.start_agents(25, fail_file=self.fail_file))
        failing = sorted(blue)[:3]
        self.fail(failing)
        # A tolerance of 3 runs on through 3 failed agents...
        tolerant = self.create(max_failures=3, max_in_flight=5)
        done = self.wait_for_status(tolerant['id'], rs.COMPLETED,
                                    rs.PAUSED)
        self.assertEqual(
            (rs.COMPLETED, '47 agent(s) succeeded, 0 already current, '
                           '3 failed.'),
            (done['status'], done['status_detail']))

        # ...a tolerance of 2 pauses at the third.
        strict = self.create(max_failures=2, max_in_flight=5,
                             instance_version='v3.0.0')
        paused = self.wait_for_status(strict['id'], rs.PAUSED)
        self.assertEqual('3 failed agent(s) exceed the tolerance of 2.',
                         paused['status_detail'])
        # Nothing more is dispatched: what was in flight ends, the rest
        # waits.
        wait_until(lambda: all(u['status'] in states.FINAL_STATES
                               for u in self.upgrades(strict['id'])),
                   'the upgrades in flight to end')
        plan = rollouts.plan_for(self.admin, self.rollout(strict['id']))
        self.assertEqual(3, plan.counters[rs.AGENT_FAILED])
        self.assertGreater(plan.counters[rs.AGENT_WAITING], 0)
        dispatched = len(self.upgrades(strict['id']))
        self.assertEqual(50 - plan.counters[rs.AGENT_WAITING], dispatched)
        self.assertLessEqual(
            max(u['created_at'] for u in self.upgrades(strict['id'])),
            paused['updated_at'])

        # Resuming acknowledges the three: the rest completes.
        self.fail([])
        rollouts.resume_rollout(self.admin, strict['id'])
        done = self.wait_for_status(strict['id'], rs.COMPLETED, rs.PAUSED)
        self.assertEqual(
            (rs.COMPLETED, 3, '47 agent(s) succeeded, 0 already current, '
                              '3 failed.'),
            (done['status'], done['failures_acknowledged'],
             done['status_detail']))
        self.assertInFlightAtMost(strict['id'], 5)

    def test_abort_stops_new_dispatch(self):
        self.fleet.start_conductor()
        blue = self.fleet.start_agents(25) + self.fleet.start_agents(25)
        rollout = self.create(max_in_flight=2)
        wait_until(lambda: len(self.upgrades(rollout['id'])) >= 6,
                   'six upgrades to be dispatched')
        aborted = rollouts.abort_rollout(self.admin, rollout['id'])
        wait_until(lambda: all(u['status'] in states.FINAL_STATES
                               for u in self.upgrades(rollout['id'])),
                   'the upgrades in flight to end')
        upgrades = self.upgrades(rollout['id'])
        self.assertLess(len(upgrades), len(blue))
        self.assertLessEqual(max(u['created_at'] for u in upgrades),
                             aborted['finished_at'])
        self.assertEqual(rs.ABORTED, self.rollout(rollout['id'])['status'])
        # Even another conductor finds nothing to do for it.
        self.fleet.start_conductor()
        self.assertEqual(len(upgrades), len(self.upgrades(rollout['id'])))


class TestConductorFailures(RolloutTestCase):

    def test_killed_conductor_resumes_without_double_dispatch(self):
        first = self.fleet.start_conductor()
        blue = self.fleet.start_agents(25) + self.fleet.start_agents(25)
        # Messages the killed conductor had taken from its queue are lost
        # with it: the agents send their claims and reports again, and an
        # upgrade whose report came too late is timed out by its deadline
        # and retried, unless the agent's heartbeat shows it at the
        # version already.
        rollout = self.create(max_in_flight=5, per_agent_retries=2,
                              agent_deadline=20)
        wait_until(lambda: len(self.upgrades(rollout['id'])) >= 15,
                   'fifteen upgrades to be dispatched')
        self.fleet.kill_conductor(first)
        self.fleet.start_conductor()
        done = self.wait_for_status(rollout['id'], rs.COMPLETED, rs.PAUSED)
        self.addDetail('upgrades', content.text_content('\n'.join(
            '%s %s %s' % (u['instance_id'], u['id'], [
                (e['created_at'].time().isoformat(), e['source'],
                 e['to_state']) for e in db_upgrades.get_upgrade(
                    self.admin, u['id'], with_events=True)['events']])
            for u in self.upgrades(rollout['id']))))
        self.addDetail('claims', content.text_content(
            self.fleet.claim_lines()))
        self.assertEqual(rs.COMPLETED, done['status'])
        # Every agent installed the version exactly once: one granted
        # claim each, none failed, and every one at the version.
        claims = self.fleet.claims()
        self.assertEqual({i: 1 for i in blue}, {i: claims[i] for i in blue})
        plan = rollouts.plan_for(self.admin, done)
        self.assertEqual(0, plan.counters[rs.AGENT_FAILED])
        self.assertEqual(50, plan.counters[rs.AGENT_SUCCEEDED]
                         + plan.counters[rs.AGENT_CURRENT])
        # A second attempt only where the first ended without SUCCESS.
        for instance_id, statuses in self.statuses(rollout['id']).items():
            self.assertLessEqual(statuses.count(states.SUCCESS), 1)
            self.assertNotIn(states.SUCCESS, statuses[:-1], instance_id)
        self.assertInFlightAtMost(rollout['id'], 5)

    def test_two_conductors_dispatch_each_agent_once(self):
        self.fleet.start_conductor()
        self.fleet.start_conductor()
        blue = (self.fleet.start_agents(20) + self.fleet.start_agents(20)
                + self.fleet.start_agents(20))
        rollout = self.create(max_in_flight=10)
        self.wait_for_status(rollout['id'], rs.COMPLETED)
        self.assertUpgradedOnce(rollout['id'], blue)
        self.assertInFlightAtMost(rollout['id'], 10)


class TestDatabaseOutage(RolloutTestCase):

    def test_claim_refused_while_the_database_is_away_is_sent_again(self):
        """The simulated agents try again, as real agents do.

        A conductor whose database is away answers a claim with
        DatabaseUnavailableError at once. The simulated agent took only a
        timeout for a reason to send again and gave the upgrade up, so a
        rollout running through a database outage dispatched a second
        upgrade to that agent. The upgrade here is recorded but never
        sent again by the conductor: only the agent's retry can finish
        it.
        """
        conductor = self.fleet.start_conductor()
        [instance_id] = self.fleet.start_agents(1)
        upgrade = db_upgrades.create_upgrade(self.admin, {
            'instance_id': instance_id, 'instance_version': 'v2.0.0',
            'strategy': 'http', 'location': 'https://repo/agent.tar'})
        self.addCleanup(self.database.allow_connections, True)
        self.database.allow_connections(False)
        self.database.terminate()
        # Sent unsealed on the fleet's exchange, as the fleet declares it.
        self.flags(require_sealed=False, group='conductor')
        self.flags(amqp_auto_delete=False, group='oslo_messaging_rabbit')
        agent_rpcapi.AgentAPI().upgrade_with_keys(self.admin, upgrade, [])
        refused = ('The start_upgrade message of instance %s failed, the '
                   'database is unavailable' % instance_id)

        def conductor_log():
            with open(conductor.log_path) as f:
                return f.read()
        wait_until(lambda: refused in conductor_log(),
                   'the conductor to refuse the claim')
        self.database.allow_connections(True)

        wait_until(lambda: db_upgrades.get_upgrade(
            self.admin, upgrade['id'])['status'] == states.SUCCESS,
            'the upgrade to succeed')
        self.assertEqual({instance_id: 1}, dict(self.fleet.claims()))
