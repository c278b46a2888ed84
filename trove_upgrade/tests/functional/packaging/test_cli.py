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

"""trove-upgrade-package, run for real as a subprocess.

Every error must end with a one-line message on stderr naming what was
refused, and a non-zero exit status (1 refused, 2 usage, 3 file system).
"""

import importlib.metadata
import json
import os
import stat
import subprocess
import sys
import time

import fixtures

from trove_upgrade.cmd import package as package_cmd
from trove_upgrade.package_format import chunked_aead
from trove_upgrade.package_format import keys
from trove_upgrade.tests import base

PREFIX = 'trove-upgrade-package: error: '


class CLITestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.wheels = self.path('wheels')
        os.mkdir(self.wheels)
        for name, size in (('agent-1.0.1-py3-none-any.whl', 150000),
                           ('lib-2.0-py3-none-any.whl', 3000)):
            with open(os.path.join(self.wheels, name), 'wb') as out:
                out.write(os.urandom(size))
        for name in ('sk1', 'sk2'):
            keys.write_signing_key(self.path(name),
                                   keys.generate_signing_key())
        keys.write_encryption_key(self.path('ek'),
                                  keys.generate_encryption_key())
        self.package = self.path('agent.pkg')

    def path(self, name):
        return os.path.join(self.tmp, name)

    def run_cli(self, *args, expect=0):
        result = subprocess.run(
            [sys.executable, '-m', 'trove_upgrade.cmd.package'] + list(args),
            cwd=self.tmp, capture_output=True, text=True, timeout=120)
        self.assertEqual(expect, result.returncode,
                         'stdout: %s\nstderr: %s' % (result.stdout,
                                                     result.stderr))
        return result

    def refused(self, error, *args, expect=1):
        result = self.run_cli(*args, expect=expect)
        self.assertIn(PREFIX + error, result.stderr)
        return result

    def build(self, *extra):
        return self.run_cli('build', self.wheels, '--version', 'v1.0.1',
                            '-o', self.package, '--signing-key', 'sk1',
                            '--encryption-key', 'ek', '--chunk-size', '16K',
                            *extra)

    def verify_args(self, *extra):
        return ('verify', self.package, '--trusted-key', 'sk1.pub',
                '--encryption-key', 'ek') + extra


class TestKeygen(CLITestCase):

    def test_keygen_writes_0600_files_and_prints_key_ids(self):
        result = self.run_cli('keygen', '--signing-key', 'new',
                              '--encryption-key', 'new-ek')
        for name in ('new', 'new.pub', 'new-ek'):
            mode = os.stat(self.path(name)).st_mode
            self.assertEqual(0o600, stat.S_IMODE(mode), name)
        signing = keys.load_signing_key(self.path('new'))
        self.assertIn(signing.key_id, result.stdout)
        encryption = keys.load_encryption_key(self.path('new-ek'))
        self.assertIn(keys.encryption_key_id(encryption), result.stdout)

    def test_keygen_refuses_to_overwrite(self):
        before = keys.load_signing_key(self.path('sk1')).key_id
        self.refused('KeyFileExistsError', 'keygen', '--signing-key', 'sk1')
        self.assertEqual(before, keys.load_signing_key(self.path('sk1'))
                         .key_id)

    def test_keygen_needs_a_key_kind(self):
        self.refused('KeyFileError', 'keygen')


