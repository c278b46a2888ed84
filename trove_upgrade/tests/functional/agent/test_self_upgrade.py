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

"""trove-upgrade-agent upgrading itself, with real builds of trove-upgrade.

The agent runs from a real virtualenv of this tree built as version
10.0.0 (``tools.testbed.agent_release``), under supervisord, a real service
manager; the packages of 10.1.0 and of a 10.2.0 that cannot start are
signed and encrypted by ``trove-upgrade-package`` with every dependency's
wheel. The conductor, RabbitMQ and the sealing are those of every agent
test. Each hand-over is a real restart: the tests see the running agent's
virtualenv in ``/proc``, and ``kill -9`` the old agent, the watcher or the
new agent at the hand-over's steps.
"""

import os
import signal

from tools.testbed import agent_release
from tools.testbed import conffile
from tools.testbed import guest as guest_mod
from trove_upgrade.agent import install
from trove_upgrade.agent import journal
from trove_upgrade.agent import pause_hook
from trove_upgrade.common import rpc_interface
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.services import agent_rpcapi
from trove_upgrade.services import resends
from trove_upgrade.services import sealing_keys
from trove_upgrade.tests.functional.agent import harness

OLD = '10.0.0'
NEW = '10.1.0'
BROKEN = '10.2.0'
PROGRAM = 'trove-upgrade-agent'


class SelfUpgradeTestCase(harness.AgentTestCase):
    """One agent of version OLD per test, under supervisord."""

    handover_timeout = 60

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        builds = os.path.join(cls.class_dir, 'agent-builds')
        cls.old_wheels = agent_release.build_wheels(
            OLD, os.path.join(builds, OLD))
        for version, broken in ((NEW, False), (BROKEN, True)):
            wheels = agent_release.build_wheels(
                version, os.path.join(builds, version), broken=broken)
            harness.package_tool(
                'build', *wheels, '--version', version,
                '--output', os.path.join(cls.repo, 'agent-%s.pkg' % version),
                '--package-name', 'trove-upgrade',
                '--guest-agent-script', PROGRAM,
                '--signing-key', cls.signing_key,
                '--encryption-key', cls.encryption_key)

    def setUp(self):
        super().setUp()
        self.self_root = os.path.join(self.tmp, 'self')
        installs = install.InstallRoot(
            self.self_root, journal.InstallRootLock(self.install_root))
        installs.install(OLD, self.old_wheels, console_script=PROGRAM)
        installs.switch(OLD)

    def start_self_managed_agent(self, pause_at=''):
        """The agent of ``current`` under supervisord, which restarts it."""
        path = os.path.join(self.tmp, 'agent.conf')
        self.supervisord_dir = os.path.join(self.tmp, 'supervisord')
        serverurl = 'unix://' + os.path.join(self.supervisord_dir,
                                             'supervisor.sock')
        conffile.write_conf(path, {
            'DEFAULT': {'transport_url': self.rabbit_url,
                        'control_exchange': self.exchange,
                        'state_path': self.tmp},
            'agent': self.agent_conf(supervisord_serverurl=serverurl),
            'conductor': {'topic': self.conductor_topic},
            'self_upgrade': {'enabled': True,
                             'install_root': self.self_root,
                             'service_manager': 'supervisord',
                             'service_name': PROGRAM,
                             'handover_timeout': self.handover_timeout,
                             'watch_interval': 0.2},
        })
        command = '%s --config-file %s' % (
            os.path.join(self.self_root, 'current', 'bin', PROGRAM), path)
        self.supervisord = self.useFixture(guest_mod.Supervisord(
            self.supervisord_dir, command,
            {pause_hook.ENV: pause_at}, program=PROGRAM))
        # Where the harness reads the agent's log from.
        os.symlink(os.path.join(self.supervisord_dir, 'guest-agent.out'),
                   os.path.join(self.tmp, 'agent.log'))
        self.addCleanup(self.stop_guest)
        self.addCleanup(self._kill_watcher)

    def _kill_watcher(self):
        """A watcher the test left (none, when the hand-over ended)."""
        for pid in self._pids_in(self.self_root):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    @staticmethod
    def _pids_in(root):
        """Processes whose command line names ``root``'s watcher module."""
        pids = []
        for name in os.listdir('/proc'):
            if not name.isdigit():
                continue
            try:
                with open('/proc/%s/cmdline' % name, 'rb') as f:
                    cmdline = f.read().decode(errors='replace')
            except OSError:
                continue
            if ('trove_upgrade.agent.handover' in cmdline
                    and root in cmdline):
                pids.append(int(name))
        return pids

    def upgrade_agent(self, version):
        """Record an upgrade of the upgrade agent and cast it (API 1.3)."""
        upgrade, key_rows = db_upgrades.create_sent_upgrade(
            self.context, {
                'instance_id': self.instance_id,
                'instance_version': version,
                'strategy': 'local',
                'location': os.path.join(self.repo, 'agent-%s.pkg'
                                         % version),
                'allow_downgrade': False,
            }, resends.resend_at(1))
        keys = sealing_keys.keyrings_of([self.instance_id],
                                        key_rows)[self.instance_id]
        agent_rpcapi.AgentAPI().upgrade_with_keys(
            self.context, dict(upgrade,
                               component=rpc_interface.UPGRADE_AGENT),
            keys)
        return upgrade['id']

    def running_agent_version(self):
        """The version whose virtualenv the running agent process runs."""
        pid = self.supervisord.pid()
        if pid is None:
            return None
        venv = guest_mod.venv_of(pid)
        return os.path.basename(venv) if venv else None

    def wait_for_agent(self, version):
        self.wait_for(lambda: self.running_agent_version() == version
                      and (self.registered() or {}).get('agent_version')
                      == version,
                      'agent %s to run and report its version' % version)

    def self_current(self):
        return os.path.basename(os.readlink(
            os.path.join(self.self_root, 'current')))

    def kill_paused(self, checkpoint):
        """kill -9 the process paused at ``checkpoint``.

        An agent with its launcher, as a crash of the service would: the
        agent's service process group, which supervisord then restarts.
        """
        marker = os.path.join(self.self_root,
                              pause_hook.MARKER_PREFIX + checkpoint)
        self.wait_for(lambda: os.path.exists(marker),
                      'a process to pause at %s' % checkpoint)
        with open(marker) as f:
            pid = int(f.read())
        os.unlink(marker)
        service = self.supervisord.pid()
        if service is not None and os.getpgid(pid) == service:
            os.killpg(service, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)

    def assert_converged(self, version):
        """One agent, of ``version``, the link at it, no hand-over left."""
        self.wait_for(lambda: self.journal()['current_upgrade'] is None,
                      'the hand-over to end in the journal')
        self.wait_for_agent(version)
        self.assertEqual(version, self.self_current())
        self.wait_for(lambda: not self._pids_in(self.self_root),
                      'the watcher to exit')


