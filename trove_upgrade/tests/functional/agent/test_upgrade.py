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

"""Upgrades end to end: RabbitMQ, the conductor, the agent, real installs."""

import glob
import os
import signal

from tools.testbed import sample_guest
from trove_upgrade.agent import install
from trove_upgrade.common import states
from trove_upgrade.services import agent_rpcapi
from trove_upgrade.services import upgrades
from trove_upgrade.tests.functional.agent import harness

WITHOUT_SENT = frozenset([states.SENT])
# The agent's peak resident memory while a health command floods its
# output for two timeouts: a fraction of what the command prints then.
AGENT_MEMORY_BOUND = 256 << 20


def _peak_memory(group):
    """The largest peak resident size, in bytes, of a process group."""
    peak = 0
    for name in os.listdir('/proc'):
        try:
            with open('/proc/%s/stat' % name) as f:
                if int(f.read().rsplit(')', 1)[1].split()[2]) != group:
                    continue
            with open('/proc/%s/status' % name) as f:
                for line in f:
                    if line.startswith('VmHWM:'):
                        peak = max(peak, int(line.split()[1]) << 10)
        except (OSError, ValueError, IndexError):
            continue
    return peak


class TestUpgrade(harness.AgentTestCase):

    def _stages(self, upgrade):
        return [s for s in self.history(upgrade) if s not in WITHOUT_SENT]

    def test_v1_to_v2_succeeds(self):
        self.start_agent()
        self.wait_for_guest('1.0.0')
        upgrade = self.create_upgrade('2.0.0')
        done = self.wait_for_status(upgrade['id'], states.FINAL_STATES)
        self.assertEqual(states.SUCCESS, done['status'], done['events'])
        # Every stage is reported in order. The conductor dispatches casts
        # on several threads, so under load it may record a later stage
        # first and drop the earlier one as stale: the recorded history is
        # an ordered subsequence that always holds the claim, the restart
        # and the final state.
        stages = self._stages(done)
        expected = [states.PENDING, states.DOWNLOADING, states.VERIFYING,
                    states.INSTALLING, states.RESTARTING, states.SUCCESS]
        self.assertEqual(sorted(stages, key=expected.index), stages)
        for stage in (states.DOWNLOADING, states.RESTARTING, states.SUCCESS):
            self.assertIn(stage, stages)
        self.assertEqual('1.0.0', done['from_version'])
        self.assertEqual('2.0.0', self.running_guest_version())
        self.assertEqual('2.0.0', self.current_version())
        journal = self.wait_for_outbox_empty()
        self.assertEqual('2.0.0', journal['last_known_good'])
        self.assertEqual(states.SUCCESS, journal['processed'][upgrade['id']])
        self.assertIsNone(journal['current_upgrade'])
        self.assertEqual([], os.listdir(os.path.join(self.install_root,
                                                     'work')))

    def test_agent_registers_and_heartbeats(self):
        self.start_agent()
        self.wait_for_guest('1.0.0')
        agent = self.wait_for(
            lambda: self._agent_row(guest_version='1.0.0'),
            'the agent to register with guest version 1.0.0')
        self.assertEqual(agent_rpcapi.AgentAPI.RPC_API_VERSION,
                         agent['rpc_api_version'])
        self.assertEqual({'group': 'blue', 'datastore': 'mysql'},
                         agent['labels'])
        self.assertEqual('running', agent['state'])
        self.set_guest_state('backup')
        agent = self.wait_for(lambda: self._agent_row(state='backup'),
                              'a heartbeat reporting the guest busy')

    def test_dead_guest_agent_is_restarted(self):
        self.start_agent()
        self.wait_for_guest('1.0.0')
        pid = self.guest_status()['pid']
        os.kill(pid, signal.SIGKILL)
        self.wait_for(
            lambda: (self.guest_status() or {}).get('pid') not in (None, pid),
            'the agent to start the guest agent again')
        self.assertEqual('1.0.0', self.running_guest_version())

    def _agent_row(self, **expected):
        from trove_upgrade.common import exception
        from trove_upgrade.db import agents as db_agents
        try:
            agent = db_agents.get_agent(self.context, self.instance_id)
        except exception.AgentNotFoundError:
            return None
        for key, value in expected.items():
            if agent[key] != value:
                return None
        return agent

    def test_same_upgrade_delivered_twice_runs_once(self):
        self.start_agent()
        self.wait_for_guest('1.0.0')
        upgrade = self.create_upgrade('2.0.0')
        done = self.wait_for_status(upgrade['id'], states.FINAL_STATES)
        self.assertEqual(states.SUCCESS, done['status'])
        pid = self.guest_status()['pid']
        agent_rpcapi.AgentAPI().upgrade(
            self.context, self.instance_id, upgrade['id'], '2.0.0', 'local',
            upgrade['location'], {}, False)
        self.wait_for_log('Upgrade %s was already received' % upgrade['id'])
        again = self.get_upgrade(upgrade['id'])
        self.assertEqual(len(done['events']), len(again['events']))
        self.assertEqual(pid, self.guest_status()['pid'])

    def test_automatic_updates_disabled_fails_with_the_reason(self):
        self.start_agent(guest_automatic_updates=False)
        self.wait_for_guest('1.0.0')
        pid = self.guest_status()['pid']
        upgrade = self.create_upgrade('2.0.0')
        done = self.wait_for_status(upgrade['id'], states.FINAL_STATES)
        self.assertEqual(states.FAILED, done['status'])
        self.assertIn('guest_automatic_updates is disabled',
                      done['events'][-1]['detail'])
        self.assertEqual(pid, self.guest_status()['pid'])
        self.assertEqual('1.0.0', self.current_version())

    def test_tampered_package_is_rejected_guest_untouched(self):
        with open(os.path.join(self.repo, 'guest-2.0.0.pkg'), 'rb') as f:
            data = bytearray(f.read())
        data[len(data) // 2] ^= 0x01
        tampered = os.path.join(self.tmp, 'pkgs')
        os.makedirs(tampered)
        path = os.path.join(self.repo, 'tampered-%s.pkg' % self.instance_id)
        self.addCleanup(os.unlink, path)
        self.addCleanup(os.unlink, path + '.manifest')
        with open(path, 'wb') as f:
            f.write(data)
        with open(os.path.join(self.repo, 'guest-2.0.0.pkg.manifest'),
                  'rb') as src, open(path + '.manifest', 'wb') as dst:
            dst.write(src.read())
        self.start_agent()
        self.wait_for_guest('1.0.0')
        pid = self.guest_status()['pid']
        upgrade = self.create_upgrade('2.0.0', location=path)
        done = self.wait_for_status(upgrade['id'], states.FINAL_STATES)
        self.assertEqual(states.FAILED, done['status'])
        detail = done['events'][-1]['detail']
        self.assertIn('package rejected', detail)
        self.assertIn('not touched', detail)
        self.assertEqual(pid, self.guest_status()['pid'])
        self.assertEqual('1.0.0', self.current_version())
        self.assertEqual(['1.0.0'], os.listdir(
            os.path.join(self.install_root, 'versions')))

    def test_unknown_strategy_fails_validation(self):
        self.start_agent()
        self.wait_for_guest('1.0.0')
        upgrade = self.create_upgrade('2.0.0', strategy='swift')
        done = self.wait_for_status(upgrade['id'], states.FINAL_STATES)
        self.assertEqual(states.FAILED, done['status'])
        self.assertIn("strategy 'swift'", done['events'][-1]['detail'])

    def test_missing_package_fails_its_download(self):
        self.start_agent()
        self.wait_for_guest('1.0.0')
        upgrade = self.create_upgrade(
            '2.0.0', location=os.path.join(self.repo, 'nothing.pkg'))
        done = self.wait_for_status(upgrade['id'], states.FINAL_STATES)
        self.assertEqual(states.FAILED, done['status'])
        self.assertEqual(['1.0.0'], os.listdir(
            os.path.join(self.install_root, 'versions')))

    def test_busy_guest_defers_then_runs(self):
        self.set_guest_state('backup')
        self.start_agent()
        self.wait_for_guest('1.0.0')
        upgrade = self.create_upgrade('2.0.0')
        self.wait_for_status(upgrade['id'], states.DEFERRED)
        self.assertEqual('1.0.0', self.running_guest_version())
        self.set_guest_state('running')
        done = self.wait_for_status(upgrade['id'], states.FINAL_STATES)
        self.assertEqual(states.SUCCESS, done['status'])
        self.assertEqual('2.0.0', self.running_guest_version())

    def test_deferred_upgrade_survives_an_agent_restart(self):
        self.set_guest_state('resize')
        self.start_agent()
        self.wait_for_guest('1.0.0')
        upgrade = self.create_upgrade('2.0.0')
        self.wait_for_status(upgrade['id'], states.DEFERRED)
        self.kill_agent()
        self.start_agent()
        self.wait_for_log('Registered with the conductor')
        self.assertEqual(states.DEFERRED,
                         self.get_upgrade(upgrade['id'])['status'])
        self.assertEqual('1.0.0', self.running_guest_version())
        self.set_guest_state(None)
        done = self.wait_for_status(upgrade['id'], states.FINAL_STATES)
        self.assertEqual(states.SUCCESS, done['status'])
        self.assertEqual('2.0.0', self.running_guest_version())

    def test_cancelled_upgrade_is_skipped(self):
        self.set_guest_state('restore')
        self.start_agent()
        self.wait_for_guest('1.0.0')
        upgrade = self.create_upgrade('2.0.0')
        self.wait_for_status(upgrade['id'], states.DEFERRED)
        upgrades.cancel_upgrade(self.context, upgrade['id'])
        self.set_guest_state('running')
        self.wait_for(
            lambda: self.journal()['processed'].get(upgrade['id']),
            'the agent to drop the cancelled upgrade')
        self.assertEqual(states.CANCELLED,
                         self.journal()['processed'][upgrade['id']])
        self.assertEqual(states.CANCELLED,
                         self.get_upgrade(upgrade['id'])['status'])
        self.assertEqual('1.0.0', self.running_guest_version())
        self.assertEqual(['1.0.0'], os.listdir(
            os.path.join(self.install_root, 'versions')))


class TestRollback(harness.AgentTestCase):

    initial_version = '2.0.0'
    packages = {'3.0.0': 'crash', '4.0.0': 'unhealthy', '5.0.0': 'flooding'}

    def _upgrade_fails(self, version):
        self.start_agent()
        self.wait_for_guest('2.0.0')
        upgrade = self.create_upgrade(version)
        done = self.wait_for_status(upgrade['id'], states.FINAL_STATES)
        self.assertEqual(states.FAILED, done['status'], done['events'])
        self.assertIn(states.RESTARTING, self.history(done))
        self.assertEqual('2.0.0', done['from_version'])
        detail = done['events'][-1]['detail']
        self.assertIn('rolled back to 2.0.0', detail)
        self.assertEqual('2.0.0', self.running_guest_version())
        self.assertEqual('2.0.0', self.current_version())
        journal = self.wait_for_outbox_empty()
        self.assertEqual('2.0.0', journal['last_known_good'])
        return detail

    def test_crash_at_start_rolls_back(self):
        detail = self._upgrade_fails('3.0.0')
        self.assertIn('guest agent 3.0.0 failed 2 start attempt(s)', detail)
        self.assertIn('exited with status 3', detail)

    def test_failing_health_check_rolls_back(self):
        detail = self._upgrade_fails('4.0.0')
        self.assertIn('guest agent 4.0.0 failed 2 start attempt(s)', detail)
        self.assertIn('unhealthy', detail)

    def test_health_command_flooding_its_output_rolls_back(self):
        detail = self._upgrade_fails('5.0.0')
        self.assertIn('guest agent 5.0.0 failed 2 start attempt(s): %s '
                      'after' % install.HEALTH_TIMED_OUT, detail)
        self.assertLess(len(detail), 500)
        self.assertLess(_peak_memory(self.processes['agent'].pid),
                        AGENT_MEMORY_BOUND)
        helpers = glob.glob(os.path.join(self.install_root, 'guest-run',
                                         sample_guest.FLOOD_HELPER_GLOB))
        self.assertNotEqual([], helpers)
        pids = []
        for path in helpers:
            with open(path) as f:
                pids.append(int(f.read()))
        self.assertProcessesDie(pids)
