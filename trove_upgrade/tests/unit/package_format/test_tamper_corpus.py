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

"""The tamper corpus: every modified package is refused, nothing extracted.

Each case builds a genuine package, damages it in one way, and checks that
verification raises the one exception meant for that damage and that the
destination's parent directory is left exactly as it was.
"""

import datetime
import hashlib
import io
import os

from trove_upgrade.common import exception as exc
from trove_upgrade.package_format import chunked_aead
from trove_upgrade.package_format import keys
from trove_upgrade.package_format import manifest as manifest_mod
from trove_upgrade.package_format import verify
from trove_upgrade.tests.unit.package_format import base

HEADER = chunked_aead.HEADER_SIZE
FRAME = base.SMALL_CHUNK + chunked_aead.TAG_SIZE


class TestGenuinePackage(base.PackagingTestCase):

    def test_genuine_package_extracts_every_listed_file(self):
        path, manifest = self.build()
        files = self.verify_payload(path)
        self.assertEqual([os.path.join(self.dest, f.name)
                          for f in manifest.files], files)
        for entry, extracted in zip(manifest.files, files):
            data = self.read(extracted)
            self.assertEqual(entry.size, len(data))
            self.assertEqual(entry.sha256, hashlib.sha256(data).hexdigest())
        self.assertEqual(['extracted'], os.listdir(self.out_dir))

    def test_payload_from_file_object(self):
        path, manifest = self.build()
        verified = self.verify_manifest(self.read(path + '.manifest'))
        with open(path, 'rb') as source:
            files = verify.verify_and_extract(source, verified, self.keyring,
                                              self.dest)
        self.assertEqual(len(manifest.files), len(files))

    def test_keyring_selects_the_key_by_id(self):
        new_key = keys.generate_encryption_key()
        self.keyring = keys.Keyring([self.encryption_key, new_key])
        old, _ = self.build('old')
        new, _ = self.build('new', encryption_key=new_key)
        self.assertEqual(2, len(self.verify_payload(old)))
        os.rename(self.dest, self.dest + '-old')
        self.assertEqual(2, len(self.verify_payload(new)))

    def test_unverified_manifest_is_refused(self):
        path, manifest = self.build()
        self.assertRaises(TypeError, verify.verify_and_extract, path,
                          manifest, self.keyring, self.dest)
        self.assertNothingExtracted()


