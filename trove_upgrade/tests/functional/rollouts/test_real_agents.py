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

"""A rollout over real agents and simulated ones together.

Three real ``trove-upgrade-agent`` processes (the agent tests' harness:
signed and encrypted packages, side-by-side pip installs, a supervised
sample guest agent) and twenty simulated agents share one group and one
availability zone, the real agents' read from Nova's metadata; one real
conductor rolls version 2.0.0 out to all of them, and to none of the group
in another zone.
"""

import json
import os

from oslo_utils import uuidutils

from tools.testbed import conffile
from tools.testbed import fleet as fleet_fixture
from trove_upgrade.common import rollout_states as rs
from trove_upgrade.common import states
from trove_upgrade.db import agents as db_agents
from trove_upgrade.db import rollouts as db_rollouts
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.services import rollouts
from trove_upgrade.tests.functional.agent import harness


class TestRolloutWithRealAgents(harness.AgentTestCase):

    packages = {'2.0.0': 'ok'}

    def start_conductor(self):
        # A conductor topic of this test's own (see functional/rabbit.py),
        # and a short reconcile interval.
        self.conductor_topic = ('trove_upgrade_conductor_test_%s'
                                % uuidutils.generate_uuid(dashed=False)[:12])
        path = os.path.join(self.tmp, 'conductor.conf')
        conffile.write_conf(path, {
            'DEFAULT': {'transport_url': harness.RABBIT_URL,
                        'control_exchange': self.exchange,
                        'state_path': self.tmp},
            'database': {'connection': self.db.url},
            # The simulated agents hold no keys: seals are not required.
            'conductor': {'topic': self.conductor_topic,
                          'rollout_interval': 0.5,
                          'require_sealed': 'false'},
        })
        return self._spawn('conductor', [
            os.path.join(harness.BIN, 'trove-upgrade-conductor'),
            '--config-file', path])

    def start_real_agent(self, number, zone):
        """One more real agent, with an install root of its own.

        Nova's metadata of its instance, as on a config drive, says the
        instance is in ``zone``.
        """
        instance_id = uuidutils.generate_uuid()
        self.bus_instance_ids.append(instance_id)
        root = os.path.join(self.tmp, 'root-%d' % number)
        installs = self.provision_into(root)
        self.addCleanup(self._stop_guest_of, root)
        metadata = os.path.join(self.tmp, 'meta_data-%d.json' % number)
        with open(metadata, 'w') as f:
            json.dump({'uuid': instance_id, 'availability_zone': zone}, f)
        path = os.path.join(self.tmp, 'agent-%d.conf' % number)
        conffile.write_conf(path, {
            'DEFAULT': {'transport_url': harness.RABBIT_URL,
                        'control_exchange': self.exchange,
                        'state_path': self.tmp},
            'conductor': {'topic': self.conductor_topic},
            'agent': self.agent_conf(
                instance_id=instance_id, install_root=root,
                guest_state_file=os.path.join(
                    self.tmp, 'guest-state-%d' % number),
                nova_metadata_file=metadata),
        })
        self._spawn('agent-%d' % number, [
            os.path.join(harness.BIN, 'trove-upgrade-agent'),
            '--config-file', path])
        return instance_id, installs

    def provision_into(self, root):
        saved, self.install_root = self.install_root, root
        try:
            return self.provision(self.initial_version)
        finally:
            self.install_root = saved

    @staticmethod
    def _guest_version(root):
        try:
            with open(os.path.join(root, 'guest-run', 'status.json')) as f:
                return json.load(f).get('version')
        except (OSError, ValueError):
            return None

    def _stop_guest_of(self, root):
        saved, self.install_root = self.install_root, root
        try:
            self.stop_guest()
        finally:
            self.install_root = saved

    def test_rollout_reaches_real_and_simulated_agents(self):
        real = [self.start_real_agent(n, 'az-1')[0] for n in range(3)]
        fleet = self.useFixture(fleet_fixture.Fleet(
            self.tmp,
            {'DEFAULT': {'transport_url': harness.RABBIT_URL,
                         'control_exchange': self.exchange},
             'conductor': {'topic': self.conductor_topic}},
            self.db.url, heartbeat_interval=2))
        simulated = fleet.start_agents(
            20, labels='group=blue,availability_zone=az-1')
        # Blue too, but in another zone: the rollout leaves them alone.
        fleet.start_agents(2, labels='group=blue,availability_zone=az-2')
        self.wait_for(
            lambda: len(db_agents.list_agents(
                self.context, filters={'labels': {'group': 'blue'}})) == 25,
            'the real agents to register')

        rollout = rollouts.create_rollout(self.context, {
            'name': 'real', 'instance_version': '2.0.0',
            'strategy': 'local',
            'location': os.path.join(self.repo, 'guest-2.0.0.pkg'),
            'selector': {'group': 'blue', 'availability_zone': 'az-1'},
            'canary': 1,
            'max_in_flight': 5, 'max_in_flight_kind': 'count',
            'max_failures': 0, 'max_failures_kind': 'count',
            'per_agent_retries': 0, 'agent_deadline': 300})
        done = self.wait_for(
            lambda: (lambda r: r if r['status'] in rs.FINISHED_STATES
                     or r['status'] == rs.PAUSED else None)(
                db_rollouts.get_rollout(self.context, rollout['id'])),
            'the rollout to end', timeout=240)
        self.assertEqual(
            (rs.COMPLETED, '23 agent(s) succeeded, 0 already current, '
                           '0 failed.'),
            (done['status'], done['status_detail']))
        upgrades = db_upgrades.list_upgrades(
            self.context, filters={'rollout_id': rollout['id']})
        self.assertEqual(sorted(real + simulated),
                         sorted(u['instance_id'] for u in upgrades))
        self.assertEqual({states.SUCCESS}, {u['status'] for u in upgrades})
        claims = fleet.claims()
        self.assertEqual({i: 1 for i in simulated},
                         {i: claims[i] for i in simulated})
        for number in range(3):
            self.assertEqual('2.0.0', self._guest_version(
                os.path.join(self.tmp, 'root-%d' % number)))
