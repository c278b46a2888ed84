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

"""Malformed Trove guest configuration and adoption input, fuzzed.

Every reader of files on a tenant's instance (``/etc/trove/conf.d``, the
guest agent's virtualenv, its systemd unit, ``guest.pid``) either gives
its documented result or raises its module's named exception with a
short, printable reason: never a raw traceback, a hang, or a file read
whole. Mutations start from the files a Trove image really has.
"""

import os
import shutil
import subprocess
import sys
import tempfile

import fixtures
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from trove_upgrade.agent import adopt
from trove_upgrade.agent import guest_files
from trove_upgrade.agent import init_system
from trove_upgrade.agent import install
from trove_upgrade.agent import journal
from trove_upgrade.agent import supervisor
from trove_upgrade.agent import trove_guest
from trove_upgrade.tests import base

# The same examples on every run: a CI run fails for the code it tests,
# not for the draw it got.
PROPERTY = settings(max_examples=150, deadline=None, database=None,
                    derandomize=True)
MAX_REASON = guest_files.MAX_REASON_LENGTH
# Larger than any limit; created sparse, so the test writes nothing.
HUGE = 11 * 1024 * 1024

GUEST_INFO = (b'[DEFAULT]\nguest_id = 6c0f1a2e-8d1b-4bfc-9c39-0d1e4a7e5b21\n'
              b'datastore_manager = mysql\n')
GUESTAGENT_CONF = (b'[DEFAULT]\n'
                   b'transport_url = rabbit://u:p@10.0.0.1:5672/\n'
                   b'control_exchange = trove\n'
                   b'instance_rpc_encr_key = ' + b'k' * 32 + b'\n'
                   b'rpc_ping_enabled = True\n'
                   b'[mysql]\ndevice_path = /dev/vdb\n')
METADATA = b'Metadata-Version: 2.1\nName: trove\nVersion: 25.1.0\n\nBody\n'
ENTRY_POINTS = (b'[console_scripts]\ntrove-guestagent = trove.cmd.guest:main\n'
                b'[oslo.config.opts]\ntrove = trove.opts:list_opts\n')
UNIT = (b'[Unit]\nDescription=Trove guest agent\n[Service]\nUser=ubuntu\n'
        b'ExecStartPre=/bin/true\n'
        b'ExecStart=/usr/local/bin/guest-agent --config-dir=/etc/trove/conf.d'
        b'\n[Install]\nWantedBy=multi-user.target\n')
PIDFILE = b'{"pid": 1, "start_time": 5, "version": "25.1.0"}'

# What a tenant can put into a line: syntax of each parser, and worse.
NASTY = [b'\x00', b'\xff', b'\xc3', b'\xed\xa0\x80', b'\r', b'\n', b'\n ',
         b'%(', b'%(x)s', b'%%', b'$', b'${', b'$guest_id', b'$$', b'[',
         b']', b'[DEFAULT]\n', b'[console_scripts]\n', b'[Service]\n',
         b'=', b':', b'#', b';', b'"', b"'", b'\\', b'\t', b'\x1b[2J',
         b'guest_id = x\n', b'ExecStart=\n', b'Version: \n', b'{' * 5000,
         b'\xef\xbb\xbf']


@st.composite
def mutated(draw, sample):
    """``sample`` after a few truncations, insertions and duplications."""
    data = sample
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        kind = draw(st.sampled_from(
            ['truncate', 'nasty', 'bytes', 'duplicate', 'drop', 'long']))
        if kind == 'truncate':
            data = data[:at]
        elif kind == 'nasty':
            data = data[:at] + draw(st.sampled_from(NASTY)) + data[at:]
        elif kind == 'bytes':
            data = data[:at] + draw(st.binary(max_size=16)) + data[at:]
        elif kind == 'duplicate':
            lines = data.splitlines(keepends=True) or [b'']
            line = lines[at % len(lines)]
            data = data[:at] + line + data[at:]
        elif kind == 'drop':
            data = data[:at] + data[at + draw(st.integers(1, 40)):]
        else:
            data = data[:at] + b'x' * draw(st.integers(300, 5000)) + data[at:]
    return data


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'wb') as f:
        f.write(data)


