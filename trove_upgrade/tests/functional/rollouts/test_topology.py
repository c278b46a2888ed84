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

"""A rollout follows Trove's replication sets and clusters, and failovers.

Trove's database has the schema the real ``trove-manage db_sync`` of a
Trove release creates (``trove_db``, on MariaDB), holding two replication
sets, a three-member cluster and singles as Trove records them; ours is
on PostgreSQL; a real conductor dispatches to simulated agents over the
real RabbitMQ. The checks read the recorded history: each upgrade from
its creation (before it is sent) to its end.
"""

import datetime
import os
import signal

from oslo_utils import timeutils

from trove_upgrade.common import rollout_states as rs
from trove_upgrade.db import trove as trove_db_api
from trove_upgrade.services import rollouts
from trove_upgrade.services import topology
from trove_upgrade.tests.functional.rollouts import test_rollouts
from trove_upgrade.tests.functional.trove import trove_db


class TestTopologyOrder(test_rollouts.RolloutTestCase):

    def setUp(self):
        super().setUp()
        self.trove = self.useFixture(trove_db.TroveDatabase())
        self.flags(group='trove', connection=self.trove.url)
        self.addCleanup(trove_db_api.dispose)
        self.fleet.rabbit_options = dict(
            self.fleet.rabbit_options, trove={'connection': self.trove.url})

    def _fleet(self):
        """Agents and Trove's records of the example fleet.

        Set A is held by a process of its own, stopped on demand: its
        first replica in upgrade order and the other replica are in it.
        """
        self.fleet.start_conductor()
        first, other = self.fleet.start_agents(2)
        self.stalled_process = self.fleet.agent_processes[-1]
        rest = self.fleet.start_agents(10)

        def add(name, **kwargs):
            # The simulated agents seal nothing: their instances are those
            # of a Trove with enable_secure_rpc_messaging off, without keys.
            return self.trove.add_instance(name, secure_rpc=False, **kwargs)

        fleet = {'a_primary': rest[0], 'a_first': first, 'a_other': other,
                 'b_primary': rest[1], 'b_replica': rest[2],
                 'cluster': rest[3:6], 'singles': rest[6:]}
        add('a0', instance_id=fleet['a_primary'])
        add('a1', instance_id=first, slave_of_id=fleet['a_primary'])
        add('a2', instance_id=other, slave_of_id=fleet['a_primary'])
        add('b0', instance_id=fleet['b_primary'])
        add('b1', instance_id=fleet['b_replica'],
            slave_of_id=fleet['b_primary'])
        cluster_id = self.trove.add_cluster('c')
        for n, instance_id in enumerate(fleet['cluster']):
            add('c%d' % n, instance_id=instance_id, cluster_id=cluster_id)
        for n, instance_id in enumerate(fleet['singles']):
            add('s%d' % n, instance_id=instance_id)
        fleet['cluster_id'] = cluster_id
        return fleet

    def _stop(self, process):
        os.killpg(process.pid, signal.SIGSTOP)
        self.addCleanup(os.killpg, process.pid, signal.SIGCONT)

    def _history(self, rollout_id):
        """``{instance_id: (created_at, finished_at)}`` of each upgrade."""
        found = {}
        for upgrade in self.upgrades(rollout_id):
            self.assertNotIn(upgrade['instance_id'], found)
            found[upgrade['instance_id']] = (upgrade['created_at'],
                                             upgrade['finished_at'])
        return found

    def assertOneAtATime(self, history, order):
        """Each ended before the next in ``order`` was even recorded."""
        for before, after in zip(order, order[1:]):
            self.assertLessEqual(history[before][1], history[after][0],
                                 (before, after))

    def test_sets_one_at_a_time_replicas_first_and_a_failover(self):
        fleet = self._fleet()
        self._stop(self.stalled_process)
        # PENDING until the operator starts it: its plan shows the order.
        rollout = self.create(
            max_in_flight=10, start_at=timeutils.utcnow()
            + datetime.timedelta(hours=1))
        self.assertEqual(rs.PENDING, rollout['status'])
        sets = {(s['kind'], s['id']): [m['instance_id'] for m in s['members']]
                for s in rollouts.plan_for(self.admin, rollout).sets}
        planned_a = [fleet['a_first'], fleet['a_other'], fleet['a_primary']]
        self.assertEqual({
            (topology.REPLICATION, fleet['a_primary']): planned_a,
            (topology.REPLICATION, fleet['b_primary']):
                [fleet['b_replica'], fleet['b_primary']],
            (topology.CLUSTER, fleet['cluster_id']): sorted(fleet['cluster']),
        }, sets)
        rollouts.pause_rollout(self.admin, rollout['id'])
        rollouts.resume_rollout(self.admin, rollout['id'])

        # The first of set A is sent and cannot answer: nothing else of
        # its set is sent meanwhile, while the other sets go on.
        test_rollouts.wait_until(
            lambda: fleet['b_primary'] in self._history(rollout['id']),
            'set B to reach its primary')
        history = self._history(rollout['id'])
        self.assertIn(fleet['a_first'], history)
        self.assertNotIn(fleet['a_other'], history)
        self.assertNotIn(fleet['a_primary'], history)
        # Failover: the other replica is promoted (what Trove's
        # promote-to-replica-source records), the old primary replicates
        # from it.
        self.trove.set_replication_source(fleet['a_other'], None)
        self.trove.set_replication_source(fleet['a_primary'],
                                          fleet['a_other'])
        self.trove.set_replication_source(fleet['a_first'], fleet['a_other'])
        os.killpg(self.stalled_process.pid, signal.SIGCONT)

        done = self.wait_for_status(rollout['id'], rs.COMPLETED, rs.PAUSED)
        self.assertEqual(
            (rs.COMPLETED, '12 agent(s) succeeded, 0 already current, '
                           '0 failed.'),
            (done['status'], done['status_detail']))
        history = self._history(rollout['id'])
        self.assertUpgradedOnce(rollout['id'], list(history))
        self.assertEqual(12, len(history))
        # The old primary, a replica since the failover, went before the
        # new one: not the order planned before the failover.
        self.assertOneAtATime(history, [fleet['a_first'], fleet['a_primary'],
                                        fleet['a_other']])
        self.assertOneAtATime(history, [fleet['b_replica'],
                                        fleet['b_primary']])
        self.assertOneAtATime(history, sorted(fleet['cluster']))
        # The singles went together with the sets' first members: the
        # order holds back the sets only.
        first_end = min(finished for _created, finished in history.values())
        together = {i for i, (created, _finished) in history.items()
                    if created < first_end}
        self.assertTrue(set(fleet['singles']) | {fleet['a_first']}
                        <= together, together)
