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

"""The systemd units of etc/systemd, checked and run as systemd would.

Each unit is checked by ``systemd-analyze verify``, and its ExecStart runs
with its Environment, with the paths of the install guide
(``/opt/trove-upgrade/bin``, ``/etc/trove-upgrade``) moved to this virtual
environment and a temporary directory, and the API's port to a free one:
the API answers under gunicorn, the conductor consumes its topic on the
real RabbitMQ, both stop cleanly on SIGTERM, and the agent refuses an
incomplete configuration with the exit status its unit does not restart
on.
"""

import configparser
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.request

import fixtures
import kombu
from testtools import content

from tools.testbed import conffile
from trove_upgrade.tests import base
from trove_upgrade.tests.functional import rabbit
from trove_upgrade.tests.functional import servers

BIN = os.path.dirname(sys.executable)
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..',
                                    '..', '..'))
UNITS = os.path.join(REPO, 'etc', 'systemd')
INSTALL_BIN = '/opt/trove-upgrade/bin'
ETC = '/etc/trove-upgrade'
API_ADDRESS = '127.0.0.1:8790'
WAIT = 60


def read_unit(name):
    """The unit's sections; Environment keeps every assignment."""
    parser = configparser.ConfigParser(strict=False, interpolation=None,
                                       dict_type=_MultiDict)
    parser.optionxform = str
    with open(os.path.join(UNITS, name)) as unit:
        parser.read_file(unit)
    return parser


class _MultiDict(dict):
    """Joins repeated keys with newlines, as systemd accumulates them."""

    def __setitem__(self, key, value):
        if key in self and isinstance(value, list):
            value = self[key] + value
        super().__setitem__(key, value)


def delete_exchanges(*names):
    amqp_url = 'amqp://' + rabbit.TRANSPORT_URL.split('://', 1)[1]
    with kombu.Connection(amqp_url) as connection:
        for name in names:
            connection.default_channel.exchange_delete(name)


class UnitTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.etc = self.useFixture(fixtures.TempDir()).path
        self.state = self.useFixture(fixtures.TempDir()).path
        conffile.write_conf(os.path.join(self.etc, 'trove-upgrade.conf'),
                            {'DEFAULT': {'state_path': self.state}})
        # The install guide creates both; the units need both.
        os.mkdir(os.path.join(self.etc, 'trove-upgrade.conf.d'))

    def local(self, value):
        """A unit's value with the install guide's paths moved here."""
        return value.replace(INSTALL_BIN, BIN).replace(ETC, self.etc)

    def command(self, unit, replacements=()):
        service = unit['Service']
        argv = [self.local(arg) for arg in shlex.split(service['ExecStart'])]
        for old, new in replacements:
            argv = [arg.replace(old, new) for arg in argv]
        env = dict(os.environ)
        for line in service.get('Environment', '').splitlines():
            for assignment in shlex.split(line):
                key, value = assignment.split('=', 1)
                env[key] = self.local(value)
        return argv, env

    def start(self, name, unit, replacements=()):
        argv, env = self.command(unit, replacements)
        self.log_path = os.path.join(self.state, name + '.log')
        with open(self.log_path, 'wb') as log:
            process = subprocess.Popen(argv, env=env, stdout=log,
                                       stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL,
                                       start_new_session=True)
        self.addCleanup(lambda: self.addDetail(
            name + '-log', content.text_content(self.log())))
        self.addCleanup(self.kill, process)
        return process

    @staticmethod
    def kill(process):
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def log(self):
        with open(self.log_path) as log_file:
            return log_file.read()

    def stop(self, process):
        """SIGTERM, as systemd sends it; the service must exit 0."""
        process.send_signal(signal.SIGTERM)
        self.assertEqual(0, process.wait(WAIT), self.log())

    def wait_for_log(self, process, text):
        deadline = time.monotonic() + WAIT
        while text not in self.log():
            self.assertIsNone(process.poll(), self.log())
            self.assertLess(time.monotonic(), deadline,
                            'no "%s" in the log:\n%s' % (text, self.log()))
            time.sleep(0.2)

    def db_sync(self):
        url = 'sqlite:///' + os.path.join(self.state, 'trove_upgrade.sqlite')
        conffile.write_conf(os.path.join(self.etc, 'trove-upgrade.conf.d',
                                         '10-database.conf'),
                            {'database': {'connection': url}})
        subprocess.run([os.path.join(BIN, 'trove-upgrade-manage'),
                        '--config-file',
                        os.path.join(self.etc, 'trove-upgrade.conf'),
                        '--config-dir',
                        os.path.join(self.etc, 'trove-upgrade.conf.d'),
                        'db', 'sync'], check=True, capture_output=True,
                       timeout=WAIT)


