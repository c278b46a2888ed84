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

"""The demo with the real OpenStack Trove guest agent, 25.1.0 to 26.0.0.

Run by ``tools/demo.py`` (the default; ``--sample`` runs the quick story
with a sample guest agent instead). It builds a signed, encrypted package of
Trove 26.0.0 from the requirement specifier with ``trove-upgrade-package
build --requirement trove==26.0.0`` (pip collects every wheel, with
progress; the wheels are cached, so a second run downloads nothing), lays
out a Trove guest as Trove's image does (``/opt/guest-agent-venv`` with
Trove 25.1.0 installed by pip, ``/etc/trove/conf.d``, the
``/usr/local/bin/guest-agent`` link) under a temporary directory, runs
``trove-guestagent`` under supervisord, adopts it with
``trove-upgrade-adopt`` without a restart, and upgrades it: first with a
tampered copy of the 26.0.0 package (refused before anything is installed,
the running guest agent untouched), then with a build whose guest agent
exits at start (rolled back, 25.1.0 answers on its topic again), then with
the real 26.0.0 (SUCCESS, 26.0.0 answers).
"""

# The threading backend of oslo.service, as the services select it.
from trove_upgrade.common import threading_backend  # noqa: F401

import json
import os
import shutil
import socket
import subprocess
import time
import uuid

import kombu

from trove_upgrade.agent import trove_guest
from trove_upgrade.common import rpc_interface
from trove_upgrade.common import states

import demo as demo_mod
import demo_support
from tools.testbed import conffile
from tools.testbed import guest
from tools.testbed import trove_release

FROM = '25.1.0'
TO = '26.0.0'
say = demo_support.say
step = demo_support.step


