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

"""The console commands, run for real, given arguments that cannot work.

Each must stop with a non-zero status and one line naming what is wrong:
never a traceback, never the internal-error status, never a key stored or
a file left that the command did not finish. test_bad_options.py covers
option values in configuration files; these are the arguments themselves
(and the option values read late). The timeouts detect hangs; they are
not timing assertions.
"""

import datetime
import os
import signal
import subprocess
import time

from trove_upgrade.common import context
from trove_upgrade.package_format import build
from trove_upgrade.package_format import keys
from trove_upgrade.services import sealing_keys
from trove_upgrade.tests.fixtures import database
from trove_upgrade.tests.functional import commands

BIN = commands.BIN
TIMEOUT = commands.TIMEOUT
INSTANCE = '5b8f3a2c-1d4e-4f6a-9b7c-2e3d4f5a6b7c'
# Bytes no UTF-8 argument holds; Python passes them on as surrogates.
NOT_UTF8 = b'\xff\xfe'


def run(command, *args, env=None):
    """(status, stdout + stderr) of ``command``, which printed no traceback.

    ``args`` are text or bytes (the bytes are passed as they are).
    """
    argv = [os.fsencode(os.path.join(BIN, command))] + [
        os.fsencode(arg) for arg in args]
    done = subprocess.run(argv, capture_output=True, timeout=TIMEOUT,
                          stdin=subprocess.DEVNULL, env=env)
    output = (done.stdout + done.stderr).decode('utf-8', 'replace')
    if 'Traceback' in output:
        raise AssertionError('%s %r ended in a traceback:\n%s'
                             % (command, args, output))
    return done.returncode, output


class CommandTestCase(commands.CommandTestCase):

    def assertRefused(self, status, expected, command, *args, env=None):
        """The command exits ``status`` with one line holding ``expected``."""
        code, output = run(command, *args, env=env)
        self.assertEqual(status, code, output)
        lines = output.strip().splitlines()
        self.assertEqual(1, len(lines), output)
        self.assertIn(expected, lines[0])
        return lines[0]

    def assertUsageError(self, expected, command, *args, env=None):
        """argparse's usage error: status 2, the last line names it."""
        code, output = run(command, *args, env=env)
        self.assertEqual(2, code, output)
        self.assertIn(expected, output.strip().splitlines()[-1])