class TestUnitFiles(UnitTestCase):

    def test_systemd_accepts_every_unit(self):
        systemd_analyze = shutil.which('systemd-analyze')
        if systemd_analyze is None:
            self.skipTest('systemd-analyze is not installed')
        directory = self.useFixture(fixtures.TempDir()).path
        names = sorted(os.listdir(UNITS))
        self.assertEqual(['trove-upgrade-agent.service',
                          'trove-upgrade-api.service',
                          'trove-upgrade-conductor.service'], names)
        for name in names:
            with open(os.path.join(UNITS, name)) as unit:
                text = unit.read().replace(INSTALL_BIN, BIN)
            with open(os.path.join(directory, name), 'w') as unit:
                unit.write(text)
        result = subprocess.run(
            [systemd_analyze, 'verify', '--man=no']
            + [os.path.join(directory, name) for name in names],
            capture_output=True, text=True, timeout=WAIT)
        self.assertEqual((0, ''), (result.returncode, result.stderr))


class TestApiUnit(UnitTestCase):

    def test_the_install_guide_shows_the_units_command(self):
        guide = os.path.join(REPO, 'doc', 'source', 'install',
                             'install-guide.rst')
        with open(guide) as guide_file:
            text = guide_file.read().replace('\\\n', ' ')
        shown = [shlex.split(line.strip()[2:]) for line in text.splitlines()
                 if 'gunicorn --bind' in line]
        self.assertEqual(1, len(shown), shown)
        environment = [word for word in shown[0] if '=' in word]
        command = [word for word in shown[0] if '=' not in word]
        service = read_unit('trove-upgrade-api.service')['Service']
        unit_command = shlex.split(service['ExecStart'])
        self.assertEqual(os.path.join(INSTALL_BIN, command[0]),
                         unit_command[0])
        self.assertEqual(command[1:], unit_command[1:])
        self.assertEqual(environment, service['Environment'].split())

    def test_gunicorn_serves_the_api_with_the_units_configuration(self):
        self.db_sync()
        conffile.write_conf(os.path.join(self.etc, 'trove-upgrade.conf.d',
                                         '30-api.conf'),
                            {'api': {'auth_strategy': 'noauth2'}})
        unit = read_unit('trove-upgrade-api.service')
        self.assertIn('--bind ' + API_ADDRESS, unit['Service']['ExecStart'])
        port = servers.free_port()
        process = self.start('api', unit,
                             [(API_ADDRESS, '127.0.0.1:%d' % port)])
        servers.wait_for_port(port, timeout=WAIT, process=process)

        with urllib.request.urlopen('http://127.0.0.1:%d/' % port,
                                    timeout=WAIT) as response:
            self.assertEqual(200, response.status)
            self.assertIn('versions', json.load(response))
        request = urllib.request.Request(
            'http://127.0.0.1:%d/v1.0/admin/mgmt/upgrades' % port,
            headers={'X-User-Id': 'admin', 'X-Project-Id': 'admin',
                     'X-Roles': 'admin'})
        with urllib.request.urlopen(request, timeout=WAIT) as response:
            self.assertEqual({'upgrades': []},
                             {'upgrades': json.load(response)['upgrades']})

        self.stop(process)


class TestConductorUnit(UnitTestCase):

    def test_conductor_consumes_and_stops_on_sigterm(self):
        self.db_sync()
        mq = self.useFixture(rabbit.RabbitMQ())
        # RabbitMQ keeps auto-delete exchanges that lost their last binding
        # during a shutdown; remove the two this conductor declares.
        self.addCleanup(delete_exchanges, mq.exchange,
                        mq.conductor_topic + '_fanout')
        drop_ins = os.path.join(self.etc, 'trove-upgrade.conf.d')
        for section, options in mq.options.items():
            conffile.write_conf(os.path.join(drop_ins, '20-%s.conf' % section),
                                {section: options})

        process = self.start('conductor',
                             read_unit('trove-upgrade-conductor.service'))
        self.wait_for_log(process, 'listening on topic %s, exchange %s'
                          % (mq.conductor_topic, mq.exchange))

        self.stop(process)


class TestAgentUnit(UnitTestCase):

    def test_a_refused_configuration_is_not_restarted(self):
        unit = read_unit('trove-upgrade-agent.service')
        self.assertEqual('process', unit['Service']['KillMode'])

        process = self.start('agent', unit)

        status = process.wait(WAIT)
        self.assertEqual(unit['Service']['RestartPreventExitStatus'],
                         str(status), self.log())
        self.assertIn('[agent] instance_id and guest_command must be set',
                      self.log())
