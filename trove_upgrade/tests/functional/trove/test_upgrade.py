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

"""Upgrade the real OpenStack Trove guest agent, 25.1.0 to 26.0.0.

Real RabbitMQ, the real conductor and agent processes of the agent
harness, real pip, and ``trove-guestagent`` of two Trove releases from PyPI
running under supervisord, with Trove's defaults: secure RPC on, the
instance key in ``guest_info.conf``, the health check's RPC ping sent in
Trove's secure format. Packages are built by ``trove-upgrade-package
build --requirement trove==26.0.0``; the wheel downloads are cached beside
the Trove virtualenvs (``trove_release.cache_dir()``), so only the first
run on a machine downloads. Slow: one scenario per test method, packages
built once per class.
"""

import os
import subprocess
import uuid

from tools.testbed import conffile
from tools.testbed import guest
from tools.testbed import trove_release
from trove_upgrade.agent import install
from trove_upgrade.agent import journal as journal_mod
from trove_upgrade.agent import trove_guest
from trove_upgrade.common import exception
from trove_upgrade.common import states
from trove_upgrade.db import agents as db_agents
from trove_upgrade.tests.functional.agent import harness

FROM = '25.1.0'
TO = '26.0.0'
PING_WAIT = 120
# As recommended for Trove guests (doc/source/install/guest-image.rst).
STOP_TIMEOUT = 0.5