def sparse(path, size=HUGE):
    with open(path, 'wb') as f:
        f.truncate(size)


class GuestInputTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        # A reader that blocks on a FIFO fails here, not in stestr's.
        self.useFixture(fixtures.Timeout(20, gentle=True))

    def assertNamed(self, error, types):
        """``error`` is one of ``types``, with a short printable reason."""
        self.assertIsInstance(error, types)
        reason = str(error)
        self.assertLessEqual(len(reason), MAX_REASON + 30, reason[:100])
        self.assertTrue(reason.isprintable(), repr(reason[:200]))

    def outcome(self, func, types, *args):
        """``func(*args)``, or None when it raised one of ``types``."""
        try:
            return func(*args)
        except types as e:
            self.assertNamed(e, types)
            return None


class TestTroveGuestConfigFuzz(GuestInputTestCase):

    def _load(self, files):
        with tempfile.TemporaryDirectory() as d:
            for name, data in files.items():
                write(os.path.join(d, name), data)
            guest = self.outcome(trove_guest.load,
                                 trove_guest.TroveGuestConfigError, d)
            self.assertEqual([], [n for n in os.listdir(d)
                                  if n not in files])
        if guest is None:
            return
        if guest.guest_id is not None:
            self.assertRegex(guest.guest_id, r'\A[A-Za-z0-9._-]{1,255}\Z')
        for value in (guest.transport_url, guest.control_exchange,
                      guest.instance_rpc_encr_key):
            if value is not None:
                self.assertTrue(value.isprintable())
                self.assertLessEqual(len(value),
                                     trove_guest.MAX_VALUE_LENGTH)

    def test_samples_are_read(self):
        with tempfile.TemporaryDirectory() as d:
            write(os.path.join(d, 'guest_info.conf'), GUEST_INFO)
            write(os.path.join(d, 'trove-guestagent.conf'), GUESTAGENT_CONF)
            guest = trove_guest.load(d)
        self.assertEqual('6c0f1a2e-8d1b-4bfc-9c39-0d1e4a7e5b21',
                         guest.guest_id)
        self.assertEqual('trove', guest.control_exchange)
        self.assertEqual('k' * 32, guest.instance_rpc_encr_key)

    @PROPERTY
    @given(mutated(GUEST_INFO), mutated(GUESTAGENT_CONF))
    def test_mutated_files(self, guest_info, guestagent_conf):
        self._load({'guest_info.conf': guest_info,
                    'trove-guestagent.conf': guestagent_conf})

    @PROPERTY
    @given(st.binary(max_size=512))
    def test_random_bytes(self, data):
        self._load({'guest_info.conf': data})

    def _refused(self, make, expect):
        d = self.useFixture(fixtures.TempDir()).path
        write(os.path.join(d, 'guest_info.conf'), GUEST_INFO)
        make(os.path.join(d, 'zz.conf'))
        e = self.assertRaises(trove_guest.TroveGuestConfigError,
                              trove_guest.load, d)
        self.assertNamed(e, trove_guest.TroveGuestConfigError)
        self.assertIn(expect, str(e))

    def test_special_files_are_refused_not_read(self):
        self._refused(os.mkfifo, 'not a regular file')
        self._refused(os.mkdir, 'not a regular file')
        self._refused(lambda p: os.symlink('/dev/zero', p),
                      'not a regular file')
        self._refused(lambda p: os.symlink('/nonexistent', p),
                      'No such file')
        self._refused(sparse, 'larger than')

    def test_values_are_checked_at_load(self):
        for line, expect in [
                (b'rpc_ping_enabled = maybe', 'rpc_ping_enabled'),
                (b'guest_id = $nowhere', 'a $name in it is no option'),
                (b'transport_url = $guest_id\nguest_id = $transport_url',
                 'a $name in it is no option'),
                (b'guest_id = a\n b', 'not one printable line'),
                (b'guest_id = ../../etc', 'cannot name an instance'),
                (b'guest_id = ' + b'a' * 300, 'cannot name an instance'),
                (b'control_exchange = ' + b'x' * 5000, 'at most 4096')]:
            self._refused(lambda p: write(p, b'[DEFAULT]\n' + line + b'\n'),
                          expect)

    def test_interpolation_is_oslo_config_s_as_trove_reads_it(self):
        d = self.useFixture(fixtures.TempDir()).path
        write(os.path.join(d, 'a.conf'),
              b'[DEFAULT]\nguest_id = %(x)s\ncontrol_exchange = a$$b\n')
        self.assertRaises(trove_guest.TroveGuestConfigError,
                          trove_guest.load, d)
        write(os.path.join(d, 'a.conf'),
              b'[DEFAULT]\nguest_id = g1\ncontrol_exchange = %(x)s$$b\n')
        self.assertEqual('%(x)s$b', trove_guest.load(d).control_exchange)

    def test_too_many_files_are_refused(self):
        d = self.useFixture(fixtures.TempDir()).path
        for i in range(trove_guest.MAX_CONFIG_FILES + 1):
            write(os.path.join(d, '%03d.conf' % i), b'')
        e = self.assertRaises(trove_guest.TroveGuestConfigError,
                              trove_guest.load, d)
        self.assertIn('at most %d' % trove_guest.MAX_CONFIG_FILES, str(e))


