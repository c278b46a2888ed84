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

"""A desired version converging real agents through a real conductor.

The agent tests' harness: a real ``trove-upgrade-conductor`` (its
reconciler passes every half second), real ``trove-upgrade-agent``
processes on RabbitMQ, real signed packages installed side by side. The
package is registered through the registry (its manifest fetched with
the ``local`` strategy and verified) and the desired version declared
before any agent exists: the agent that registers later is upgraded, and
so is the same instance rebuilt from an old image.
"""

import os

from oslo_utils import uuidutils

from tools.testbed import conffile
from trove_upgrade.common import states
from trove_upgrade.common import versions
from trove_upgrade.db import agents as db_agents
from trove_upgrade.db import desired_versions as dv_db
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.services import desired_versions
from trove_upgrade.services import packages as package_registry
from trove_upgrade.services import rollouts
from trove_upgrade.tests.functional.agent import harness


class TestDesiredVersionConverges(harness.AgentTestCase):

    packages = {'2.0.0': 'ok'}

    def start_conductor(self):
        path = os.path.join(self.tmp, 'conductor.conf')
        conffile.write_conf(path, {
            'DEFAULT': {'transport_url': harness.RABBIT_URL,
                        'control_exchange': self.exchange,
                        'state_path': self.tmp},
            'database': {'connection': self.db.url},
            'conductor': {'topic': self.conductor_topic,
                          'rollout_interval': 0.5},
        })
        return self._spawn('conductor', [
            os.path.join(harness.BIN, 'trove-upgrade-conductor'),
            '--config-file', path])

    def setUp(self):
        super().setUp()
        self.flags(group='packages', strategy_config_dir=self.strategy_dir,
                   allowed_strategies=['local'],
                   trusted_key_files=[self.signing_key + '.pub'])
        self.package = package_registry.register_package(self.context, {
            'name': 'trove-guestagent', 'version': '2.0.0',
            'strategy': 'local',
            'location': os.path.join(self.repo, 'guest-2.0.0.pkg')})

    def owned_upgrades(self, desired_id):
        return [d for d in dv_db.list_dispatches(self.context, desired_id)
                if d['instance_id'] == self.instance_id]

    def wait_for_success(self, desired_id, count):
        def done():
            found = self.owned_upgrades(desired_id)
            if len(found) == count and all(
                    d['status'] == states.SUCCESS for d in found):
                return found
            return None
        return self.wait_for(done, '%d successful upgrade(s) of desired '
                                   'version %s' % (count, desired_id),
                             timeout=150)

    def test_late_agent_and_rebuilt_agent_converge(self):
        desired = desired_versions.create(self.context, {
            'name': 'blue runs 2.0.0', 'package_name': 'trove-guestagent',
            'version': '2.0.0', 'selector': {'group': 'blue'},
            'canary': 1, 'max_in_flight': 2, 'max_in_flight_kind': 'count',
            'max_failures': 0, 'max_failures_kind': 'count',
            'per_agent_retries': 1, 'agent_deadline': 300})
        self.assertEqual([], db_agents.list_agents(self.context))

        # The agent registers after the declaration.
        self.start_agent()
        first, = self.wait_for_success(desired['id'], 1)
        self.wait_for_guest('2.0.0')
        upgrade = db_upgrades.get_upgrade(self.context, first['upgrade_id'])
        self.assertEqual(
            ({'owner': 'desired_version:%s' % desired['id']}, 'local',
             self.package['location'], None),
            (upgrade['metadata'], upgrade['strategy'], upgrade['location'],
             upgrade['rollout_id']))
        self.wait_for(
            lambda: versions.same(db_agents.get_agent(
                self.context, self.instance_id)['guest_version'], '2.0.0'),
            'the agent to report 2.0.0')
        self.assertEqual(
            {self.instance_id: 'succeeded'},
            desired_versions.view(self.context, dv_db.get_desired_version(
                self.context, desired['id'])).plan.agents)

        # The instance is rebuilt from the old image: a fresh install
        # root at 1.0.0, the same instance id.
        self.kill_agent()
        self.stop_guest()
        self.install_root = os.path.join(self.tmp, 'rebuilt')
        self.provision(self.initial_version)
        self.start_agent()
        found = self.wait_for_success(desired['id'], 2)
        self.wait_for_guest('2.0.0')
        self.assertEqual([(0, 1), (1, 1)],
                         [(d['round'], d['attempt']) for d in found])
        events = dv_db.list_events(self.context, desired['id'])
        self.assertEqual(['created'], [e['action'] for e in events])

    def test_an_active_rollout_takes_precedence(self):
        other = uuidutils.generate_uuid()
        db_agents.register_agent(self.context, other, {
            'guest_version': '1.0.0', 'labels': {'group': 'green'}})
        desired = desired_versions.create(self.context, {
            'name': 'blue', 'package_name': 'trove-guestagent',
            'version': '2.0.0', 'selector': {'group': 'blue'},
            'canary': 0, 'max_in_flight': 5, 'max_in_flight_kind': 'count',
            'max_failures': 0, 'max_failures_kind': 'count',
            'per_agent_retries': 0, 'agent_deadline': 300})
        # A paused rollout owns the instance: the desired version leaves
        # it alone while the rollout is active.
        rollout = rollouts.create_rollout(self.context, {
            'name': 'hold', 'instance_version': '2.0.0',
            'strategy': 'local', 'location': self.package['location'],
            'selector': {'instance_ids': [self.instance_id]}, 'canary': 0,
            'max_in_flight': 1, 'max_in_flight_kind': 'count',
            'max_failures': 0, 'max_failures_kind': 'count',
            'per_agent_retries': 0, 'agent_deadline': 300})
        rollouts.pause_rollout(self.context, rollout['id'])
        self.start_agent()
        self.wait_for(lambda: self.instance_id in {
            a['instance_id'] for a in db_agents.list_agents(self.context)},
            'the agent to register')
        owners = desired_versions.owners(self.context)
        target = desired_versions.describe_target(owners[self.instance_id])
        self.assertEqual(
            (desired_versions.ROLLOUT, rollout['id'],
             [desired['id']]),
            (target['owner']['kind'], target['owner']['id'],
             [o['id'] for o in target['shadowed']]))
        self.assertNotIn(other, owners)
        self.assertEqual({}, desired_versions.view(
            self.context, desired).plan.agents)
        # Once the rollout ends, the desired version takes it back.
        rollouts.abort_rollout(self.context, rollout['id'])
        self.wait_for_success(desired['id'], 1)
        self.wait_for_guest('2.0.0')