class TestWorkflow(CLITestCase):

    def test_build_sign_verify_inspect(self):
        self.build('--health-check', 'trove-guestagent --check "a b"',
                   '--min-upgrade-from', '1.0.0')
        self.assertTrue(os.path.exists(self.package + '.manifest'))
        threshold = ('--trusted-key', 'sk2.pub', '--threshold', '2')
        self.refused('ThresholdNotMetError', *self.verify_args(*threshold))
        result = self.run_cli('sign', self.package, '--signing-key', 'sk2')
        self.assertIn('signed', result.stdout)
        result = self.run_cli('sign', self.package, '--signing-key', 'sk2')
        self.assertIn('already signed', result.stdout)
        result = self.run_cli(*self.verify_args(
            *threshold, '--version', '1.0.1', '--installed-version', '1.0.0',
            '--extract-to', 'installed'))
        self.assertIn('OK', result.stdout)
        self.assertEqual(sorted(os.listdir(self.wheels)),
                         sorted(os.listdir(self.path('installed'))))
        result = self.run_cli('inspect', self.package, '--format', 'json')
        document = json.loads(result.stdout)
        self.assertEqual('v1.0.1', document['signed']['version'])
        self.assertEqual(['trove-guestagent', '--check', 'a b'],
                         document['signed']['health_check']['command'])
        self.assertEqual(2, len(document['signatures']))
        result = self.run_cli('inspect', self.package + '.manifest')
        self.assertIn('version:          v1.0.1', result.stdout)
        self.assertIn('agent-1.0.1-py3-none-any.whl', result.stdout)

    def test_verify_without_extract_to_leaves_nothing(self):
        self.build()
        before = sorted(os.listdir(self.tmp))
        self.run_cli(*self.verify_args())
        self.assertEqual(before, sorted(os.listdir(self.tmp)))

    def test_console_script_is_declared(self):
        scripts = importlib.metadata.entry_points(group='console_scripts')
        script = [e for e in scripts if e.name == 'trove-upgrade-package']
        self.assertEqual(1, len(script))
        self.assertIs(package_cmd.main, script[0].load())


class TestErrors(CLITestCase):

    def test_tampered_payload(self):
        self.build()
        with open(self.package, 'r+b') as out:
            out.seek(500)
            byte = out.read(1)
            out.seek(500)
            out.write(bytes([byte[0] ^ 1]))
        self.refused('ChunkAuthenticationError', *self.verify_args())
        self.assertEqual([], [n for n in os.listdir(self.tmp)
                              if n.startswith('.')])

    def test_truncated_payload(self):
        self.build()
        os.truncate(self.package, os.path.getsize(self.package) - 10)
        self.refused('TruncatedPayloadError', *self.verify_args())

    def test_downgrade(self):
        self.build()
        self.refused('RollbackError', *self.verify_args(
            '--installed-version', 'v2.0'))
        self.run_cli(*self.verify_args('--installed-version', 'v2.0',
                                       '--allow-downgrade'))

    def test_wrong_version(self):
        self.build()
        self.refused('WrongVersionError',
                     *self.verify_args('--version', '1.0.2'))

    def test_unknown_signing_key(self):
        self.build()
        self.refused('UnknownSigningKeyError', 'verify', self.package,
                     '--trusted-key', 'sk2.pub', '--encryption-key', 'ek')

    def test_payload_over_the_cap(self):
        self.build()
        self.refused('PayloadTooLargeError',
                     *self.verify_args('--max-payload-size', '100K'))

    def test_private_key_as_trusted_key(self):
        self.build()
        self.refused('KeyFileError', 'verify', self.package,
                     '--trusted-key', 'sk1', '--encryption-key', 'ek')

    def test_extract_to_existing_directory(self):
        self.build()
        os.mkdir(self.path('there'))
        self.refused('DestinationExistsError',
                     *self.verify_args('--extract-to', 'there'))

    def test_missing_package(self):
        result = self.run_cli(*self.verify_args(), expect=3)
        self.assertIn(PREFIX, result.stderr)
        self.assertIn('agent.pkg.manifest', result.stderr)

    def test_corrupt_manifest(self):
        self.build()
        with open(self.package + '.manifest', 'ab') as out:
            out.write(b' ')
        self.refused('ManifestFormatError', *self.verify_args())
        self.refused('ManifestFormatError', 'inspect', self.package)
        self.refused('ManifestFormatError', 'sign', self.package,
                     '--signing-key', 'sk2')

    def test_hostile_manifest_is_refused_not_crashed(self):
        # A lone surrogate escaped as UnicodeEncodeError (a traceback with
        # the same status as a refusal); a huge name was echoed whole.
        self.build()
        with open(self.package + '.manifest', 'rb') as source:
            data = source.read()
        hostile = data.replace(b'"version":"v1.0.1"',
                               b'"version":"\\ud800"')
        with open(self.package + '.manifest', 'wb') as out:
            out.write(hostile)
        result = self.refused('ManifestFormatError', *self.verify_args())
        self.assertNotIn('Traceback', result.stderr)
        with open(self.package + '.manifest', 'wb') as out:
            out.write(data.replace(b'{"signatures"', b'{"%s":1,"signatures"'
                                   % (b'k' * 500000)))
        result = self.refused('ManifestFormatError', *self.verify_args())
        self.assertLess(len(result.stderr), 2048)

    def test_build_refusals(self):
        with open(self.path('notes.txt'), 'w') as out:
            out.write('x')
        self.refused('BuildError', 'build', 'notes.txt', '--version', '1',
                     '-o', 'x', '--signing-key', 'sk1',
                     '--encryption-key', 'ek')
        self.refused('InvalidVersionError', 'build', self.wheels,
                     '--version', 'latest', '-o', 'x', '--signing-key',
                     'sk1', '--encryption-key', 'ek')
        self.refused('KeyFileError', 'build', self.wheels, '--version', '1',
                     '-o', 'x', '--signing-key', 'sk1',
                     '--encryption-key', 'sk1')
        self.assertFalse(os.path.exists(self.path('x')))
        self.build()
        self.refused('BuildError', 'build', self.wheels, '--version', '1',
                     '-o', self.package, '--signing-key', 'sk1',
                     '--encryption-key', 'ek')

    def test_usage_errors(self):
        for args in ((), ('frobnicate',), ('verify', self.package),
                     self.verify_args('--max-payload-size', 'lots'),
                     self.verify_args('--threshold', '0'),
                     ('build', self.wheels, '--version', '1', '-o', 'x',
                      '--signing-key', 'sk1', '--encryption-key', 'ek',
                      '--expires', 'tomorrow')):
            result = self.run_cli(*args, expect=2)
            self.assertIn('error:', result.stderr)