class TestManagedConfigFuzz(GuestInputTestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.path = os.path.join(self.dir, trove_guest.MANAGED_FILE)

    def _written(self):
        self.assertTrue(trove_guest.write_managed_config(self.dir))
        with open(self.path) as f:
            self.assertEqual(trove_guest.MANAGED_TEXT, f.read())
        self.assertEqual([trove_guest.MANAGED_FILE], os.listdir(self.dir))

    def test_whatever_is_in_its_place_is_replaced_unread(self):
        for make in (os.mkfifo, sparse,
                     lambda p: write(p, b'\xff' + b'x' * 10),
                     lambda p: write(p, trove_guest.MANAGED_TEXT.encode()
                                     + b'more'),
                     lambda p: os.symlink('/dev/zero', p)):
            make(self.path)
            self._written()
            os.unlink(self.path)

    def test_a_fifo_in_place_of_the_temporary_file_is_replaced(self):
        os.mkfifo(self.path + '.tmp')
        self._written()

    def test_a_directory_in_its_place_is_a_named_error(self):
        os.mkdir(self.path)
        e = self.assertRaises(trove_guest.TroveGuestConfigError,
                              trove_guest.write_managed_config, self.dir)
        self.assertNamed(e, trove_guest.TroveGuestConfigError)
        self.assertEqual([trove_guest.MANAGED_FILE], os.listdir(self.dir))


class TestAdoptInputFuzz(GuestInputTestCase):
    """The venv layout of a Trove image, without building a real venv."""

    def setUp(self):
        super().setUp()
        self.venv = self.useFixture(fixtures.TempDir()).path
        self.dist = os.path.join(self.venv, 'lib', 'python3.10',
                                 'site-packages', 'trove-25.1.0.dist-info')
        write(os.path.join(self.venv, 'pyvenv.cfg'), b'home = /usr/bin\n')
        write(os.path.join(self.venv, 'bin', 'python'), b'')
        self.script = os.path.join(self.venv, 'bin', 'trove-guestagent')
        write(self.script, b'#!/bin/sh\n')
        os.chmod(self.script, 0o755)
        self._dist(METADATA, ENTRY_POINTS)

    def _dist(self, metadata, entry_points):
        write(os.path.join(self.dist, 'METADATA'), metadata)
        write(os.path.join(self.dist, 'entry_points.txt'), entry_points)

    def _inspect(self):
        return self.outcome(adopt.inspect_venv, adopt.AdoptionRefusedError,
                            self.venv, 'trove-guestagent')

    def test_sample_is_adoptable(self):
        self.assertEqual('25.1.0', self._inspect())

    @PROPERTY
    @given(mutated(METADATA), mutated(ENTRY_POINTS))
    def test_mutated_metadata(self, metadata, entry_points):
        self._dist(metadata, entry_points)
        version = self._inspect()
        if version is not None:
            self.assertEqual(version, install.check_version_name(version))

    def _refused(self, name, make, expect='declares the console script'):
        path = os.path.join(self.dist, name)
        os.unlink(path)
        make(path)
        e = self.assertRaises(adopt.AdoptionRefusedError, adopt.inspect_venv,
                              self.venv, 'trove-guestagent')
        self.assertNamed(e, adopt.AdoptionRefusedError)
        self.assertIn(expect, str(e))
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
        self._dist(METADATA, ENTRY_POINTS)

    def test_special_metadata_files_declare_nothing(self):
        for name in ('METADATA', 'entry_points.txt'):
            self._refused(name, os.mkfifo)
            self._refused(name, os.mkdir)
            self._refused(name, sparse)
            self._refused(name, lambda p: os.symlink('/dev/zero', p))
            self._refused(name, lambda p: write(p, b'\xff\xfe'))

    def test_version_that_cannot_name_a_directory_is_refused(self):
        for version in (b'../../x', b'1.0 beta', b'-1', b'9' * 65,
                        b'1.0\\n'):
            self._dist(b'Version: %s\n' % version, ENTRY_POINTS)
            e = self.assertRaises(
                adopt.AdoptionRefusedError, adopt.inspect_venv,
                self.venv, 'trove-guestagent')
            self.assertIn('invalid version', str(e))

    def test_directory_in_place_of_the_script_is_refused(self):
        os.unlink(self.script)
        os.mkdir(self.script)
        e = self.assertRaises(adopt.AdoptionRefusedError, adopt.inspect_venv,
                              self.venv, 'trove-guestagent')
        self.assertIn('no executable bin/trove-guestagent', str(e))

    def test_a_fifo_in_place_of_the_marker_is_replaced(self):
        os.mkfifo(os.path.join(self.venv, install.MARKER))
        root = self.useFixture(fixtures.TempDir()).path
        jour = journal.UpgradeJournal(root)
        installs = install.InstallRoot(root, jour.lock)
        self.assertEqual(('25.1.0', True), adopt.adopt(
            installs, jour, self.venv, 'trove-guestagent'))
        self.assertTrue(installs.is_installed('25.1.0'))

    @PROPERTY
    @given(st.text(max_size=80) | st.sampled_from(
        ['1.0\n', '1.0\x00', '\n1.0', '1' * 64, '1' * 65, 'a/b', '..']))
    def test_version_names(self, version):
        checked = self.outcome(install.check_version_name,
                               install.InstallError, version)
        if checked is not None:
            self.assertRegex(checked, r'\A[A-Za-z0-9][A-Za-z0-9._+-]*\Z')
            self.assertLessEqual(len(checked), 64)


class TestUnitAndPidfileFuzz(GuestInputTestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.driver = init_system.SystemdDriver(
            'guest-agent', unit_dir=self.dir)
        self.unit = os.path.join(self.dir, 'guest-agent.service')

    def _exec_start(self, data):
        write(self.unit, data)
        return self.outcome(self.driver.exec_start,
                            init_system.InitSystemError)

    def test_sample_unit(self):
        self.assertEqual(['/usr/local/bin/guest-agent',
                          '--config-dir=/etc/trove/conf.d'],
                         self._exec_start(UNIT))

    @PROPERTY
    @given(mutated(UNIT))
    def test_mutated_unit(self, data):
        argv = self._exec_start(data)
        if argv is not None:
            self.assertTrue(all(isinstance(a, str) for a in argv))

    def test_unreadable_units_are_named_errors(self):
        for data in (b'[Service]\nExecStart=/bin/x "unclosed\n',
                     b'[Service]\nExecStart=/bin/\xff\n'):
            self.assertIsNone(self._exec_start(data))
        os.unlink(self.unit)
        sparse(self.unit)
        e = self.assertRaises(init_system.InitSystemError,
                              self.driver.exec_start)
        self.assertIn('larger than', str(e))

    @PROPERTY
    @given(mutated(PIDFILE) | st.sampled_from(
        [b'[' * 100000, b'{"pid": 1, "start_time": 5, "version": "a\\nb"}',
         b'{"pid": 1e999, "start_time": 5, "version": "1"}']))
    def test_pidfile(self, data):
        guest = supervisor.GuestSupervisor.__new__(supervisor.GuestSupervisor)
        guest.pidfile = os.path.join(self.dir, supervisor.PIDFILE)
        write(guest.pidfile, data)
        record = guest._read_pidfile()
        if record is not None:
            self.assertEqual({'pid', 'start_time', 'version'}, set(record))
            install.check_version_name(record['version'])


class TestAdoptCommand(GuestInputTestCase):
    """trove-upgrade-adopt, the console script, on malformed input."""

    def setUp(self):
        super().setUp()
        tmp = self.useFixture(fixtures.TempDir()).path
        self.guest_dir = os.path.join(tmp, 'conf.d')
        write(os.path.join(self.guest_dir, 'guest_info.conf'), GUEST_INFO)
        self.venv = os.path.join(tmp, 'venv')
        dist = os.path.join(self.venv, 'lib', 'python3.10', 'site-packages',
                            'trove-25.1.0.dist-info')
        write(os.path.join(self.venv, 'pyvenv.cfg'), b'')
        write(os.path.join(self.venv, 'bin', 'python'), b'')
        write(os.path.join(self.venv, 'bin', 'trove-guestagent'), b'')
        os.chmod(os.path.join(self.venv, 'bin', 'trove-guestagent'), 0o755)
        write(os.path.join(dist, 'METADATA'), METADATA)
        write(os.path.join(dist, 'entry_points.txt'), ENTRY_POINTS)
        self.entry_points = os.path.join(dist, 'entry_points.txt')
        self.root = os.path.join(tmp, 'root')
        self.conf = os.path.join(tmp, 'agent.conf')
        write(self.conf, (
            '[agent]\ninstance_id = i1\ninstall_root = %s\n'
            'guest_program_link = %s\n[trove_guest]\nconfig_dir = %s\n'
            % (self.root, os.path.join(tmp, 'no-link'), self.guest_dir)
        ).encode())
        self.program = os.path.join(os.path.dirname(sys.executable),
                                    'trove-upgrade-adopt')

    def _run(self):
        proc = subprocess.run(
            [self.program, '--config-file', self.conf, '--venv', self.venv],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            timeout=60)
        return proc.returncode, proc.stdout, proc.stderr

    def _assert_one_line_error(self, status, expect):
        code, out, err = self._run()
        self.assertEqual(status, code, err)
        self.assertNotIn('Traceback', err)
        self.assertEqual(1, len(err.strip().splitlines()), err)
        self.assertIn(expect, err)
        self.assertNamed(Exception(err.strip()), Exception)

    def test_malformed_trove_config_exits_2_and_changes_nothing(self):
        write(os.path.join(self.guest_dir, 'trove-guestagent.conf'),
              b'[DEFAULT]\ntransport_url = rabbit://\xff@h/\n')
        self._assert_one_line_error(2, 'not UTF-8 text')
        self.assertEqual(['guest_info.conf', 'trove-guestagent.conf'],
                         sorted(os.listdir(self.guest_dir)))
        self.assertFalse(os.path.lexists(os.path.join(self.root, 'current')))

    def test_malformed_metadata_is_refused_and_changes_nothing(self):
        write(self.entry_points, b'[console_scripts]\n\xff = x\n')
        self._assert_one_line_error(1, 'declares the console script')
        self.assertEqual(['guest_info.conf'], os.listdir(self.guest_dir))
        self.assertFalse(os.path.lexists(os.path.join(self.root, 'current')))
        write(self.entry_points, ENTRY_POINTS)
        code, out, err = self._run()
        self.assertEqual(0, code, err)
        self.assertIn('adopted', out)
