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

"""Keys derived from Trove's: Trove's own ciphertexts, HKDF separation."""

import base64

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf import hkdf

from trove_upgrade.common import sealing
from trove_upgrade.common import trove_keys
from trove_upgrade.tests import base

INSTANCE = '8a1f0c2e-3b4d-4e5f-9a6b-7c8d9e0f1a2b'
OTHER = '1b2c3d4e-5f6a-4b7c-8d9e-0f1a2b3c4d5e'
TROVE_DEFAULT_ENCR_KEY = 'emYjgHFqfXNB1NGehAFIUeoyw4V4XwWHEaKP'

# Made by Trove 25.1.0's own crypto_utils, run in its virtualenv:
# cu.encode_data(cu.encrypt_data(plain, encr_key)).
TROVE_VECTORS = [
    ('NBKEFeE/LLF/po5vRv7VEky0ZP7295Q/uDq5BLL0kOTHevYRG16EMwC/NQcvgiUf'
     'InsFIxQMJMlAH21DdlUqYw==', TROVE_DEFAULT_ENCR_KEY,
     b'n3Yv8kQ2LmZ5tR7wX1cB4dF6gH9jK0pA'),
    # 16 bytes: a whole block of padding.
    ('2PoaXNLYdCbLvJeLu7hPx8h2Z+FvkLCve7gYWeZY7zAfZF3Jh+PTezuh/k3R/fwo',
     'another-encr-key', b'0123456789abcdef'),
]


class TestDecryptTroveKey(base.TestCase):

    def test_trove_ciphertexts_decrypt(self):
        for encrypted, encr_key, plain in TROVE_VECTORS:
            self.assertEqual(plain, trove_keys.decrypt_trove_key(
                encrypted, encr_key))

    def test_wrong_encr_key_refused(self):
        encrypted, _key, _plain = TROVE_VECTORS[0]
        # A wrong key gives random padding, refused but for the 1/256
        # chance of a valid-looking last byte; this vector is not one.
        self.assertRaises(trove_keys.TroveKeyError,
                          trove_keys.decrypt_trove_key, encrypted, 'wrong')

    def test_malformed_refused(self):
        for bad in ('not base64!', base64.b64encode(b'short').decode(),
                    base64.b64encode(b'x' * 33).decode(), ''):
            self.assertRaises(trove_keys.TroveKeyError,
                              trove_keys.decrypt_trove_key, bad,
                              TROVE_DEFAULT_ENCR_KEY)


class TestDerivation(base.TestCase):

    def test_hkdf_with_the_documented_info(self):
        expected = hkdf.HKDF(
            algorithm=hashes.SHA256(), length=32, salt=None,
            info=b'trove-upgrade sealing v1 instance ' + INSTANCE.encode()
        ).derive(b'trove-key')
        self.assertEqual(expected,
                         trove_keys.derive_key(INSTANCE, 'trove-key'))
        # Never Trove's key itself, and different per instance.
        self.assertNotEqual(expected[:9], b'trove-key')
        self.assertNotEqual(expected,
                            trove_keys.derive_key(OTHER, 'trove-key'))

    def test_both_ends_derive_the_same_keyring(self):
        # The agent has Trove's key as text, the control plane as bytes.
        agent = trove_keys.keyring(INSTANCE,
                                   'n3Yv8kQ2LmZ5tR7wX1cB4dF6gH9jK0pA')
        plane = trove_keys.keyring(INSTANCE, trove_keys.decrypt_trove_key(
            *TROVE_VECTORS[0][:2]))
        self.assertEqual(agent.keys, plane.keys)
        self.assertTrue(agent.keys[0][0].startswith('trove-v1-'))
        envelope = sealing.seal(agent, 'heartbeat', '1.1',
                                sealing.TO_CONDUCTOR, {'a': 1})
        sealing.open_sealed(plane, envelope, 'heartbeat',
                            sealing.TO_CONDUCTOR, {'a': 1}, 60,
                            sealing.MemoryReplayCache())

    def test_empty_key_refused(self):
        self.assertRaises(trove_keys.TroveKeyError, trove_keys.keyring,
                          INSTANCE, '')
