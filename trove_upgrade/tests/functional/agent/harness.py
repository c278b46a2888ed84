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

"""Real processes for the agent's functional tests.

Each test gets its own RabbitMQ exchange, its own SQLite control-plane
database, a real ``trove-upgrade-conductor`` process on them and a real
``trove-upgrade-agent`` process serving a fresh instance id and install
root. The test process plays the control plane: it records upgrades and
casts them with ``trove_upgrade.services.upgrades``, and reads what the
conductor recorded from the database. Each instance gets a sealing key, in the
database and in the agent's key file, and the agent requires it, so every
message both ways is sealed as in production.

Packages are real: sample guest-agent wheels built per test class, signed
and encrypted with ``trove-upgrade-package`` using keys it generated, and
served by the ``local`` strategy.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid

import fixtures
import kombu
from oslo_messaging import conffixture
from oslo_utils import uuidutils

from tools.testbed import conffile
from tools.testbed import sample_guest
from trove_upgrade.agent import install
from trove_upgrade.agent import journal
from trove_upgrade.common import context as tu_context
from trove_upgrade.common import exception
from trove_upgrade.common import rpc
from trove_upgrade.common import rpc_interface
from trove_upgrade.common import sealing
from trove_upgrade.db import agents as db_agents
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.services import sealing_keys
from trove_upgrade.services import upgrades
from trove_upgrade.tests import base
from trove_upgrade.tests.fixtures import database
from trove_upgrade.tests.functional import https_server
from trove_upgrade.tests.functional import rabbit
from trove_upgrade.tests.functional import servers

BIN = os.path.dirname(sys.executable)
RABBIT_URL = 'rabbit://guest:guest@127.0.0.1:5672/'
WAIT = 90
# Relative to the install the guest agent runs from (its working
# directory): <install_root>/guest-run, so each test has its own.
GUEST_STATE_DIR = '../../guest-run'


def _start_tool(*args):
    return subprocess.Popen([os.path.join(BIN, 'trove-upgrade-package')]
                            + list(args), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)


def _wait_tool(proc):
    output = proc.communicate()[0]
    if proc.returncode != 0:
        raise RuntimeError('%s failed: %s' % (' '.join(proc.args[:2]),
                                              output.decode()[-2000:]))


def package_tool(*args):
    _wait_tool(_start_tool(*args))


class AgentTestCase(base.TestCase):
    """Builds packages once per class; one conductor and agent per test."""

    # version -> behaviour of the packages the class builds once.
    packages = {'2.0.0': 'ok'}
    initial_version = '1.0.0'

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.class_dir = os.path.realpath(
            tempfile.mkdtemp(prefix='agent-test-'))
        # The local strategy's repository, read by the download step as
        # [agent] untrusted_user; the keys in it stay the owner's.
        os.chmod(cls.class_dir, 0o755)
        cls.keys_dir = os.path.join(cls.class_dir, 'keys')
        cls.repo = os.path.join(cls.class_dir, 'repo')
        cls.wheels = os.path.join(cls.class_dir, 'wheels')
        os.makedirs(cls.keys_dir)
        os.makedirs(cls.repo)
        cls.signing_key = os.path.join(cls.keys_dir, 'sign.key')
        cls.encryption_key = os.path.join(cls.keys_dir, 'enc.key')
        package_tool('keygen', '--signing-key', cls.signing_key,
                     '--encryption-key', cls.encryption_key)
        builds = [cls.build_package(version, behaviour, wait=False)
                  for version, behaviour in cls.packages.items()]
        for build in builds:
            _wait_tool(build)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.class_dir, ignore_errors=True)
        super().tearDownClass()

    @classmethod
    def build_package(cls, version, behaviour, name=None, padding=0,
                      wait=True):
        """Build a signed, encrypted package with trove-upgrade-package.

        Returns its location, or with ``wait=False`` the running tool.
        """
        wheel = sample_guest.build_wheel(
            os.path.join(cls.wheels, '%s-%s' % (version, behaviour)),
            version, behaviour, padding=padding)
        path = os.path.join(cls.repo, name or 'guest-%s.pkg' % version)
        proc = _start_tool(
            'build', wheel, '--version', version, '--output', path,
            '--signing-key', cls.signing_key,
            '--encryption-key', cls.encryption_key,
            '--health-check', sample_guest.health_command(GUEST_STATE_DIR),
            '--health-check-timeout', '5')
        if not wait:
            return proc
        _wait_tool(proc)
        return path

    def setUp(self):
        super().setUp()
        self.tmp = os.path.realpath(self.useFixture(fixtures.TempDir()).path)
        self.install_root = os.path.join(self.tmp, 'root')
        self.instance_id = uuidutils.generate_uuid()
        # Queue names are global in RabbitMQ, whatever the exchange: a
        # topic of its own keeps other tests' conductors off this one's.
        self.exchange, self.conductor_topic = self.bus_names()
        self.context = tu_context.get_admin_context()
        self.db = self.useFixture(self.database_fixture())
        messaging_conf = self.useFixture(conffixture.ConfFixture(self.conf))
        self.rabbit_url = self.broker_url()
        messaging_conf.transport_url = self.rabbit_url
        self.flags(control_exchange=self.exchange)
        self.flags(rabbit_transient_queues_ttl=rabbit.TRANSIENT_QUEUES_TTL,
                   group='oslo_messaging_rabbit')
        rpc.cleanup()
        self.addCleanup(rpc.cleanup)
        # Runs after the processes are killed (cleanups run last first).
        self.addCleanup(self._delete_bus_names)
        # Every instance whose agent this test starts; start_agent-like
        # helpers of subclasses add theirs.
        self.bus_instance_ids = [self.instance_id]
        # Queues and exchanges declared besides the services' own (a spy's,
        # a Trove guest agent's): deleted with them.
        self.bus_queues = []
        self.bus_exchanges = []
        self.processes = {}
        self.key_file = self.provision_key(self.instance_id)
        self.start_conductor()
        self.strategy_dir = os.path.join(self.tmp, 'strategies.d')
        servers.write_strategy_conf(self.strategy_dir, 'local',
                                    {'allowed_dirs': [self.repo]})
        self.provision(self.initial_version)

    def broker_url(self):
        """The RabbitMQ of this test: the shared one unless overridden."""
        return RABBIT_URL

    def bus_names(self):
        """(exchange, conductor topic): the test's own, unless overridden."""
        unique = uuid.uuid4().hex[:12]
        return ('trove_upgrade_test_%s' % unique,
                'trove_upgrade_conductor_test_%s' % unique)

    def _delete_bus_names(self):
        """Remove the queues and exchanges the test's services declared.

        The services' own queues are not auto-delete (an agent's queue
        must outlive the agent's restart), so the shared broker would keep
        them after the test; so are those of the test's own RPC servers,
        whose exchange is the services'.
        """
        host = socket.gethostname()
        names = list(self.bus_queues)
        topics = [rpc_interface.agent_topic(instance_id)
                  for instance_id in self.bus_instance_ids]
        for topic in topics + [self.conductor_topic]:
            names += [topic, '%s.%s' % (topic, host)]
        url = self.rabbit_url.replace('rabbit://', 'amqp://')
        with kombu.Connection(url) as connection:
            channel = connection.channel()
            for name in names:
                channel.queue_delete(name)
            for exchange in [self.exchange] + self.bus_exchanges:
                channel.exchange_delete(exchange)

    def database_fixture(self):
        """The control-plane database: a fresh one, unless overridden."""
        return database.Database()

    # Processes.

    def _spawn(self, name, argv, env=None):
        log = open(os.path.join(self.tmp, '%s.log' % name), 'ab')
        self.addCleanup(log.close)
        # A session of its own: killing it kills the service launcher and
        # its worker together, like a service manager does.
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL,
                                start_new_session=True,
                                env=dict(os.environ, **(env or {})))
        self.processes[name] = proc
        self.addCleanup(self._kill, proc)
        return proc

    @staticmethod
    def _kill(proc):
        """SIGKILL a service and its workers; tests keep nothing of them."""
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()

    def conductor_conf(self):
        """The conductor's configuration, ``{section: {option: value}}``."""
        return {
            'DEFAULT': {'transport_url': self.rabbit_url,
                        'control_exchange': self.exchange,
                        'state_path': self.tmp},
            'database': {'connection': self.db.url},
            'conductor': {'topic': self.conductor_topic},
        }

    def conductor_env(self):
        """More environment variables of the conductor's process."""
        return None

    def start_conductor(self):
        path = os.path.join(self.tmp, 'conductor.conf')
        conffile.write_conf(path, self.conductor_conf())
        return self._spawn('conductor', [
            os.path.join(BIN, 'trove-upgrade-conductor'),
            '--config-file', path], env=self.conductor_env())

    def agent_conf(self, **overrides):
        agent = {
            'instance_id': self.instance_id,
            'install_root': self.install_root,
            'guest_command': sample_guest.guest_command(GUEST_STATE_DIR),
            'guest_automatic_updates': True,
            'health_grace': 0.5,
            'health_timeout': 5,
            'stop_timeout': 5,
            'restart_retries': 2,
            'heartbeat_interval': 2,
            'report_interval': 0.5,
            'deferred_check_interval': 0.3,
            'supervise_interval': 1,
            'labels': {'group': 'blue', 'datastore': 'mysql'},
            'trusted_key_files': [self.signing_key + '.pub'],
            'decryption_key_files': [self.encryption_key],
            'strategy_config_dir': self.strategy_dir,
            'allowed_strategies': ['local'],
            'download_retries': 0,
            'guest_state_file': os.path.join(self.tmp, 'guest-state'),
            'require_sealed': True,
        }
        agent.update(overrides)
        agent.setdefault('instance_key_file',
                         self.provision_key(agent['instance_id']))
        return agent

    def start_agent(self, pause_at=None, transport_url=None, defaults=None,
                    sections=None, env=None, **overrides):
        """Start the agent; ``defaults`` go to its ``[DEFAULT]`` section.

        ``sections`` are more sections of its configuration file, ``env``
        more environment variables of its process.
        """
        transport_url = transport_url or self.rabbit_url
        path = os.path.join(self.tmp, 'agent.conf')
        conffile.write_conf(path, dict({
            'DEFAULT': dict({'transport_url': transport_url,
                             'control_exchange': self.exchange,
                             'state_path': self.tmp}, **(defaults or {})),
            'agent': self.agent_conf(**overrides),
            'conductor': {'topic': self.conductor_topic},
        }, **(sections or {})))
        env = dict(env or {},
                   TROVE_UPGRADE_AGENT_TEST_PAUSE=pause_at or '')
        proc = self._spawn('agent', [
            os.path.join(BIN, 'trove-upgrade-agent'), '--config-file',
            path], env=env)
        self.addCleanup(self.stop_guest)
        return proc

    def kill_agent(self):
        """kill -9 of the agent: its launcher and its worker."""
        self._kill(self.processes['agent'])

    def serve_over_https(self, name):
        """The repository on an HTTPS server the ``http`` strategy trusts.

        Returns the server and the size of the repository's file ``name``,
        the one its faults are then set on.
        """
        ca = https_server.CertificateAuthority(self.tmp)
        server = self.useFixture(
            https_server.HttpsFileServer(self.repo, ca=ca))
        servers.write_strategy_conf(self.strategy_dir, 'http',
                                    {'ca_file': ca.cert_file})
        return server, os.path.getsize(os.path.join(self.repo, name))

    def provision_key(self, instance_id):
        """The key file of ``instance_id``, with a key in the database."""
        path = os.path.join(self.tmp, '%s.key' % instance_id)
        if not os.path.exists(path):
            sealing_keys.add_key(self.context, instance_id)
            sealing.dump_key_file(path, sealing_keys.keyring(
                self.context, instance_id))
        return path

    def provision(self, version):
        """Install the first guest agent, as the instance image would."""
        installs = install.InstallRoot(
            self.install_root, journal.InstallRootLock(self.install_root))
        wheel = sample_guest.build_wheel(
            os.path.join(self.wheels, '%s-ok' % version), version)
        installs.install(version, [wheel])
        installs.switch(version)
        return installs

    def stop_guest(self):
        """Stop whatever guest agent the test left running."""
        status = self.guest_status()
        if status is not None:
            try:
                os.killpg(status['pid'], signal.SIGKILL)
            except ProcessLookupError:
                pass

    # Control plane.

    def create_upgrade(self, version, location=None, strategy='local',
                       allow_downgrade=False):
        return upgrades.create_upgrade(self.context, {
            'instance_id': self.instance_id,
            'instance_version': version,
            'strategy': strategy,
            'location': location or os.path.join(
                self.repo, 'guest-%s.pkg' % version),
            'allow_downgrade': allow_downgrade,
        })

    def get_upgrade(self, upgrade_id):
        return db_upgrades.get_upgrade(self.context, upgrade_id,
                                       with_events=True)

    def registered(self, instance_id=None):
        """The registered agent of the (test's) instance, or None."""
        try:
            return db_agents.get_agent(self.context,
                                       instance_id or self.instance_id)
        except exception.AgentNotFoundError:
            return None

    def wait_for(self, predicate, what, timeout=WAIT):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            for name, proc in self.processes.items():
                if proc.poll() is not None and name == 'conductor':
                    self.fail('the conductor exited: %s' % self._log(name))
            time.sleep(0.2)
        self.fail('timed out waiting for %s\nagent log:\n%s'
                  % (what, self._log('agent')))

    def _log(self, name):
        try:
            with open(os.path.join(self.tmp, '%s.log' % name)) as f:
                return f.read()[-6000:]
        except FileNotFoundError:
            return '(no log)'

    def wait_for_status(self, upgrade_id, statuses, timeout=WAIT):
        if isinstance(statuses, str):
            statuses = (statuses,)

        def done():
            upgrade = self.get_upgrade(upgrade_id)
            return upgrade if upgrade['status'] in statuses else None

        return self.wait_for(done, 'upgrade %s to reach %s'
                             % (upgrade_id, '/'.join(statuses)), timeout)

    def history(self, upgrade):
        return [e['to_state'] for e in upgrade['events']]

    # The guest.

    def guest_status(self):
        path = os.path.join(self.install_root, 'guest-run', 'status.json')
        try:
            with open(path) as f:
                status = json.load(f)
            os.kill(status['pid'], 0)
        except (OSError, ValueError, KeyError):
            return None
        return status

    def running_guest_version(self):
        status = self.guest_status()
        return status['version'] if status else None

    def wait_for_guest(self, version):
        return self.wait_for(
            lambda: self.running_guest_version() == version,
            'guest agent %s to run' % version)

    def journal(self):
        return journal.UpgradeJournal(self.install_root).read()

    def current_version(self):
        return os.path.basename(os.readlink(
            os.path.join(self.install_root, 'current')))

    def set_guest_state(self, state):
        path = os.path.join(self.tmp, 'guest-state')
        if state is None:
            os.unlink(path)
            return
        with open(path, 'w') as f:
            f.write(state + '\n')

    def wait_for_log(self, text, name='agent'):
        return self.wait_for(lambda: text in self._log_all(name),
                             '%r in the %s log' % (text, name))

    def _log_all(self, name):
        with open(os.path.join(self.tmp, '%s.log' % name)) as f:
            return f.read()

    def wait_for_outbox_empty(self):
        return self.wait_for(
            lambda: (lambda j: None if j['outbox'] else j)(self.journal()),
            'the outbox to empty')

    def wait_for_paused(self, checkpoint):
        marker = os.path.join(self.install_root,
                              'test-paused-at-' + checkpoint)
        self.wait_for(lambda: os.path.exists(marker),
                      'the agent to pause at %s' % checkpoint)
        os.unlink(marker)
