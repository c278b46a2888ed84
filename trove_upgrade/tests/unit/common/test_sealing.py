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

import os
import pwd
import stat

import fixtures
import testtools

from trove_upgrade.common import exception as package_exc
from trove_upgrade.common import sealing
from trove_upgrade.tests import base

INSTANCE = '5d3c7e4a-2f1b-4a57-9b0c-0a6f1e2d3c4b'
ARGS = {'upgrade_id': 'u-1', 'instance_id': INSTANCE,
        'instance_version': '2.0.0', 'metadata': {'b': [1, 2], 'a': None}}
NOW = 1_000_000.0
MAX_AGE = 300


def keyring(*key_ids, instance_id=INSTANCE):
    return sealing.InstanceKeys(instance_id, [(k, sealing.generate_key())
                                              for k in key_ids or ('k1',)])


class TestSealing(base.TestCase):

    def setUp(self):
        super().setUp()
        self.keys = keyring()
        self.cache = sealing.MemoryReplayCache()

    def seal(self, keys=None, method='upgrade', version='1.1',
             direction=sealing.TO_AGENT, args=ARGS, now=NOW):
        return sealing.seal(keys or self.keys, method, version, direction,
                            args, now=now)

    def open(self, envelope, keys=None, method='upgrade',
             direction=sealing.TO_AGENT, args=ARGS, now=NOW, cache=None):
        sealing.open_sealed(keys or self.keys, envelope, method, direction,
                            args, MAX_AGE, cache or self.cache, now=now)

    def test_round_trip(self):
        envelope = self.seal()
        self.assertEqual('k1', envelope['key_id'])
        self.assertEqual(INSTANCE, envelope['instance_id'])
        self.assertNotIn(b'2.0.0', envelope['ciphertext'].encode())
        self.open(envelope)

    def test_argument_order_does_not_matter(self):
        envelope = self.seal()
        self.open(envelope, args=dict(reversed(list(ARGS.items()))))

    def test_two_seals_differ(self):
        first, second = self.seal(), self.seal()
        self.assertNotEqual(first['nonce'], second['nonce'])
        self.assertNotEqual(first['message_id'], second['message_id'])

    def test_unsealed(self):
        self.assertRaises(sealing.UnsealedError, self.open, None)

    def test_wrong_key_same_id(self):
        forged = self.seal(keys=keyring('k1'))
        self.assertRaises(sealing.BadSealError, self.open, forged)

    def test_unknown_key_id(self):
        forged = self.seal(keys=keyring('other'))
        self.assertRaises(sealing.UnknownKeyError, self.open, forged)

    def test_modified_argument(self):
        envelope = self.seal()
        changed = dict(ARGS, instance_version='1.0.0')
        self.assertRaises(sealing.BadSealError, self.open,
                          envelope, args=changed)

    def test_modified_ciphertext(self):
        envelope = self.seal()
        raw = bytearray(sealing._unb64(envelope['ciphertext'], 'x'))
        raw[0] ^= 1
        envelope['ciphertext'] = sealing._b64(bytes(raw))
        self.assertRaises(sealing.BadSealError, self.open, envelope)

    def test_bound_fields(self):
        for field, value in (('message_id', 'other'), ('version', '1.2'),
                             ('timestamp', NOW + 1)):
            envelope = dict(self.seal(), **{field: value})
            self.assertRaises(sealing.BadSealError, self.open, envelope)

    def test_other_method(self):
        envelope = self.seal(method='report_upgrade_state')
        self.assertRaises(sealing.BadSealError, self.open, envelope)

    def test_other_direction(self):
        envelope = self.seal(direction=sealing.TO_CONDUCTOR)
        self.assertRaises(sealing.BadSealError, self.open, envelope)

    def test_instance_mismatch(self):
        other = sealing.InstanceKeys('other-instance', self.keys.keys)
        envelope = self.seal(keys=other)
        self.assertRaises(sealing.InstanceMismatchError, self.open, envelope)

    def test_malformed(self):
        envelope = self.seal()
        for broken in ('x', {}, dict(envelope, format=2),
                       dict(envelope, extra=1), dict(envelope, nonce='%%'),
                       dict(envelope, timestamp='now'),
                       dict(envelope, key_id=7)):
            self.assertRaises(sealing.MalformedSealError, self.open, broken)

    def test_a_refusal_quotes_a_huge_format_bounded(self):
        envelope = dict(self.seal(), format='x' * 1000000)
        e = self.assertRaises(sealing.MalformedSealError, self.open, envelope)
        self.assertLess(len(str(e)), 200)

    def test_arguments_nested_too_deeply_were_not_sealed(self):
        # Once a RecursionError out of the endpoint, before any key check.
        deep = []
        for _ in range(100000):
            deep = [deep]
        e = self.assertRaises(sealing.BadSealError, self.open, self.seal(),
                              args=dict(ARGS, metadata={'a': deep}))
        self.assertIn('cannot have been sealed', str(e))
        self.assertLess(len(str(e)), 400)

    def test_replay(self):
        envelope = self.seal()
        self.open(envelope)
        self.assertRaises(sealing.ReplayedMessageError, self.open, envelope,
                          now=NOW + 1)

    def test_replay_after_max_age_is_stale(self):
        envelope = self.seal()
        self.open(envelope)
        self.assertRaises(sealing.StaleMessageError, self.open, envelope,
                          now=NOW + MAX_AGE + 1)

    def test_stale_and_future(self):
        self.assertRaises(sealing.StaleMessageError, self.open,
                          self.seal(now=NOW - MAX_AGE - 1))
        self.assertRaises(sealing.StaleMessageError, self.open,
                          self.seal(now=NOW + MAX_AGE + 1))
        self.open(self.seal(now=NOW - MAX_AGE + 1))

    def test_refused_message_is_not_remembered(self):
        envelope = self.seal()
        self.assertRaises(sealing.BadSealError, self.open, envelope,
                          args=dict(ARGS, upgrade_id='u-2'))
        self.open(envelope)

    def test_cache_forgets_expired_ids(self):
        self.cache.add('m', NOW, NOW)
        self.assertRaises(sealing.ReplayedMessageError, self.cache.add, 'm',
                          NOW + 5, NOW)
        self.cache.add('m', NOW + 10, NOW + 1)

    def test_cache_holds_only_unexpired_ids(self):
        for second in range(1000):
            self.cache.add('m-%d' % second, NOW + second + MAX_AGE,
                           NOW + second)
        self.assertEqual(MAX_AGE + 1, len(self.cache._seen))
        self.assertRaises(sealing.ReplayedMessageError, self.cache.add,
                          'm-999', NOW + 2000, NOW + 1000)
        self.cache.add('m-0', NOW + 2000, NOW + 1000)

    def test_rotation(self):
        old = keyring('old')
        rotated = sealing.InstanceKeys(
            INSTANCE, [('new', sealing.generate_key())] + old.keys)
        self.assertEqual('new', self.seal(keys=rotated)['key_id'])
        self.open(self.seal(keys=old), keys=rotated)
        self.open(self.seal(keys=rotated), keys=rotated)
        retired = sealing.InstanceKeys(INSTANCE, rotated.keys[:1])
        self.assertRaises(sealing.UnknownKeyError, self.open,
                          self.seal(keys=old), keys=retired)

    def test_key_size(self):
        self.assertRaises(ValueError, sealing.InstanceKeys, INSTANCE,
                          [('k', b'short')])


