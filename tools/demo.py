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

"""The whole story of trove-upgrade on one machine, step by step.

Started by ``tools/demo.sh`` (the README's main command) once the virtualenv
is ready. By default it upgrades the real OpenStack Trove guest agent
(``tools/demo_trove.py``). With ``--sample`` it starts the API (noauth2,
SQLite), the conductor and three guest-side agents, each running v1.0.0 of
a sample guest agent from its own install root; builds a signed, encrypted
v1.0.1, a broken v1.0.2 and a v1.0.3 that is tampered with after signing,
with ``trove-upgrade-package``; upgrades all three agents to v1.0.1; sends
v1.0.2 to one (rolled back) and the tampered package to another
(rejected); and shows the final tables with the ``openstack`` CLI.

Each step prints what it does and what it saw. It stops everything it
started and removes its files, also when a step fails, and fails when a
process it started still runs. CI runs both stories through
``tools/demo.sh`` (``.ci/run``).

Every process listens on or connects to loopback only. RabbitMQ must answer
on 127.0.0.1:5672 (``tools/start-services.sh rabbitmq`` sees to that).
"""

# The threading backend of oslo.service, as the services select it.
from trove_upgrade.common import threading_backend  # noqa: F401

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid

from trove_upgrade.agent import install
from trove_upgrade.agent import journal
from trove_upgrade.common import states

# What the demo shares with the functional tests (tools/testbed), from the
# repository's root.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
from tools.testbed import conffile  # noqa: E402
from tools.testbed import sample_guest  # noqa: E402

import demo_support  # noqa: E402
from demo_support import DemoFailed  # noqa: E402
from demo_support import flip_byte  # noqa: E402
from demo_support import say  # noqa: E402
from demo_support import step  # noqa: E402

BIN = os.path.dirname(sys.executable)
RABBIT = 'rabbit://guest:guest@127.0.0.1:5672/'
PROJECT = 'demo-project'
AGENTS = 3
# Seconds a step waits for what it expects: long enough for a loaded
# machine (verifying and installing Trove took minutes on a shared one);
# only a broken run waits it out.
WAIT = 600


