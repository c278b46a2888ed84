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

"""An administrator upgrades a customer's real Trove guest through Trove.

Everything as a Trove operator has it: the real trove-api 25.1.0 with the
extension enabled and Trove's defaults (secure RPC on), a real Keystone
(the administrator in the ``admin`` project, a member in the customer's),
trove-upgrade's conductor, and the customer's instance created by Trove's
own code (``DBInstance.create``, ``get_injected_files``) in the customer's
project. Its guest is laid out as Trove's image and task manager leave it:
the real ``trove-guestagent`` 25.1.0 under supervisord, reading the
guest_info.conf Trove injected (the instance's ``instance_rpc_encr_key``),
adopted by ``trove-upgrade-adopt`` before it starts, as the image recipe
runs it, and the upgrade agent configured by Trove's files alone, its
RPC-ping health check on by default.

Slow: one test, the packages (26.0.0, and two broken builds of it) built
once for the class.
"""

import os
import subprocess

from tools.testbed import conffile
from tools.testbed import guest
from tools.testbed import trove_release
from trove_upgrade.agent import install
from trove_upgrade.agent import journal as journal_mod
from trove_upgrade.agent import trove_guest
from trove_upgrade.common import exception
from trove_upgrade.common import states
from trove_upgrade.db import agents as db_agents
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.tests.functional.agent import harness
from trove_upgrade.tests.functional.trove_api import base

FROM = '25.1.0'
TO = '26.0.0'
# A real guest agent takes tens of seconds to start on a loaded machine.
HEALTH_TIMEOUT = 120
# As recommended for Trove guests (doc/source/install/guest-image.rst).
STOP_TIMEOUT = 0.5