class TroveDemo(demo_mod.Demo):

    # The agent pings Trove's guest agent with its own driver options, and
    # Trove declares its exchange without auto-delete: every process of
    # this demo declares exchanges as Trove does.
    auto_delete_queues = False

    def __init__(self, workdir):
        super().__init__(workdir)
        self.cache = trove_release.cache_dir()
        self.instance = self.instances[0]
        self.trove_exchange = 'trove_demo_%s' % uuid.uuid4().hex[:8]
        self.fixtures = []

    def use(self, fixture):
        fixture.setUp()
        self.fixtures.append(fixture)
        return fixture

    def stop_all(self):
        super().stop_all()
        for fixture in reversed(self.fixtures):
            fixture.cleanUp()
        self.remove_broker_objects()

    def remove_broker_objects(self):
        """Delete the exchanges and queues this demo's processes declared.

        Declared without auto-delete, as Trove declares them, they would
        stay on the broker after the demo. Each topic has a queue of its
        own and one per server: the host for ours, the guest id for
        Trove's guest agent. Deleting a missing one is no error.
        """
        host = socket.gethostname()
        agent_topic = '%s.%s.%s' % (self.exchange,
                                    rpc_interface.AGENT_TOPIC_PREFIX,
                                    self.instance)
        trove_topic = trove_guest.TOPIC_PREFIX + self.instance
        queues = [self.conductor_topic, '%s.%s' % (self.conductor_topic, host),
                  agent_topic, '%s.%s' % (agent_topic, host),
                  trove_topic, '%s.%s' % (trove_topic, self.instance)]
        # kombu names oslo.messaging's rabbit:// transport amqp://.
        url = 'amqp://' + demo_mod.RABBIT.split('://', 1)[1]
        with kombu.Connection(url) as connection:
            for name in queues:
                connection.channel().queue_delete(name)
            for name in (self.exchange, self.trove_exchange):
                connection.channel().exchange_delete(name)

    def build_packages(self):
        step(1, 'Build packages of Trove %s from its requirement specifier'
             % TO)
        self.signing = os.path.join(self.keys, 'release.key')
        self.encryption = os.path.join(self.keys, 'payload.key')
        self.tool('trove-upgrade-package', 'keygen', '--signing-key',
                  self.signing, '--encryption-key', self.encryption)
        broken = guest.broken_trove_wheel(
            TO, 'exit', os.path.join(self.wheels, 'broken'), self.cache)
        for name, extra in (('trove-26.0.0.pkg', []),
                            ('trove-26.0.0-exits.pkg', [broken])):
            argv = [os.path.join(demo_mod.BIN, 'trove-upgrade-package'),
                    'build', *extra, '--requirement', 'trove==%s' % TO,
                    '--wheel-cache', self.cache,
                    '--guest-agent-script', guest.CONSOLE_SCRIPT,
                    '--version', TO,
                    '--output', os.path.join(self.repo, name),
                    '--signing-key', self.signing,
                    '--encryption-key', self.encryption]
            say('$ trove-upgrade-package build %s--requirement trove==%s '
                '--guest-agent-script trove-guestagent --version %s '
                '--output %s ...' % ('<trove wheel that exits at start> '
                                     if extra else '', TO, TO, name))
            started = time.monotonic()
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True)
            for line in proc.stdout:
                say('   ' + line.rstrip())
            if proc.wait() != 0:
                raise demo_support.DemoFailed('building %s failed' % name)
            say('   (%.1f s)' % (time.monotonic() - started))

    def start_guest(self):
        step(3, 'A Trove guest as Trove\'s image leaves it: Trove %s in '
             '/opt/guest-agent-venv, run by a service manager' % FROM)
        root = os.path.join(self.dir, 'guest')
        self.layout = self.use(guest.TroveGuestLayout(
            root, self.instance, demo_mod.RABBIT, self.trove_exchange))
        say('   pip install trove==%s into %s (from the cached wheels) ...'
            % (FROM, self.layout.venv))
        guest.wheelhouse(FROM, self.cache)
        guest.make_venv(self.layout.venv, FROM, self.cache)
        link_dir = os.path.join(root, 'usr', 'local', 'bin')
        os.makedirs(link_dir)
        self.link = os.path.join(link_dir, 'guest-agent')
        os.symlink(os.path.join(self.layout.venv, 'bin',
                                guest.CONSOLE_SCRIPT), self.link)
        trove_guest.write_managed_config(self.layout.conf_dir)
        docker = self.use(guest.DockerVersionAPI())
        self.supervisord = self.use(guest.Supervisord(
            os.path.join(self.dir, 'supervisor'),
            self.layout.command(self.link),
            {'DOCKER_HOST': docker.docker_host}))
        # In Trove's secure RPC format, with the key in guest_info.conf.
        self.pinger = trove_guest.RpcPing(demo_mod.RABBIT,
                                          self.trove_exchange,
                                          self.instance, 2,
                                          key=self.layout.instance_key)
        self.wait_pong()
        say('   trove-guestagent %s (pid %d, supervisord) answers '
            'oslo_rpc_server_ping on topic guestagent.%s'
            % (FROM, self.supervisord.pid(), self.instance))

    def wait_pong(self):
        self.wait_for(lambda: self.pinger.ping() is None,
                      'the guest agent to answer on its topic')

    def adopt_and_start_agent(self):
        step(4, 'Adopt the running guest agent (no reinstall, no restart) '
                'and start the upgrade agent')
        root = self.install_root(0)
        key_file = os.path.join(self.dir, 'instance.key')
        self.tool('trove-upgrade-manage', '--config-file', self.conf,
                  'instance-key', 'set', self.instance, '--key-file',
                  key_file)
        strategies = os.path.join(self.dir, 'strategies.d')
        conffile.write_conf(os.path.join(strategies, 'local.conf'),
                            {'local': {'allowed_dirs': [self.repo]}})
        conf = os.path.join(self.dir, 'agent.conf')
        conffile.write_conf(conf, {
            # No amqp_auto_delete here: the health ping declares Trove's
            # exchange with the agent's driver options, which must match
            # what trove-guestagent declared (Trove's default, false).
            'DEFAULT': {'state_path': root,
                        'control_exchange': self.exchange},
            'conductor': {'topic': self.conductor_topic},
            'trove_guest': {'config_dir': self.layout.conf_dir},
            'agent': {
                'install_root': root,
                'service_manager': 'supervisord',
                'service_name': guest.PROGRAM,
                'supervisorctl_command': self.supervisord.ctl,
                'guest_program_link': self.link,
                'guest_automatic_updates': True,
                'health_grace': 1, 'health_timeout': 120,
                'restart_retries': 1, 'stop_timeout': 15,
                'heartbeat_interval': 5, 'report_interval': 1,
                'trusted_key_files': [self.signing + '.pub'],
                'decryption_key_files': [self.encryption],
                'strategy_config_dir': strategies,
                'allowed_strategies': ['local'],
                'guest_state_file': os.path.join(self.dir, 'guest-state'),
                'instance_key_file': key_file,
                'require_sealed': True,
            },
        })
        pid = self.supervisord.pid()
        say('$ trove-upgrade-adopt --venv %s' % self.layout.venv)
        say('   ' + self.tool('trove-upgrade-adopt', '--config-file', conf,
                              '--venv', self.layout.venv).stdout.strip())
        say('   guest agent pid before %d, after %d; %s -> %s'
            % (pid, self.supervisord.pid(), self.link,
               os.readlink(self.link)))
        self.spawn('agent-0', os.path.join(demo_mod.BIN,
                                           'trove-upgrade-agent'),
                   '--config-file', conf)
        self.wait_for(lambda: self._registered(), 'the agent to register')
        say('   trove-upgrade-agent registered: instance id and bus URL '
            'read from %s' % self.layout.conf_dir)

    def _registered(self):
        agents = json.loads(self.openstack('database', 'agent', 'list',
                                           '-f', 'json').stdout)
        return bool(agents)

    def upgrade_to(self, package):
        """Upgrade the instance with ``package``; the final record."""
        say('$ openstack database upgrade create %s --instance-version %s '
            '--strategy local --location .../%s'
            % (self.instance, TO, package))
        created = json.loads(self.openstack(
            'database', 'upgrade', 'create', self.instance,
            '--instance-version', TO, '--strategy', 'local',
            '--location', os.path.join(self.repo, package),
            '-f', 'json').stdout)
        final = self.follow([created['id']])[created['id']]
        say('   result: %s: %s' % (final['status'], final['status_detail']))
        return final

    def refuse_tampered(self, number):
        step(number, 'Send a tampered copy of the %s package: refused before '
             'anything is installed, the guest agent untouched' % TO)
        package = 'trove-26.0.0-tampered.pkg'
        for suffix in ('', '.manifest'):
            shutil.copyfile(
                os.path.join(self.repo, 'trove-26.0.0.pkg' + suffix),
                os.path.join(self.repo, package + suffix))
        offset = demo_support.flip_byte(os.path.join(self.repo, package))
        say('   a copy of trove-26.0.0.pkg with one byte of its encrypted '
            'payload flipped at offset %d, its signed manifest genuine'
            % offset)
        pid = self.supervisord.pid()
        venv = guest.venv_of(pid)
        link = os.readlink(self.link)
        final = self.upgrade_to(package)
        self.wait_pong()
        after = self.supervisord.pid()
        say('   guest agent pid %d (before: %d) runs from %s and answers on '
            'its topic; %s -> %s (before: %s)'
            % (after, pid, guest.venv_of(after), self.link,
               os.readlink(self.link), link))
        if final['status'] != states.FAILED or \
                'package rejected' not in final['status_detail'] or \
                after != pid or \
                guest.venv_of(after) != venv or \
                os.readlink(self.link) != link:
            raise demo_support.DemoFailed(
                'the tampered package was not refused cleanly: %s' % final)

    def run_upgrade(self, number, package, what, expect):
        step(number, what)
        final = self.upgrade_to(package)
        self.wait_pong()
        pid = self.supervisord.pid()
        say('   guest agent pid %d runs from %s and answers on its topic'
            % (pid, guest.venv_of(pid)))
        if final['status'] != expect:
            raise demo_support.DemoFailed('expected %s: %s' % (expect, final))


def run(demo_dir):
    demo = TroveDemo(demo_dir)
    try:
        demo.build_packages()
        demo.start_control_plane()
        demo.start_guest()
        demo.adopt_and_start_agent()
        demo.refuse_tampered(5)
        demo.run_upgrade(6, 'trove-26.0.0-exits.pkg',
                         'Upgrade to a build of %s whose guest agent exits '
                         'at start: rolled back' % TO, states.FAILED)
        demo.run_upgrade(7, 'trove-26.0.0.pkg',
                         'Upgrade the real trove-guestagent %s -> %s'
                         % (FROM, TO), states.SUCCESS)
        step(8, 'The records')
        say(demo.openstack('database', 'upgrade', 'list', '-c', 'ID',
                           '-c', 'Instance Version', '-c', 'Status'
                           ).stdout.rstrip())
    finally:
        demo.stop_all()
