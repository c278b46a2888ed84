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

"""A console command given an option value that cannot work.

oslo.config converts a value only when it is first read; read late, a
bad one ended the process with a traceback. Each command now stops at
start with the option named and a non-zero status.
"""

import os
import subprocess
import sys

import fixtures
import testtools

BIN = os.path.dirname(sys.executable)


class TestBadOptionValue(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.config = self.useFixture(fixtures.TempDir()).join('bad.conf')

    def run_with(self, command, section, option, value, *args):
        """The command's output; it failed, without a traceback."""
        with open(self.config, 'w') as f:
            f.write('[database]\nconnection = sqlite://\n'
                    '[%s]\n%s = %s\n' % (section, option, value))
        done = subprocess.run(
            [os.path.join(BIN, command), '--config-file', self.config]
            + list(args), capture_output=True, text=True, timeout=60,
            stdin=subprocess.DEVNULL)
        output = done.stdout + done.stderr
        self.assertNotEqual(0, done.returncode, output)
        self.assertNotIn('Traceback', output)
        return output

    def assertNamed(self, command, section, option, value, *args):
        output = self.run_with(command, section, option, value, *args)
        self.assertIn(option, output)
        self.assertIn(value, output)

    def test_api(self):
        # It once ended with a traceback, as the others did.
        self.assertNamed('trove-upgrade-api', 'api', 'bind_port', 'high')

    def test_api_policy_file(self):
        policy_file = self.useFixture(fixtures.TempDir()).join('policy.yaml')
        with open(policy_file, 'w') as f:
            f.write('"a": [unclosed\n')
        output = self.run_with('trove-upgrade-api', 'oslo_policy',
                               'policy_file', policy_file)
        self.assertIn('trove-upgrade-api cannot start: The policy file %s '
                      'cannot be parsed: ' % policy_file, output)

    def test_conductor(self):
        self.assertNamed('trove-upgrade-conductor', 'conductor',
                         'heartbeat_write_interval', 'often')

    def test_notification_options(self):
        # Read at the first upgrade recorded: each one failed.
        for command in ('trove-upgrade-api', 'trove-upgrade-conductor'):
            self.assertNamed(command, 'oslo_messaging_notifications',
                             'retry', 'often')

    def test_conductor_database_driver(self):
        # It ran on, each periodic task failing with a traceback.
        output = self.run_with('trove-upgrade-conductor', 'database',
                               'connection', 'nosuchdb://h/d')
        self.assertIn('cannot start: Invalid input: [database] connection '
                      'names a database driver that is not installed: '
                      "Can't load plugin: sqlalchemy.dialects:nosuchdb",
                      output)

    def test_a_database_url_whose_port_is_no_number(self):
        # SQLAlchemy's ValueError ended manage and the conductor with a
        # traceback, and the API with "invalid literal for int()".
        for command, *args in (('trove-upgrade-manage', 'db', 'version'),
                               ('trove-upgrade-conductor',),
                               ('trove-upgrade-api',)):
            output = self.run_with(command, 'database', 'connection',
                                   'mysql+pymysql://u@[::1/d', *args)
            self.assertIn('Invalid input: [database] connection is not a '
                          'database URL', output)

    def test_a_transport_url_urllib_cannot_split(self):
        # The conductor ended in a traceback, the API with urllib's bare
        # "Invalid IPv6 URL", and the agent's forked service died of it
        # and was forked again, for ever.
        for command in ('trove-upgrade-conductor', 'trove-upgrade-api',
                        'trove-upgrade-agent'):
            output = self.run_with(command, 'DEFAULT', 'transport_url',
                                   'rabbit://u:secret@[::1:5672/')
            self.assertIn('[DEFAULT] transport_url is not a transport URL: '
                          'Invalid IPv6 URL', output)
            self.assertNotIn('secret', output)

    def test_services_refuse_a_database_without_the_schema(self):
        # They ran on, each request or periodic task failing with a
        # traceback.
        database = self.useFixture(fixtures.TempDir()).join('empty.sqlite')
        for command in ('trove-upgrade-api', 'trove-upgrade-conductor'):
            output = self.run_with(command, 'database', 'connection',
                                   'sqlite:///' + database)
            self.assertIn('%s cannot start: The database schema is not '
                          'current: the database has no schema; run: '
                          'trove-upgrade-manage db sync' % command, output)

    def test_agent(self):
        self.assertNamed('trove-upgrade-agent', 'agent', 'heartbeat_interval',
                         '-5x')

    def test_manage(self):
        self.assertNamed('trove-upgrade-manage', 'database', 'max_retries',
                         'zz', 'db', 'sync')


class TestUnreadableConfigFile(testtools.TestCase):
    """A configuration file that cannot be read or parsed: one line.

    oslo.config raised from the parse, before logging: each command ended
    with a traceback.
    """

    COMMANDS = (('trove-upgrade-api',), ('trove-upgrade-conductor',),
                ('trove-upgrade-agent',), ('trove-upgrade-manage', 'db',
                                           'version'),
                ('trove-upgrade-adopt',),
                ('trove-upgrade-status', 'upgrade', 'check'))

    def test_every_command(self):
        config = self.useFixture(fixtures.TempDir()).join('not-ini.conf')
        with open(config, 'w') as f:
            f.write('no section header\n')
        for command, *args in self.COMMANDS:
            done = subprocess.run(
                [os.path.join(BIN, command), '--config-file', config] + args,
                capture_output=True, text=True, timeout=60,
                stdin=subprocess.DEVNULL)
            output = done.stdout + done.stderr
            self.assertNotEqual(0, done.returncode, output)
            self.assertNotIn('Traceback', output)
            [line] = output.splitlines()
            self.assertTrue(line.startswith(
                '%s: cannot read its configuration: Failed to parse %s'
                % (command, config)), output)

    def test_a_fifo_is_refused_not_waited_on(self):
        # oslo.config's open() of a FIFO waited for a writer for ever.
        fifo = self.useFixture(fixtures.TempDir()).join('fifo.conf')
        os.mkfifo(fifo)
        for command, *args in self.COMMANDS + (('trove-upgrade-api',
                                                '--config-d', '/'),):
            done = subprocess.run(
                [os.path.join(BIN, command), '--config-file', fifo] + args,
                capture_output=True, text=True, timeout=60,
                stdin=subprocess.DEVNULL)
            output = done.stdout + done.stderr
            self.assertEqual(
                '%s: cannot read its configuration: Failed to parse %s: not '
                'a regular file\n' % (command, fifo), output)
            self.assertNotEqual(0, done.returncode)
