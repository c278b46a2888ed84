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

"""Key files, key ids, trusted key sets and the decryption keyring."""

import hashlib
import json
import os
import stat

from cryptography.hazmat.primitives.asymmetric import ed25519
import fixtures

from trove_upgrade.common import exception as exc
from trove_upgrade.package_format import keys
from trove_upgrade.tests import base


class TestKeyFiles(base.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def path(self, name):
        return os.path.join(self.tmp, name)

    def read(self, name):
        with open(self.path(name), 'rb') as source:
            return source.read()

    def test_signing_key_files_are_0600_and_round_trip(self):
        signing_key = keys.generate_signing_key()
        private, public = keys.write_signing_key(self.path('sk'),
                                                 signing_key)
        self.assertEqual(self.path('sk.pub'), public)
        for path in (private, public):
            self.assertEqual(0o600, stat.S_IMODE(os.stat(path).st_mode))
        loaded = keys.load_signing_key(private)
        self.assertEqual(signing_key.key_id, loaded.key_id)
        self.assertEqual(hashlib.sha256(signing_key.public_raw).hexdigest(),
                         signing_key.key_id)
        trusted = keys.load_trusted_keys([public, public])
        self.assertEqual({signing_key.key_id}, trusted.key_ids)
        self.assertTrue(trusted.verify(signing_key.key_id,
                                       loaded.sign(b'data'), b'data'))
        self.assertFalse(trusted.verify(signing_key.key_id,
                                        loaded.sign(b'data'), b'date'))

    def test_encryption_key_file(self):
        key = keys.generate_encryption_key()
        keys.write_encryption_key(self.path('ek'), key)
        self.assertEqual(0o600,
                         stat.S_IMODE(os.stat(self.path('ek')).st_mode))
        self.assertEqual(key, keys.load_encryption_key(self.path('ek')))
        keyring = keys.load_keyring([self.path('ek')])
        self.assertEqual(key, keyring.get(keys.encryption_key_id(key)))
        self.assertNotEqual(hashlib.sha256(key).hexdigest(),
                            keys.encryption_key_id(key))

    def test_keyring_with_several_keys(self):
        first, second = (keys.generate_encryption_key(),
                         keys.generate_encryption_key())
        keyring = keys.Keyring([first, second])
        self.assertEqual(second, keyring.get(keys.encryption_key_id(second)))
        self.assertRaises(exc.MissingDecryptionKeyError, keyring.get,
                          'ab' * 32)

    def test_never_overwrites(self):
        keys.write_encryption_key(self.path('ek'),
                                  keys.generate_encryption_key())
        before = self.read('ek')
        self.assertRaises(exc.KeyFileExistsError, keys.write_encryption_key,
                          self.path('ek'), keys.generate_encryption_key())
        self.assertEqual(before, self.read('ek'))
        with open(self.path('sk.pub'), 'w'):
            pass
        self.assertRaises(exc.KeyFileExistsError, keys.write_signing_key,
                          self.path('sk'), keys.generate_signing_key())
        self.assertFalse(os.path.exists(self.path('sk')))

    def test_private_key_is_not_a_trusted_key(self):
        keys.write_signing_key(self.path('sk'), keys.generate_signing_key())
        self.assertRaises(exc.KeyFileError, keys.load_trusted_keys,
                          [self.path('sk')])
        self.assertRaises(exc.KeyFileError, keys.load_signing_key,
                          self.path('sk.pub'))

    def test_wrong_kind_of_key(self):
        keys.write_encryption_key(self.path('ek'),
                                  keys.generate_encryption_key())
        self.assertRaises(exc.KeyFileError, keys.load_public_key,
                          self.path('ek'))
        keys.write_signing_key(self.path('sk'), keys.generate_signing_key())
        self.assertRaises(exc.KeyFileError, keys.load_encryption_key,
                          self.path('sk'))

    def test_key_id_must_match_the_key(self):
        keys.write_signing_key(self.path('sk'), keys.generate_signing_key())
        with open(self.path('sk.pub')) as source:
            document = json.load(source)
        document['key_id'] = 'ab' * 32
        with open(self.path('forged.pub'), 'w') as out:
            json.dump(document, out)
        self.assertRaises(exc.KeyFileError, keys.load_public_key,
                          self.path('forged.pub'))

    def test_malformed_files(self):
        for name, content in (('empty', ''), ('text', 'not json'),
                              ('list', '[]'),
                              ('short', '{"keytype": "aes-256-gcm", '
                                        '"key": "abcd"}'),
                              ('huge', ' ' * 100000)):
            with open(self.path(name), 'w') as out:
                out.write(content)
            self.assertRaises(exc.KeyFileError, keys.load_encryption_key,
                              self.path(name))
        self.assertRaises(exc.KeyFileError, keys.load_encryption_key,
                          self.path('missing'))

    def test_threshold_bounds(self):
        public = [ed25519.Ed25519PublicKey.from_public_bytes(
            keys.generate_signing_key().public_raw) for _ in range(2)]
        for threshold in (0, 3, -1, '1'):
            self.assertRaises(exc.InvalidThresholdError, keys.TrustedKeys,
                              public, threshold)
        self.assertEqual(2, keys.TrustedKeys(public, 2).threshold)
        self.assertRaises(exc.InvalidThresholdError, keys.load_trusted_keys,
                          [])
