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

"""Rollouts on a three-node RabbitMQ cluster that loses a node.

Every service of ours (the conductor, the simulated agents, this process
as the API) takes the three nodes in its ``transport_url`` and declares
its queues as quorum queues (``rabbit_quorum_queue = true``), as OpenStack
recommends on a RabbitMQ cluster. Mid-rollout the test kills with SIGKILL
the node holding the leader of a queue: the conductors' queue (in every
run), or the one leading the most queues of agents still waiting for
their upgrade (only with ``TROVE_UPGRADE_TEST_SLOW_CLUSTER=1``: booting a
cluster costs a minute of CI). Nothing may be lost, each upgrade must end
in its right state, and every claim and report must be in the database
within 5 s of the node's loss, by the times the agents and the database
recorded.
"""

import collections
import datetime
import os

from oslo_utils import timeutils
import testtools
from testtools import content

from trove_upgrade.common import rollout_states as rs
from trove_upgrade.common import rpc_interface
from trove_upgrade.common import states
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.tests.functional import rabbit
from trove_upgrade.tests.functional import rabbit_cluster
from trove_upgrade.tests.functional.rollouts import test_rollouts

SLOW = os.environ.get('TROVE_UPGRADE_TEST_SLOW_CLUSTER') == '1'
# Seconds within which a claim or report reaches the database after the
# node's loss (or after it is sent, when sent later).
REPORT_BOUND = 5
# What the database records for each message an agent sends.
RECORDED_AS = {'start_upgrade': states.DOWNLOADING}
AGENTS = 60
FAILING = 2


def _utc(unix_time):
    return datetime.datetime.fromtimestamp(
        unix_time, datetime.timezone.utc).replace(tzinfo=None)


class TestNodeLoss(test_rollouts.RolloutTestCase):

    def rabbit_fixture(self):
        self.cluster = self.useFixture(rabbit_cluster.RabbitMQCluster())
        return rabbit.RabbitMQ(self.cluster.url, quorum_queues=True)

    def start_rollout(self):
        """One conductor, 60 agents (2 failing), a rollout under way."""
        self.fleet.start_conductor()
        blue = []
        for _ in range(3):
            blue += self.fleet.start_agents(
                AGENTS // 3, fail_file=self.fail_file, install_seconds=1)
        self.failing = sorted(blue)[-FAILING:]
        self.fail(self.failing)
        self.blue = blue
        rollout = self.create(max_in_flight=6, max_failures=FAILING)
        test_rollouts.wait_until(
            lambda: len(self.upgrades(rollout['id'])) >= 12,
            'twelve upgrades to be dispatched')
        return rollout

    def kill(self, node):
        self.cluster.kill(node)
        return timeutils.utcnow()

    def check_nothing_lost(self, rollout, killed_at):
        done = self.wait_for_status(rollout['id'], rs.COMPLETED, rs.PAUSED)
        self.addDetail('sends', content.text_content('\n'.join(
            '%s %s %s %s' % (_utc(t).time(), i, u, w)
            for t, i, u, w in self.fleet.sends())))
        self.addDetail('killed-at', content.text_content(str(killed_at)))
        self.assertEqual(
            (rs.COMPLETED, '%d agent(s) succeeded, 0 already current, '
                           '%d failed.' % (AGENTS - FAILING, FAILING)),
            (done['status'], done['status_detail']))
        # One upgrade per agent, in its right state, and one granted claim.
        expected = {i: [states.FAILED if i in self.failing
                        else states.SUCCESS] for i in self.blue}
        self.assertEqual(expected, dict(self.statuses(rollout['id'])))
        self.assertEqual({i: 1 for i in self.blue},
                         {i: self.fleet.claims()[i] for i in self.blue})
        self.assertInFlightAtMost(rollout['id'], 6)
        self.assertReportsInTime(rollout, killed_at)

    def assertReportsInTime(self, rollout, killed_at):
        """Each claim and report is recorded within the bound.

        Measured on the recorded times: when the agent first sent it, when
        the database recorded it, when the node was killed.
        """
        recorded = {}
        for upgrade in self.upgrades(rollout['id']):
            events = db_upgrades.get_upgrade(self.admin, upgrade['id'],
                                             with_events=True)['events']
            for event in events:
                if event['source'] == 'agent':
                    recorded.setdefault((upgrade['id'], event['to_state']),
                                        event['created_at'])
        bound = datetime.timedelta(seconds=REPORT_BOUND)
        late = []
        worst = datetime.timedelta(0)
        sent_after_loss = 0
        for when, instance_id, upgrade_id, what in self.fleet.sends():
            if what == 'received':
                continue
            state = RECORDED_AS.get(what, what)
            at = recorded.get((upgrade_id, state))
            self.assertIsNotNone(at, 'the %s of %s (%s) was never recorded'
                                 % (what, upgrade_id, instance_id))
            sent = _utc(when)
            sent_after_loss += sent >= killed_at
            worst = max(worst, at - max(sent, killed_at))
            if at - max(sent, killed_at) > bound:
                late.append((instance_id, what, str(sent), str(at)))
        self.addDetail('slowest-after-loss', content.text_content(
            '%.3f s' % worst.total_seconds()))
        self.assertEqual([], late)
        # The rollout ran on across the loss: the bound was put to work.
        self.assertGreater(sent_after_loss, 10)

    def test_conductors_queue_leader_killed(self):
        rollout = self.start_rollout()
        node = self.cluster.leader_of(self.rabbit.conductor_topic)
        killed_at = self.kill(node)
        self.check_nothing_lost(rollout, killed_at)
        # The queue lived on: another node leads it.
        self.assertNotEqual(
            node.name,
            self.cluster.leader_of(self.rabbit.conductor_topic).name)

    @testtools.skipUnless(SLOW, 'set TROVE_UPGRADE_TEST_SLOW_CLUSTER=1')
    def test_agents_queues_leader_killed(self):
        rollout = self.start_rollout()
        dispatched = {u['instance_id'] for u in self.upgrades(rollout['id'])}
        waiting = {rpc_interface.agent_topic(i) for i in self.blue
                   if i not in dispatched}
        leading = collections.Counter(
            node.name for queue, node in self.cluster.quorum_leaders().items()
            if any(queue.endswith(topic) for topic in waiting))
        self.assertTrue(leading, 'no agent waiting for its upgrade')
        name = leading.most_common(1)[0][0]
        [node] = [n for n in self.cluster.nodes if n.name == name]
        killed_at = self.kill(node)
        self.check_nothing_lost(rollout, killed_at)