class TroveGuestTestCase(harness.AgentTestCase):
    """A real Trove guest agent of FROM under supervisord, and builds of TO.

    ``builds`` names each package built once per class and how its copy
    of Trove is broken (``guest.broken_trove_wheel``; None: not at all).
    """

    packages = {}
    builds = {'good': None}

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # Read before the tests' fixtures point HOME at a temporary
        # directory.
        cls.cache = trove_release.cache_dir()
        guest.wheelhouse(FROM, cls.cache)
        builds = []
        for name, kind in cls.builds.items():
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
        """A guest as Trove's image leaves it, its agent running."""
        self.trove_exchange = 'trove_test_%s' % uuid.uuid4().hex[:12]
        # Trove's guest agent declares them, not auto-delete; its server
        # is named after the guest.
        topic = trove_guest.TOPIC_PREFIX + self.instance_id
        self.bus_queues += [topic, '%s.%s' % (topic, self.instance_id)]
        self.bus_exchanges.append(self.trove_exchange)
        self.layout = self.useFixture(guest.TroveGuestLayout(
            os.path.join(self.tmp, 'guest'), self.instance_id,
            harness.RABBIT_URL, self.trove_exchange,
            instance_key=self.guest_instance_key()))
        self.program_link = guest.program_link(
            os.path.join(self.tmp, 'guest'), self.install_image())
        docker = self.useFixture(guest.DockerVersionAPI())
        # Enabled by the upgrade agent; enabled here too so that the
        # image's agent answers before any restart.
        trove_guest.write_managed_config(self.layout.conf_dir)
        self.supervisord = self.useFixture(guest.Supervisord(
            os.path.join(self.tmp, 'supervisor'), self.guest_command(),
            {'DOCKER_HOST': docker.docker_host}))
        # Trove's secure RPC, with the key Trove wrote in guest_info.conf.
        self.pinger = trove_guest.RpcPing(
            harness.RABBIT_URL, self.trove_exchange, self.instance_id, 2,
            key=self.layout.instance_key)
        self.addCleanup(self.pinger.close)

    def install_image(self):
        """The image's virtualenv of 25.1.0, installed by pip; its path."""
        return guest.make_venv(self.layout.venv, FROM, self.cache)

    def guest_instance_key(self):
        """The key Trove gives the instance: a new one by default."""
        return guest.SECURE

    def guest_command(self):
        """The command supervisord starts the guest agent with."""
        return self.layout.command(self.program_link)

    def agent_conf(self, **overrides):
        conf = super().agent_conf(
            instance_key_file=self.provision_key(self.instance_id),
            service_manager='supervisord', service_name=guest.PROGRAM,
            supervisord_serverurl=self.supervisord.serverurl,
            guest_program_link=self.program_link,
            health_grace=1, health_timeout=PING_WAIT, restart_retries=1,
            stop_timeout=STOP_TIMEOUT, **overrides)
        # The instance id comes from Trove's guest_info.conf.
        del conf['instance_id']
        del conf['guest_command']
        return conf

    def start_agent(self):
        """The agent with Trove's bus URL and instance id, no own ones."""
        return self._spawn('agent', [
            os.path.join(harness.BIN, 'trove-upgrade-agent'),
            '--config-file', self.write_agent_conf()])

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

    def adopt(self, *args):
        return subprocess.run(
            [os.path.join(harness.BIN, 'trove-upgrade-adopt'),
             '--config-file', self.write_agent_conf(),
             '--venv', self.layout.venv] + list(args),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def wait_for_pong(self):
        return self.wait_for(lambda: self.pinger.ping() is None,
                             'the guest agent to answer on its topic',
                             PING_WAIT)

    def upgrade(self, package, strategy='local', location=None):
        upgrade = self.create_upgrade(
            TO, strategy=strategy, location=location or os.path.join(
                self.repo, 'trove-%s.pkg' % package))
        return self.wait_for_status(upgrade['id'], states.FINAL_STATES,
                                    timeout=600)

    def _agent_registered(self):
        try:
            agent = db_agents.get_agent(self.context, self.instance_id)
        except exception.AgentNotFoundError:
            return None
        return agent if agent['guest_version'] == FROM else None


class TestTroveGuestAgentUpgrade(TroveGuestTestCase):

    builds = {'good': None, 'no-import': 'import', 'exits': 'exit',
              'plain': 'plain'}

    def test_adopt_refuse_broken_builds_then_upgrade(self):
        self.wait_for_pong()
        image_pid = self.supervisord.pid()
        self.assertEqual(self.layout.venv, guest.venv_of(image_pid))

        # Adoption: not a venv is refused; the image's venv is adopted
        # without a restart; a second adoption changes nothing.
        refused = subprocess.run(
            [os.path.join(harness.BIN, 'trove-upgrade-adopt'),
             '--config-file', self.write_agent_conf(),
             '--venv', self.layout.conf_dir],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.assertEqual(1, refused.returncode, refused.stdout)
        self.assertIn('is not a virtualenv', refused.stdout)
        self.assertFalse(os.path.lexists(
            os.path.join(self.install_root, 'current')))
        done = self.adopt()
        self.assertEqual(0, done.returncode, done.stdout)
        self.assertIn('adopted', done.stdout)
        again = self.adopt()
        self.assertEqual(0, again.returncode, again.stdout)
        self.assertIn('already adopted', again.stdout)
        self.assertEqual(FROM, self.current_version())
        self.assertEqual(image_pid, self.supervisord.pid())
        self.assertEqual(
            os.path.join(self.install_root, 'current', 'bin',
                         guest.CONSOLE_SCRIPT),
            os.readlink(self.program_link))
        self.assertEqual(
            FROM, journal_mod.UpgradeJournal(
                self.install_root).read()['last_known_good'])

        self.start_agent()
        self.wait_for(lambda: self._agent_registered(),
                      'the agent to register with guest version %s' % FROM)
        self.assertEqual(image_pid, self.supervisord.pid())

        # A build of 26.0.0 whose trove package cannot import is refused
        # before the switch; the running guest agent is untouched.
        failed = self.upgrade('no-import')
        self.assertEqual(states.FAILED, failed['status'], failed['events'])
        self.assertIn('install failed', failed['events'][-1]['detail'])
        self.assertEqual(image_pid, self.supervisord.pid())
        self.assertIsNone(self.pinger.ping())

        # A build whose guest agent exits at start, and one that runs but
        # does not answer the keyed ping (it ignores the instance key), are
        # rolled back: 25.1.0 runs again and answers on its topic, and the
        # reason, one short line, says so.
        for build, why in (('exits', 'the guest agent exited'),
                           ('plain', 'cannot read the reply')):
            failed = self.upgrade(build)
            self.assertEqual(states.FAILED, failed['status'],
                             failed['events'])
            detail = failed['events'][-1]['detail']
            self.assertIn(why, detail)
            self.assertTrue(detail.endswith(
                'rolled back to %s, which is running' % FROM), detail)
            self.assertNotIn('failed too', detail)
            self.assertNotIn('Traceback', detail)
            self.assertLess(len(detail), 600)
            self.assertEqual(FROM, self.current_version())
            self.wait_for_pong()
            self.assertEqual(self.layout.venv,
                             guest.venv_of(self.supervisord.pid()))

        # The real 26.0.0: installed side by side, restarted through
        # supervisord, answering on its topic, recorded SUCCESS.
        done = self.upgrade('good')
        self.assertEqual(states.SUCCESS, done['status'], done['events'])
        self.assertEqual(FROM, done['from_version'])
        self.assertEqual(TO, self.current_version())
        self.assertIsNone(self.pinger.ping())
        installs = install.InstallRoot(
            self.install_root, journal_mod.InstallRootLock(self.install_root))
        self.assertEqual(os.path.realpath(installs.path(TO)),
                         guest.venv_of(self.supervisord.pid()))
        self.assertTrue(os.path.isdir(self.layout.venv))
        journal = self.wait_for_outbox_empty()
        self.assertEqual(TO, journal['last_known_good'])

        # The agent crashes; the adoption its unit runs before each start
        # (install/guest-image.rst) succeeds, changing nothing. It was
        # refused once current had moved on, and the agent never started.
        pid = self.supervisord.pid()
        self.kill_agent()
        again = self.adopt()
        self.assertEqual(0, again.returncode, again.stdout)
        self.assertIn('already adopted', again.stdout)
        self.assertEqual(TO, self.current_version())
        self.assertEqual(pid, self.supervisord.pid())