class TestSelfUpgrade(SelfUpgradeTestCase):

    def test_upgrade_rollback_of_a_broken_build_then_a_guest_upgrade(self):
        self.start_self_managed_agent()
        self.wait_for_agent(OLD)
        self.wait_for_guest(self.initial_version)
        guest = self.guest_status()

        upgrade_id = self.upgrade_agent(NEW)
        done = self.wait_for_status(upgrade_id, 'SUCCESS')
        self.assertEqual(OLD, done['from_version'])
        self.assertEqual(NEW, done['instance_version'])
        self.wait_for_agent(NEW)
        self.assertEqual(NEW, self.self_current())
        # The guest agent ran on through both agents.
        self.assertEqual(guest['pid'], self.guest_status()['pid'])

        # A build that exits at start: the guest alone rolls it back.
        upgrade_id = self.upgrade_agent(BROKEN)
        failed = self.wait_for_status(upgrade_id, 'FAILED')
        self.assertIn('upgrade agent %s stopped before it confirmed'
                      % BROKEN, failed['status_detail'])
        self.assertIn('rolled back to %s, which is running' % NEW,
                      failed['status_detail'])
        self.wait_for_agent(NEW)
        self.assertEqual(NEW, self.self_current())
        self.assertFalse(os.path.exists(
            os.path.join(self.self_root, 'versions', BROKEN)))

        # The new agent upgrades the guest agent.
        upgrade = self.create_upgrade('2.0.0')
        self.wait_for_status(upgrade['id'], 'SUCCESS')
        self.wait_for_guest('2.0.0')

    def test_kill_9_of_the_old_agent_and_of_the_watcher_before_the_switch(
            self):
        self.start_self_managed_agent(pause_at='handover,watcher-handover')
        self.wait_for_agent(OLD)
        upgrade_id = self.upgrade_agent(NEW)
        # The old agent recorded the hand-over, started no watcher yet.
        self.kill_paused('handover')
        # Restarted by supervisord, it starts the watcher, killed too.
        self.kill_paused('watcher-handover')
        self.wait_for_status(upgrade_id, 'SUCCESS')
        self.assert_converged(NEW)

    def test_kill_9_of_the_new_agent_before_it_confirms(self):
        self.start_self_managed_agent(pause_at='confirm')
        self.wait_for_agent(OLD)
        upgrade_id = self.upgrade_agent(NEW)
        self.kill_paused('confirm')
        failed = self.wait_for_status(upgrade_id, 'FAILED')
        self.assertIn('upgrade agent %s stopped before it confirmed' % NEW,
                      failed['status_detail'])
        self.assert_converged(OLD)
        self.assertFalse(os.path.exists(
            os.path.join(self.self_root, 'versions', NEW)))

    def test_rolled_back_without_the_control_plane_despite_a_killed_watcher(
            self):
        self.handover_timeout = 15
        self.start_self_managed_agent(pause_at='watcher-rolling_back')
        self.wait_for_agent(OLD)
        upgrade_id = self.upgrade_agent(NEW)
        self.wait_for(lambda: (self.journal()['current_upgrade'] or {}).get(
            'step') in ('verifying', 'installing'), 'the install to start')
        # The new agent cannot register: no conductor answers.
        self._kill(self.processes.pop('conductor'))
        self.kill_paused('watcher-rolling_back')
        self.assert_converged(OLD)
        self.start_conductor()
        failed = self.wait_for_status(upgrade_id, 'FAILED')
        self.assertIn('upgrade agent %s did not register and confirm'
                      % NEW, failed['status_detail'])
        self.assertIn('rolled back to %s, which is running' % OLD,
                      failed['status_detail'])