class TestPackageCommand(CommandTestCase):

    def setUp(self):
        super().setUp()
        os.mkdir(self.path('wheels'))
        with open(self.path('wheels', 'agent-1.0-py3-none-any.whl'),
                  'wb') as out:
            out.write(os.urandom(3000))
        keys.write_signing_key(self.path('sk'), keys.generate_signing_key())
        keys.write_encryption_key(self.path('ek'),
                                  keys.generate_encryption_key())
        os.mkdir(self.path('out'))

    def build_args(self, wheels, *extra):
        return ('build', wheels, '--version', 'v1.0', '-o',
                self.path('out', 'agent.pkg'), '--signing-key',
                self.path('sk'), '--encryption-key', self.path('ek')) + extra

    def test_build_refusals_are_named_not_internal_errors(self):
        # Each ended with status 4, "internal error (please report it)".
        for extra, expected in (
                (('--expires-in-days', '99999999999'),
                 'BuildError: --expires-in-days 99999999999 ends after the '
                 'year 9999'),
                (('--health-check', 'check "unclosed'),
                 'BuildError: the health-check command \'check "unclosed\' '
                 'cannot be split: No closing quotation'),
                (('--health-check', b'check ' + NOT_UTF8),
                 'BuildError: the health-check command '
                 "'check \\udcff\\udcfe' is not UTF-8 text"),
                (('--requirement', 'trove', '--python', '/bin/false'),
                 'BuildError: --python /bin/false is not a Python '
                 'interpreter (exit status 1')):
            self.assertRefused(1, 'trove-upgrade-package: error: ' + expected,
                               'trove-upgrade-package',
                               *self.build_args(self.path('wheels'), *extra))
        self.assertEqual([], os.listdir(self.path('out')))

    def test_usage_errors_are_short(self):
        # argparse quoted the value refused whole: 128 KiB on stderr.
        code, output = run('trove-upgrade-package', *self.build_args(
            self.path('wheels'), '--chunk-size', '9' * 131000))
        self.assertEqual(2, code, output[:2048])
        self.assertLess(len(output), 4096)
        self.assertIn('argument --chunk-size: ', output)

    def test_keygen_writes_both_keys_or_neither(self):
        # An encryption key that could not be written left the signing key
        # pair behind.
        signing_key = self.path('out', 'k')
        for encryption_key, status, expected in (
                (signing_key, 1, 'KeyFileExistsError: %s already exists'
                 % signing_key),
                (self.path('missing', 'e'), 3,
                 "No such file or directory: '%s'"
                 % self.path('missing', 'e'))):
            self.assertRefused(
                status, expected, 'trove-upgrade-package', 'keygen',
                '--signing-key', signing_key, '--encryption-key',
                encryption_key)
            self.assertEqual([], os.listdir(self.path('out')))

    def test_an_empty_extract_to_is_refused(self):
        # It was taken as no --extract-to: "OK", and the wheels thrown away.
        package = self.path('out', 'agent.pkg')
        build.build_package(
            build.collect_wheels([self.path('wheels')]), package,
            version='v1.0',
            signing_keys=[keys.load_signing_key(self.path('sk'))],
            encryption_key=keys.load_encryption_key(self.path('ek')),
            expires=datetime.datetime.now(datetime.timezone.utc)
            + datetime.timedelta(days=1))
        self.assertRefused(
            1, 'DestinationExistsError', 'trove-upgrade-package', 'verify',
            package, '--trusted-key', self.path('sk.pub'),
            '--encryption-key', self.path('ek'), '--extract-to', '')

    def test_sigterm_during_a_build_leaves_nothing(self):
        # Killed by the default action, the build left its partial payload.
        # A sparse wheel of 4 GiB: the build is still writing when stopped.
        big = self.path('big')
        os.mkdir(big)
        with open(os.path.join(big, 'big-1.0-py3-none-any.whl'), 'wb') as f:
            f.truncate(4 * 1024 ** 3)
        proc = subprocess.Popen(
            [os.path.join(BIN, 'trove-upgrade-package')]
            + list(self.build_args(big)), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.addCleanup(proc.stderr.close)
        # A failed assertion must not leave it writing gigabytes.
        self.addCleanup(proc.wait)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        deadline = time.monotonic() + TIMEOUT
        while not os.listdir(self.path('out')):
            self.assertIsNone(proc.poll(), 'the build ended early')
            self.assertLess(time.monotonic(), deadline, 'no partial file')
            time.sleep(0.01)
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(128 + signal.SIGTERM, proc.wait(TIMEOUT))
        self.assertEqual('trove-upgrade-package: stopped by SIGTERM; nothing '
                         'was left half-written\n', proc.stderr.read())
        self.assertEqual([], os.listdir(self.path('out')))


class TestManageInstanceKey(CommandTestCase):

    def setUp(self):
        super().setUp()
        db = self.useFixture(database.Database())
        self.config = self.path('manage.conf')
        with open(self.config, 'w') as f:
            f.write('[database]\nconnection = %s\n' % db.url)
        self.context = context.get_admin_context()

    def manage(self, *args):
        return ('trove-upgrade-manage', '--config-file', self.config) + args

    def keys(self):
        return [(k['key_id'], k['expires_at'])
                for k in sealing_keys.list_keys(self.context, INSTANCE)]

    def test_a_key_file_that_cannot_be_written_stores_no_key(self):
        # Each ended in a traceback with the key stored all the same: the
        # instance's messages sealed with a key its agent never got (and
        # rotate expired the older ones).
        missing = self.path('missing', 'kf')
        for key_file, expected in (
                (missing, "[Errno 2] No such file or directory: '%s'"
                 % missing),
                ('', "[Errno 21] Is a directory: ''")):
            self.assertRefused(1, 'Error: ' + expected, *self.manage(
                'instance-key', 'set', INSTANCE, '--key-file', key_file))
        self.assertEqual([], self.keys())
        sealing_keys.add_key(self.context, INSTANCE)
        before = self.keys()
        for output in (missing, self.tmp):
            self.assertRefused(1, 'Error: [Errno ', *self.manage(
                'instance-key', 'rotate', INSTANCE, '--output', output))
        self.assertEqual(before, self.keys())
        self.assertEqual(['manage.conf'], os.listdir(self.tmp))

    def test_arguments_that_cannot_work(self):
        # A grace past what a date holds and an empty revision ended in a
        # traceback, an instance id of bytes in oslo.db's (53 lines).
        sealing_keys.add_key(self.context, INSTANCE)
        self.assertUsageError(
            "argument --grace: a whole number of seconds from 0 to",
            *self.manage('instance-key', 'rotate', INSTANCE, '--output',
                         self.path('kf'), '--grace', '9' * 30))
        self.assertUsageError(
            'argument revision: the revision is empty',
            *self.manage('db', 'sync', ''))
        self.assertRefused(
            1, "Error: Instance key error: instance ids are UUIDs, not "
            "'\\udcff\\udcfe'",
            *self.manage('instance-key', 'list', '--instance-id', NOT_UTF8))


class TestAgentCommands(CommandTestCase):

    def write_config(self, **agent):
        config = self.path('agent.conf')
        with open(config, 'w') as f:
            f.write('[agent]\ninstall_root = %s\n' % self.path('root'))
            f.writelines('%s = %s\n' % item for item in agent.items())
        return config

    def test_adopt_with_an_option_value_read_late(self):
        # [agent] service_manager was read after the others: a traceback.
        line = self.assertRefused(
            2, 'trove-upgrade-adopt: error: Value for option '
            'service_manager', 'trove-upgrade-adopt', '--config-file',
            self.write_config(service_manager='initd'))
        self.assertIn("found 'initd'", line)

    def test_agent_says_why_once(self):
        # Logged inside the except, the reason came twice, the second time
        # with the exception's class.
        line = self.assertRefused(
            2, 'trove-upgrade-agent cannot start: [agent] instance_id and '
            'guest_command must be set', 'trove-upgrade-agent',
            '--config-file', self.write_config())
        self.assertEqual(1, line.count('must be set'), line)


class TestOpenStackCommands(CommandTestCase):
    """The plugin's commands through the real ``openstack`` executable.

    Refused before any request: the API's address is a closed port.
    """

    def openstack(self, *args):
        return ('openstack', '--os-auth-type', 'none',
                '--os-guest-upgrade-url', 'http://127.0.0.1:9/v1.0/p',
                'database') + args

    def env(self):
        """No OS_* variable nor clouds.yaml of the machine leaks in."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith('OS_')}
        env['HOME'] = self.tmp
        return env

    def test_wait_arguments(self):
        # NaN as --timeout waited forever; NaN or a negative --interval
        # ended with time.sleep's message, after a request.
        for option, value in (('--interval', 'nan'), ('--interval', '-1'),
                              ('--timeout', 'nan'), ('--timeout', 'inf')):
            self.assertUsageError(
                "argument %s: '%s' is not a number of seconds from 0 to"
                % (option, value),
                *self.openstack('rollout', 'show', 'r1', '--wait', option,
                                value), env=self.env())

    def test_usage_errors_quote_a_bounded_part(self):
        # The plugin's own checks quoted the value refused whole.
        for args in (('rollout', 'create', 'r', '--instance-version', 'v1',
                      '--group', 'g', '--max-failures', 'x' * 131000),
                     ('upgrade', 'list', '--status', 'x' * 131000)):
            code, output = run(*self.openstack(*args), env=self.env())
            self.assertEqual(2, code, output[:2048])
            self.assertLess(len(output), 4096)

    def test_arguments_that_are_not_utf8(self):
        # They ended with the codec's message, naming nothing.
        for args in (('upgrade', 'show', NOT_UTF8),
                     ('upgrade', 'list', '--instance', NOT_UTF8)):
            self.assertRefused(
                1, "The argument '\\udcff\\udcfe' is not UTF-8 text.",
                *self.openstack(*args), env=self.env())