class Demo:

    # The queues and exchange of the demo go away with its processes.
    auto_delete_queues = True

    def __init__(self, workdir):
        self.dir = workdir
        self.repo = os.path.join(workdir, 'packages')
        self.keys = os.path.join(workdir, 'keys')
        self.wheels = os.path.join(workdir, 'wheels')
        for path in (self.repo, self.keys, self.wheels):
            os.makedirs(path)
        self.processes = []
        # RabbitMQ names a topic's queue after the topic alone, whatever the
        # exchange: a topic of its own keeps the demo apart from anything
        # else on the broker.
        self.exchange = 'trove_upgrade_demo_%s' % uuid.uuid4().hex[:8]
        self.conductor_topic = self.exchange + '_conductor'
        self.instances = [str(uuid.uuid4()) for _ in range(AGENTS)]
        self.api_url = None

    # Running things.

    def run(self, *argv, check=True):
        """Run a command to completion; return its standard output."""
        proc = subprocess.run(argv, capture_output=True, text=True,
                              cwd=self.dir)
        if check and proc.returncode != 0:
            raise DemoFailed('%s exited %d: %s' % (
                os.path.basename(argv[0]), proc.returncode,
                (proc.stderr or proc.stdout).strip()[-2000:]))
        return proc

    def tool(self, name, *args, check=True):
        return self.run(os.path.join(BIN, name), *args, check=check)

    def openstack(self, *args, check=True):
        return self.tool('openstack', '--os-auth-type', 'none',
                         '--os-guest-upgrade-url',
                         '%s/v1.0/%s' % (self.api_url, PROJECT),
                         *args, check=check)

    def spawn(self, name, *argv):
        log = open(os.path.join(self.dir, name + '.log'), 'ab')
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=self.dir,
                                start_new_session=True)
        log.close()
        self.processes.append((name, proc))
        return proc

    def log(self, name):
        with open(os.path.join(self.dir, name + '.log')) as f:
            return f.read()

    def wait_for(self, predicate, what, timeout=WAIT):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            for name, proc in self.processes:
                if proc.poll() is not None and not name.startswith('guest'):
                    raise DemoFailed('%s exited while waiting for %s:\n%s'
                                     % (name, what, self.log(name)[-3000:]))
            time.sleep(0.2)
        raise DemoFailed('timed out waiting for %s' % what)

    def stop_all(self):
        """Stop every service started and every guest agent they started."""
        for name, proc in reversed(self.processes):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for name, proc in reversed(self.processes):
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        # The agent leaves the guest agent running when it stops, as it
        # must in production; the demo stops the guests too.
        guests = [s['pid'] for s in map(self.guest_status, range(AGENTS))
                  if s]
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in guests:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + 10
            while guests and time.monotonic() < deadline:
                guests = [pid for pid in guests if _alive(pid)]
                time.sleep(0.1)

    # The pieces.

    def build_packages(self):
        step(1, 'Build signed, encrypted packages with trove-upgrade-package')
        signing = os.path.join(self.keys, 'signing.key')
        encryption = os.path.join(self.keys, 'encryption.key')
        out = self.tool('trove-upgrade-package', 'keygen',
                        '--signing-key', signing,
                        '--encryption-key', encryption).stdout
        say('   keygen: %s' % ' '.join(out.split())[:150])
        self.signing, self.encryption = signing, encryption
        health = sample_guest.health_command('../../guest-run')
        for version, behaviour in (('1.0.1', 'ok'), ('1.0.2', 'crash'),
                                   ('1.0.3', 'ok')):
            wheel = sample_guest.build_wheel(
                os.path.join(self.wheels, version), version, behaviour)
            path = os.path.join(self.repo, 'guest-v%s.pkg' % version)
            self.tool('trove-upgrade-package', 'build', wheel,
                      '--version', 'v' + version, '--output', path,
                      '--signing-key', signing, '--encryption-key',
                      encryption, '--health-check', health,
                      '--health-check-timeout', '10')
            info = json.loads(self.tool(
                'trove-upgrade-package', 'inspect', path, '--format',
                'json').stdout)
            say('   built v%s (%s guest agent): %s, %d bytes, signed by %s'
                % (version, 'working' if behaviour == 'ok' else
                   'crashes at start', os.path.basename(path),
                   os.path.getsize(path), _key_ids(info)))
        # v1.0.3 with one byte of its encrypted payload flipped on the way,
        # served with its genuine signed manifest.
        offset = flip_byte(os.path.join(self.repo, 'guest-v1.0.3.pkg'))
        say('   tampered with guest-v1.0.3.pkg: one byte flipped at offset '
            '%d' % offset)

    def start_control_plane(self):
        step(2, 'Start the control plane: database, API (noauth2), '
                'conductor')
        self.conf = os.path.join(self.dir, 'trove-upgrade.conf')
        conffile.write_conf(self.conf, {
            'DEFAULT': {'state_path': self.dir, 'transport_url': RABBIT,
                        'control_exchange': self.exchange},
            'api': {'auth_strategy': 'noauth2', 'bind_host': '127.0.0.1',
                    'bind_port': 0},
            'conductor': {'topic': self.conductor_topic,
                          'periodic_interval': 5, 'upgrade_timeout': 600,
                          'require_sealed': True},
            'oslo_messaging_rabbit': {
                'amqp_auto_delete': self.auto_delete_queues},
        })
        self.tool('trove-upgrade-manage', '--config-file', self.conf,
                  'db', 'sync')
        version = self.tool('trove-upgrade-manage', '--config-file',
                            self.conf, 'db', 'version').stdout.strip()
        say('   database: SQLite at %s, schema %s'
            % (os.path.join(self.dir, 'trove_upgrade.sqlite'), version))
        self.spawn('api', os.path.join(BIN, 'trove-upgrade-api'),
                   '--config-file', self.conf)
        port = self.wait_for(lambda: _listening(self.log('api')),
                             'the API to listen')
        self.api_url = 'http://127.0.0.1:%s' % port
        say('   trove-upgrade-api listening on %s' % self.api_url)
        self.spawn('conductor', os.path.join(BIN, 'trove-upgrade-conductor'),
                   '--config-file', self.conf)
        say('   trove-upgrade-conductor consuming on RabbitMQ exchange %s'
            % self.exchange)

    def install_root(self, index):
        return os.path.join(self.dir, 'agent-%d' % index)

    def start_agents(self):
        """Provision keys and installs, start the agents, list them."""
        step(3, 'Start three guest-side agents, each running guest agent '
                'v1.0.0, each with its own message-sealing key')
        wheel = sample_guest.build_wheel(
            os.path.join(self.wheels, '1.0.0'), '1.0.0')
        for index, instance in enumerate(self.instances):
            root = self.install_root(index)
            # What the instance image does: install the first guest agent.
            installs = install.InstallRoot(root,
                                           journal.InstallRootLock(root))
            installs.install('v1.0.0', [wheel])
            installs.switch('v1.0.0')
            # Each instance's sealing key: the control plane keeps it in
            # its database, the agent gets the file.
            key_file = os.path.join(root, 'instance.key')
            self.tool('trove-upgrade-manage', '--config-file', self.conf,
                      'instance-key', 'set', instance, '--key-file',
                      key_file)
            strategies = os.path.join(root, 'strategies.d')
            os.makedirs(strategies)
            conffile.write_conf(os.path.join(strategies, 'local.conf'),
                                {'local': {'allowed_dirs': [self.repo]}})
            conf = os.path.join(self.dir, 'agent-%d.conf' % index)
            conffile.write_conf(conf, {
                'DEFAULT': {'state_path': root, 'transport_url': RABBIT,
                            'control_exchange': self.exchange},
                'oslo_messaging_rabbit': {'amqp_auto_delete': True},
                'conductor': {'topic': self.conductor_topic},
                'agent': {
                    'instance_id': instance,
                    'install_root': root,
                    'guest_command': sample_guest.guest_command(
                        '../../guest-run'),
                    'guest_automatic_updates': True,
                    'health_grace': 1,
                    'health_timeout': 10,
                    'heartbeat_interval': 5,
                    'report_interval': 1,
                    'labels': {'group': 'demo', 'datastore': 'mysql'},
                    'trusted_key_files': [self.signing + '.pub'],
                    'decryption_key_files': [self.encryption],
                    'strategy_config_dir': strategies,
                    'allowed_strategies': ['local'],
                    'guest_state_file': os.path.join(root, 'guest-state'),
                    'instance_key_file': key_file,
                    'require_sealed': True,
                },
            })
            self.spawn('agent-%d' % index,
                       os.path.join(BIN, 'trove-upgrade-agent'),
                       '--config-file', conf)
        self.wait_for(self._all_registered, 'the agents to register')
        for index in range(AGENTS):
            say('   agent %d: instance %s, guest agent %s running (pid %s)'
                % (index, self.instances[index],
                   self.guest_status(index)['version'],
                   self.guest_status(index)['pid']))
        say()
        say('$ openstack database agent list --long')
        say(self.openstack('database', 'agent', 'list', '--long',
                           '-c', 'Instance ID', '-c', 'Guest Version',
                           '-c', 'State', '-c', 'Labels').stdout.rstrip())

    def _all_registered(self):
        agents = json.loads(self.openstack('database', 'agent', 'list',
                                           '-f', 'json').stdout)
        return len(agents) == AGENTS

    def guest_status(self, index):
        path = os.path.join(self.install_root(index), 'guest-run',
                            'status.json')
        try:
            with open(path) as f:
                status = json.load(f)
            os.kill(status['pid'], 0)
        except (OSError, ValueError, KeyError):
            return None
        return status

    def upgrade(self, index, package, allow_downgrade=False):
        """Start an upgrade with the CLI; return its id."""
        args = ['database', 'upgrade', 'create', self.instances[index],
                '--instance-version', _version_of(package),
                '--strategy', 'local',
                '--location', os.path.join(self.repo, package),
                '-f', 'json']
        if allow_downgrade:
            args.append('--allow-downgrade')
        created = json.loads(self.openstack(*args).stdout)
        say('   agent %d: upgrade %s to %s: %s'
            % (index, created['id'], created['instance_version'],
               created['status']))
        return created['id']

    def show(self, upgrade_id):
        return json.loads(self.openstack('database', 'upgrade', 'show',
                                         upgrade_id, '-f', 'json').stdout)

    def follow(self, upgrade_ids):
        """Print each state change of the upgrades until all are final."""
        seen = {upgrade_id: 0 for upgrade_id in upgrade_ids}

        def all_final():
            finals = {}
            for upgrade_id in upgrade_ids:
                shown = self.show(upgrade_id)
                events = shown['events']
                for event in events[seen[upgrade_id]:]:
                    say('   %s  %-11s -> %-11s %s'
                        % (upgrade_id[:8], event['from_state'] or '',
                           event['to_state'], event['detail'] or ''))
                seen[upgrade_id] = len(events)
                if shown['status'] in states.FINAL_STATES:
                    finals[upgrade_id] = shown
            return finals if len(finals) == len(upgrade_ids) else None

        return self.wait_for(all_final, 'the upgrades to finish')

    def upgrade_all(self):
        step(4, 'Upgrade all three agents to v1.0.1 '
                '(openstack database upgrade create)')
        ids = [self.upgrade(index, 'guest-v1.0.1.pkg')
               for index in range(AGENTS)]
        finals = self.follow(ids)
        for index, upgrade_id in enumerate(ids):
            status = finals[upgrade_id]['status']
            running = self.guest_status(index)
            say('   agent %d: %s, guest agent %s running (pid %s)'
                % (index, status, running and running['version'],
                   running and running['pid']))
            if status != states.SUCCESS or running['version'] != '1.0.1':
                raise DemoFailed('agent %d did not end on v1.0.1: %s'
                                 % (index, finals[upgrade_id]))

    def broken_upgrade(self):
        step(5, 'Send the broken v1.0.2 to agent 0: it crashes at start, '
                'the agent rolls back')
        upgrade_id = self.upgrade(0, 'guest-v1.0.2.pkg')
        final = self.follow([upgrade_id])[upgrade_id]
        running = self.guest_status(0)
        say('   result: %s: %s' % (final['status'], final['status_detail']))
        say('   agent 0: guest agent %s running (pid %s)'
            % (running and running['version'], running and running['pid']))
        if final['status'] not in (states.FAILED, states.ROLLED_BACK) or \
                not running or running['version'] != '1.0.1':
            raise DemoFailed('v1.0.2 was not rolled back: %s' % final)

    def tampered_upgrade(self):
        step(6, 'Send the tampered package to agent 1: rejected before '
                'anything is installed')
        before = self.guest_status(1)
        upgrade_id = self.upgrade(1, 'guest-v1.0.3.pkg')
        final = self.follow([upgrade_id])[upgrade_id]
        after = self.guest_status(1)
        say('   result: %s: %s' % (final['status'], final['status_detail']))
        say('   agent 1: guest agent %s still running, same pid %s'
            % (after and after['version'], after and after['pid']))
        if final['status'] != states.FAILED or not after or \
                after['pid'] != before['pid']:
            raise DemoFailed('the tampered package was not refused '
                             'cleanly: %s' % final)

    def show_tables(self):
        step(7, 'The final state, as an operator sees it with the CLI')
        say('$ openstack database upgrade list')
        say(self.openstack('database', 'upgrade', 'list', '-c', 'ID',
                           '-c', 'Instance ID', '-c', 'Instance Version',
                           '-c', 'Status').stdout.rstrip())
        say('$ openstack database agent list')
        say(self.openstack('database', 'agent', 'list').stdout.rstrip())
        errors = self.openstack('database', 'upgrade', 'cancel',
                                'not-an-upgrade', check=False)
        say('$ openstack database upgrade cancel not-an-upgrade')
        say('   exit %d: %s' % (errors.returncode, errors.stderr.strip()))


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _key_ids(info):
    return ', '.join(s['key_id'][:16] for s in info['signatures'])