class TestRefusedWhileStillReading(CLITestCase):
    """The payload reader thread may meet the end after the refusal.

    The main thread refuses a forged chunk while the reader thread still
    reads the payload; the truncation or trailing data it then meets had
    nobody to go to, and its ``_Stopped`` printed a thread traceback.
    """

    CHUNK = 16 * 1024 + chunked_aead.TAG_SIZE

    def forged(self, offset):
        """The package's bytes with the byte at ``offset`` flipped."""
        self.build()
        with open(self.package, 'rb') as source:
            data = bytearray(source.read())
        data[offset] ^= 1
        return bytes(data)

    def verify_from_pipe(self, first, then):
        """Verify what a FIFO gives: ``first``, a pause, ``then``, EOF."""
        fifo = self.path('slow.pkg')
        os.mkfifo(fifo)
        proc = subprocess.Popen(
            [sys.executable, '-m', 'trove_upgrade.cmd.package', 'verify',
             fifo, '--manifest', self.package + '.manifest',
             '--trusted-key', 'sk1.pub', '--encryption-key', 'ek'],
            cwd=self.tmp, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True)
        self.addCleanup(proc.stderr.close)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        with open(fifo, 'wb') as pipe:
            pipe.write(first)
            pipe.flush()
            # Time for the main thread to refuse the forged chunk while
            # the reader waits for more; not an assertion on timing.
            time.sleep(2)
            pipe.write(then)
        stderr = proc.stderr.read()
        self.assertEqual(1, proc.wait(120), stderr)
        return stderr

    def assertOneLine(self, expected, stderr):
        self.assertNotIn('Traceback', stderr)
        self.assertEqual([PREFIX + expected],
                         [line[:len(PREFIX + expected)]
                          for line in stderr.splitlines()], stderr)

    def test_truncation_met_after_the_refusal_on_a_slow_pipe(self):
        data = self.forged(500)
        stderr = self.verify_from_pipe(
            data[:chunked_aead.HEADER_SIZE + self.CHUNK + 100], b'')
        self.assertOneLine('ChunkAuthenticationError', stderr)

    def test_trailing_data_met_after_the_refusal_on_a_slow_pipe(self):
        data = self.forged(-20)
        stderr = self.verify_from_pipe(data, b'trailing')
        self.assertOneLine('ChunkAuthenticationError', stderr)

    def test_forged_and_truncated_file(self):
        # On a file the reader usually wins the race, not always: run it
        # a few times.
        data = self.forged(500)
        with open(self.package, 'wb') as out:
            out.write(data[:-10])
        for _ in range(5):
            result = self.run_cli(*self.verify_args(), expect=1)
            self.assertNotIn('Traceback', result.stderr)
            self.assertEqual(1, len(result.stderr.splitlines()),
                             result.stderr)