class TestKeyFiles(base.TestCase):

    def setUp(self):
        super().setUp()
        self.path = os.path.join(self.useFixture(
            fixtures.TempDir()).path, 'instance.key')

    def test_round_trip_0600(self):
        keys = keyring('a', 'b')
        sealing.dump_key_file(self.path, keys)
        self.assertEqual(0o600, stat.S_IMODE(os.stat(self.path).st_mode))
        loaded = sealing.load_key_file(self.path, INSTANCE)
        self.assertEqual(keys.keys, loaded.keys)

    def test_a_path_that_cannot_be_written_fails_before_the_block(self):
        # trove-upgrade-manage stored a key, then failed to write its file.
        for path in (os.path.join(self.path, 'missing', 'k'),
                     os.path.dirname(self.path)):
            ran = []
            error = self.assertRaises(OSError, self._write_in, path, ran)
            self.assertEqual(path, error.filename)
            self.assertEqual([], ran)
        self.assertEqual([], os.listdir(os.path.dirname(self.path)))

    def test_a_block_that_fails_leaves_no_file(self):
        with testtools.ExpectedException(RuntimeError):
            with sealing.key_file_writer(self.path):
                raise RuntimeError('the key was not stored')
        self.assertEqual([], os.listdir(os.path.dirname(self.path)))

    @staticmethod
    def _write_in(path, ran):
        with sealing.key_file_writer(path) as write:
            ran.append(True)
            write(keyring())

    @testtools.skipUnless(os.geteuid() == 0, 'giving a file away needs root')
    def test_a_name_planted_beside_the_file_is_never_written_through(self):
        # The temporary file was PATH.tmp-<pid>, opened without O_EXCL: a
        # name planted in a shared directory (another user's file, mode
        # 0666) became the key file, keeping its owner and mode.
        self.useFixture(fixtures.MonkeyPatch('os.getpid', lambda: 4242))
        planted = self.path + '.tmp-4242'
        with open(planted, 'w') as f:
            f.write('planted')
        os.chmod(planted, 0o666)
        os.chown(planted, pwd.getpwnam('nobody').pw_uid, -1)
        sealing.dump_key_file(self.path, keyring())
        status = os.stat(self.path)
        self.assertEqual((0, 0o600), (status.st_uid,
                                      stat.S_IMODE(status.st_mode)))
        with open(planted) as f:
            self.assertEqual('planted', f.read())

    def test_refuses_other_instance(self):
        sealing.dump_key_file(self.path, keyring())
        self.assertRaisesRegex(package_exc.KeyFileError, 'for instance',
                               sealing.load_key_file, self.path, 'other')

    def test_refuses_open_mode(self):
        sealing.dump_key_file(self.path, keyring())
        os.chmod(self.path, 0o644)
        self.assertRaisesRegex(package_exc.KeyFileError, 'must be 0600',
                               sealing.load_key_file, self.path)

    def test_refuses_missing_and_garbage(self):
        self.assertRaises(package_exc.KeyFileError, sealing.load_key_file,
                          self.path)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, b'{"instance_id": "x", "keys": [{"key": "AA=="}]}')
        os.close(fd)
        self.assertRaises(package_exc.KeyFileError, sealing.load_key_file,
                          self.path)

    def test_refuses_nesting_too_deep(self):
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, b'[' * 100000 + b']' * 100000)
        os.close(fd)
        self.assertRaises(package_exc.KeyFileError, sealing.load_key_file,
                          self.path)

    def test_refuses_empty(self):
        sealing.dump_key_file(self.path, sealing.InstanceKeys(INSTANCE, []))
        self.assertRaisesRegex(package_exc.KeyFileError, 'no key',
                               sealing.load_key_file, self.path)

    def test_wrap_unwrap(self):
        master = sealing.generate_key()
        material = sealing.generate_key()
        wrapped = sealing.wrap_key(master, INSTANCE, 'k', material)
        self.assertNotIn(material, wrapped)
        self.assertEqual(material,
                         sealing.unwrap_key(master, INSTANCE, 'k', wrapped))
        self.assertRaises(package_exc.KeyFileError, sealing.unwrap_key,
                          master, INSTANCE, 'other', wrapped)
        self.assertRaises(package_exc.KeyFileError, sealing.unwrap_key,
                          sealing.generate_key(), INSTANCE, 'k', wrapped)