def _version_of(package):
    return re.match(r'guest-(v\d+(?:\.\d+)*)', package).group(1)


def _listening(log):
    found = re.search(r'serving on http://127\.0\.0\.1:(\d+)', log)
    return found and found.group(1)


def _exit_on_signal(signum, frame):
    raise SystemExit(128 + signum)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--keep', action='store_true',
                        help='keep the working directory and its logs')
    parser.add_argument('--sample', action='store_true',
                        help='the quick story with three sample guest '
                        'agents instead of the real Trove guest agent')
    args = parser.parse_args()
    # Stopped by a signal, the demo still unwinds through its ``finally``
    # blocks, which stop every process it started.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _exit_on_signal)
    workdir = tempfile.mkdtemp(prefix='trove-upgrade-demo-')
    # The agents' download step, as [agent] untrusted_user, reads the
    # packages in it; the keys' files stay private by their own mode.
    os.chmod(workdir, 0o711)
    if not args.sample:
        return _run_trove(workdir, args.keep)
    demo = Demo(workdir)
    try:
        demo.build_packages()
        demo.start_control_plane()
        demo.start_agents()
        demo.upgrade_all()
        demo.broken_upgrade()
        demo.tampered_upgrade()
        demo.show_tables()
    except DemoFailed as e:
        say()
        say('DEMO FAILED: %s' % e)
        say('logs: %s' % workdir)
        args.keep = True
        return 1
    finally:
        demo.stop_all()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return demo_support.complete(workdir)


def _run_trove(workdir, keep):
    """The real Trove guest agent's story (tools/demo_trove.py)."""
    import demo_trove
    try:
        demo_trove.run(workdir)
    except DemoFailed as e:
        say()
        say('DEMO FAILED: %s' % e)
        say('logs: %s' % workdir)
        return 1
    if not keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return demo_support.complete(workdir)


if __name__ == '__main__':
    sys.exit(main())