class TestFlippedBytes(base.PackagingTestCase):
    """A flipped byte in every region of the payload file."""

    def setUp(self):
        super().setUp()
        self.path, self.manifest = self.build()
        self.original = self.read(self.path)
        self.chunks = (len(self.original) - HEADER + FRAME - 1) // FRAME
        self.assertGreater(self.chunks, 5)

    def flip(self, offset):
        data = bytearray(self.original)
        data[offset] ^= 0x01
        self.write(self.path, bytes(data))

    def test_every_header_byte(self):
        for offset in range(HEADER):
            self.flip(offset)
            self.assertRefused(exc.PayloadMismatchError, self.path)

    def test_ciphertext_and_tag_of_every_chunk(self):
        for chunk in range(self.chunks):
            start = HEADER + chunk * FRAME
            end = min(start + FRAME, len(self.original))
            for offset in (start, (start + end) // 2, end - 1):
                self.flip(offset)
                self.assertRefused(exc.ChunkAuthenticationError, self.path)


class TestStreamDamage(base.PackagingTestCase):

    def setUp(self):
        super().setUp()
        self.path, self.manifest = self.build()
        self.original = self.read(self.path)
        self.boundaries = list(range(HEADER, len(self.original), FRAME))

    def test_truncation_at_every_chunk_boundary(self):
        for length in self.boundaries:
            self.write(self.path, self.original[:length])
            self.assertRefused(exc.TruncatedPayloadError, self.path)

    def test_truncation_inside_chunks(self):
        for length in [HEADER // 2] + [b + FRAME // 3
                                       for b in self.boundaries[:-1]]:
            self.write(self.path, self.original[:length])
            self.assertRefused(exc.TruncatedPayloadError, self.path)

    def test_appended_data(self):
        for extra in (b'\0', b'x' * FRAME, self.original[HEADER:]):
            self.write(self.path, self.original + extra)
            self.assertRefused(exc.EndlessDataError, self.path)

    def test_endless_stream_is_cut_at_the_signed_size(self):
        path, manifest = self.build('other')
        verified = self.verify_manifest(self.read(path + '.manifest'))

        class Endless(io.RawIOBase):
            served = 0

            def __init__(self, prefix):
                self.prefix = prefix

            def read(self, size):
                data = (self.prefix[self.served:self.served + size]
                        or b'A' * size)
                self.served += len(data)
                return data

        source = Endless(self.read(path))
        self.assertRaises(exc.EndlessDataError, verify.verify_and_extract,
                          source, verified, self.keyring, self.dest)
        self.assertEqual(manifest.payload.size + 1, source.served)
        self.assertNothingExtracted()

    def test_chunks_reordered(self):
        data = bytearray(self.original)
        first, second = self.boundaries[1], self.boundaries[2]
        data[first:first + FRAME], data[second:second + FRAME] = (
            self.original[second:second + FRAME],
            self.original[first:first + FRAME])
        self.write(self.path, bytes(data))
        self.assertRefused(exc.ChunkAuthenticationError, self.path)

    def test_chunk_replaced_by_a_copy_of_another(self):
        data = bytearray(self.original)
        first, second = self.boundaries[1], self.boundaries[2]
        data[second:second + FRAME] = self.original[first:first + FRAME]
        self.write(self.path, bytes(data))
        self.assertRefused(exc.ChunkAuthenticationError, self.path)

    def test_payload_of_another_encryption_key(self):
        other_key = keys.generate_encryption_key()
        self.keyring = keys.Keyring([self.encryption_key, other_key])
        path, _ = self.build('other', encryption_key=other_key)
        self.write(self.path, self.read(path)[:len(self.original)])
        self.assertRefused(exc.PayloadMismatchError, self.path)

    def test_unknown_decryption_key(self):
        self.keyring = keys.Keyring([keys.generate_encryption_key()])
        self.assertRefused(exc.MissingDecryptionKeyError, self.path)

    def test_oversized_payload_refused_before_reading(self):
        self.write(self.path, b'')
        self.assertRefused(exc.PayloadTooLargeError, self.path,
                           max_payload_size=self.manifest.payload.size - 1)

    def test_destination_exists(self):
        os.mkdir(self.dest)
        self.assertRaises(exc.DestinationExistsError, self.verify_payload,
                          self.path)
        self.assertEqual([], os.listdir(self.dest))
        self.assertEqual(['extracted'], os.listdir(self.out_dir))


class TestMixAndMatch(base.PackagingTestCase):

    def test_manifest_of_another_package(self):
        path, _ = self.build('one')
        other, _ = self.build('two')
        self.assertRefused(exc.PayloadMismatchError, path,
                           other + manifest_mod.MANIFEST_SUFFIX)

    def test_payload_forged_by_an_encryption_key_holder(self):
        # Every agent holds the encryption key, so one compromised guest
        # could re-encrypt a different plaintext under the genuine header:
        # every chunk authenticates, only the signed payload hash catches
        # the forgery, before anything is renamed into place.
        path, manifest = self.build()
        plaintext = chunked_aead.open_decryptor(
            io.BytesIO(self.read(path)), self.encryption_key).read()
        forged = io.BytesIO()
        encryptor = chunked_aead.ChunkEncryptor(
            forged, self.encryption_key,
            bytes.fromhex(manifest.encryption.key_id),
            manifest.encryption.chunk_size,
            bytes.fromhex(manifest.encryption.salt))
        # Its last byte flipped: always another plaintext (b'X' in its
        # place was none, 1 time in 256, and the test failed).
        encryptor.write(plaintext[:-1] + bytes([plaintext[-1] ^ 0xFF]))
        encryptor.close()
        self.assertEqual(manifest.payload.size, len(forged.getvalue()))
        self.write(path, forged.getvalue())
        self.assertRefused(exc.PayloadHashMismatchError, path)


class TestManifestAttacks(base.PackagingTestCase):
    """Manifest-level attacks, seen through the whole verification."""

    def test_expired_manifest(self):
        path, _ = self.build(created=base.NOW - datetime.timedelta(days=60),
                             expires=base.NOW - datetime.timedelta(days=1))
        self.assertRefused(exc.ExpiredManifestError, path)

    def test_unknown_signing_key(self):
        path, _ = self.build(signing_keys=[keys.generate_signing_key()])
        self.assertRefused(exc.UnknownSigningKeyError, path)

    def test_signatures_below_threshold(self):
        second = keys.generate_signing_key()
        self.trusted = keys.TrustedKeys(
            [base.public_key(self.signing_key), base.public_key(second)], 2)
        path, _ = self.build()
        self.assertRefused(exc.ThresholdNotMetError, path)

    def test_downgrade_without_override(self):
        path, _ = self.build(version='0.9.0')
        exc_info = self.assertRaises(
            exc.RollbackError, self.verify_manifest,
            self.read(path + '.manifest'), expected_version='v0.9.0',
            installed_version='1.0.0')
        self.assertIn('0.9.0', str(exc_info))
        self.assertNothingExtracted()

    def test_signed_byte_changed(self):
        path, manifest = self.build()
        data = self.read(path + '.manifest')
        digest = manifest.files[0].sha256.encode()
        forged = digest[:-1] + (b'0' if digest[-1:] != b'0' else b'1')
        self.write(path + '.manifest', data.replace(digest, forged))
        self.assertRefused(exc.BadSignatureError, path)