class TestAdminUpgradesCustomersGuest(base.TroveAPITestCase):

    packages = {}
    initial_version = FROM

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # Read before the tests' fixtures point HOME at a temporary
        # directory.
        cls.cache = trove_release.cache_dir()
        guest.wheelhouse(FROM, cls.cache)
        builds = []
        for name, kind in (('good', None), ('plain', 'plain'),
                           ('exits', 'exit')):
            extra = []
            if kind:
                extra.append(guest.broken_trove_wheel(
                    TO, kind, os.path.join(cls.class_dir, name), cls.cache))
            builds.append(harness._start_tool(
                'build', *extra, '--requirement', 'trove==%s' % TO,
                '--wheel-cache', cls.cache,
                '--guest-agent-script', guest.CONSOLE_SCRIPT,
                '--version', TO,
                '--output', os.path.join(cls.repo, 'trove-%s.pkg' % name),
                '--signing-key', cls.signing_key,
                '--encryption-key', cls.encryption_key))
        for build in builds:
            harness._wait_tool(build)

    def provision(self, version):
        """The customer's instance, laid out as Trove boots it.

        On the class's Trove exchange, trove-api's, as Trove's guests are.
        """
        self.create_trove_instance()
        # Trove's guest agent declares them, not auto-delete; its server
        # is named after the guest.
        topic = trove_guest.TOPIC_PREFIX + self.instance_id
        self.bus_queues += [topic, '%s.%s' % (topic, self.instance_id)]
        self.layout = self.useFixture(guest.TroveGuestLayout(
            os.path.join(self.tmp, 'guest'), self.instance_id,
            harness.RABBIT_URL, self.trove_exchange))
        # The guest_info.conf Trove's task manager injected, in its place.
        self.trove_rows.write_guest_info(self.instance_id,
                                         self.layout.conf_dir)
        guest.make_venv(self.layout.venv, version, self.cache)
        self.program_link = guest.program_link(
            os.path.join(self.tmp, 'guest'), self.layout.venv)
        self.docker = self.useFixture(guest.DockerVersionAPI())

    def agent_conf(self, **overrides):
        conf = super().agent_conf(
            service_manager='supervisord', service_name=guest.PROGRAM,
            supervisord_serverurl=self.supervisord.serverurl,
            guest_program_link=self.program_link,
            health_grace=1, health_timeout=HEALTH_TIMEOUT,
            restart_retries=1, stop_timeout=STOP_TIMEOUT, **overrides)
        # The instance id and its key come from Trove's guest_info.conf,
        # the bus from Trove's trove-guestagent.conf; sealing is required
        # by default.
        for name in ('instance_id', 'instance_key_file', 'require_sealed',
                     'guest_command'):
            del conf[name]
        return conf

    def write_agent_conf(self):
        path = os.path.join(self.tmp, 'agent.conf')
        conffile.write_conf(path, {
            'DEFAULT': {'control_exchange': self.exchange,
                        'state_path': self.tmp},
            'agent': self.agent_conf(),
            'trove_guest': {'config_dir': self.layout.conf_dir},
            'conductor': {'topic': self.conductor_topic},
        })
        return path

    def boot_guest(self):
        """Adoption, then the guest agent and the upgrade agent start.

        As the image recipe has it (install/guest-image.rst): adoption
        before the upgrade agent starts, the guest agent started by its
        service manager.
        """
        self.supervisord = guest.Supervisord(
            os.path.join(self.tmp, 'supervisor'),
            self.layout.command(self.program_link),
            {'DOCKER_HOST': self.docker.docker_host})
        # Adoption talks to supervisord: started first, with its program.
        self.useFixture(self.supervisord)
        adopted = subprocess.run(
            [os.path.join(harness.BIN, 'trove-upgrade-adopt'),
             '--config-file', self.write_agent_conf(),
             '--venv', self.layout.venv],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.assertEqual(0, adopted.returncode, adopted.stdout)
        # Not restarted: the running guest agent serves the ping only from
        # its next start on, and only a guest agent the upgrade agent has
        # just restarted is pinged.
        self._spawn('agent', [
            os.path.join(harness.BIN, 'trove-upgrade-agent'),
            '--config-file', self.write_agent_conf()])
        self.wait_for(self._registered_at_from,
                      'the agent to register with guest version %s' % FROM,
                      timeout=HEALTH_TIMEOUT)

    def _registered_at_from(self):
        try:
            agent = db_agents.get_agent(self.context, self.instance_id)
        except exception.AgentNotFoundError:
            return None
        return agent if agent['guest_version'] == FROM else None

    def upgrade_through_trove(self, package):
        resp = self.post(self.session(),
                         '/instances/%s/upgrade' % self.instance_id,
                         {'upgrade': {'instance_version': TO,
                                      'location': os.path.join(
                                          self.repo,
                                          'trove-%s.pkg' % package)}})
        self.assertEqual(202, resp.status_code, resp.text)
        upgrade = resp.json()['upgrade']
        self.assertEqual(self.instance_id, upgrade['instance_id'])
        return self.wait_for_status(upgrade['id'], states.FINAL_STATES,
                                    timeout=600)

    def assert_rolled_back_running_from(self, failed, build):
        self.assertEqual(states.FAILED, failed['status'],
                         (build, failed['events']))
        reason = failed['events'][-1]['detail']
        self.assertIn('rolled back to %s, which is running' % FROM, reason,
                      build)
        self.assertNotIn('failed too', reason, build)
        self.assertNotIn('not healthy', reason, build)
        self.assertNotIn('Traceback', reason)
        self.assertNotIn(self.tmp, reason)
        self.assertLess(len(reason), 1000, reason)
        self.assertEqual(FROM, self.current_version())
        self.assertEqual(self.layout.venv,
                         guest.venv_of(self.supervisord.pid()), build)

    def test_admin_of_another_project_upgrades_the_customers_guest(self):
        # The instance is the customer's; the administrator is not in its
        # project.
        self.assertNotEqual(self.customer_project,
                            self.keystone.admin_project_id)
        self.assertTrue(self.trove_rows.instance_key(self.instance_id))
        self.boot_guest()

        # A member of the customer's own project may not upgrade it.
        resp = self.post(self.member_session(),
                         '/instances/%s/upgrade' % self.instance_id,
                         {'upgrade': {'instance_version': TO,
                                      'location': os.path.join(
                                          self.repo, 'trove-good.pkg')}},
                         project_id=self.customer_project)
        self.assertEqual(403, resp.status_code, resp.text)
        self.assertEqual([], db_upgrades.list_upgrades(
            self.context, filters={'instance_id': self.instance_id}))

        # A build that runs but does not answer the keyed ping (its guest
        # agent ignores the instance key), then one that exits at start:
        # each rolled back, 25.1.0 running again.
        for build in ('plain', 'exits'):
            self.assert_rolled_back_running_from(
                self.upgrade_through_trove(build), build)

        # The real 26.0.0: it answers Trove's secure ping, SUCCESS.
        done = self.upgrade_through_trove('good')
        self.assertEqual(states.SUCCESS, done['status'], done['events'])
        self.assertEqual((FROM, self.keystone.admin_project_id),
                         (done['from_version'], done['project_id']))
        self.assertEqual(TO, self.current_version())
        installs = install.InstallRoot(
            self.install_root, journal_mod.InstallRootLock(self.install_root))
        self.assertEqual(os.path.realpath(installs.path(TO)),
                         guest.venv_of(self.supervisord.pid()))
        journal = self.wait_for_outbox_empty()
        self.assertEqual(TO, journal['last_known_good'])
