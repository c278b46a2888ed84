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

"""Some files of a package from byte ranges of its payload, and forgeries."""

import dataclasses
import io
import os

from trove_upgrade.common import exception as exceptions
from trove_upgrade.package_format import chunked_aead
from trove_upgrade.package_format import keys
from trove_upgrade.package_format import payload_ranges
from trove_upgrade.package_format import verify
from trove_upgrade.tests.unit.package_format import base

# Files of every shape: across chunk boundaries, inside one, empty.
SIZES = (70000, 5000, 0, 9000, 100, 12345)
FRAME = base.SMALL_CHUNK + chunked_aead.TAG_SIZE


class TestPayloadRanges(base.PackagingTestCase):

    def setUp(self):
        super().setUp()
        self.path, manifest = self.build(sizes=SIZES)
        self.manifest = verify.VerifiedManifest(**{
            f.name: getattr(manifest, f.name)
            for f in dataclasses.fields(manifest)})
        self.payload = self.read(self.path)

    def entries(self, *indexes):
        return [self.manifest.files[i] for i in indexes]

    def fetch(self, wanted, payload=None):
        payload = payload or self.payload
        return b''.join(payload[r.start:r.start + r.length]
                        for r in payload_ranges.plan(self.manifest, wanted))

    def extract(self, wanted, fetched):
        path = os.path.join(self.tmp, 'ranges')
        self.write(path, fetched)
        return verify.verify_and_extract_files(
            path, self.manifest, self.keyring, self.dest, wanted)

    def test_any_files_come_out_whole_from_their_ranges(self):
        originals = {e.name: e for e in self.manifest.files}
        for wanted in ((0,), (1,), (2,), (3,), (5,), (1, 4), (0, 3, 5),
                       tuple(range(len(SIZES)))):
            entries = self.entries(*wanted)
            paths = self.extract(entries, self.fetch(entries))
            self.assertEqual(sorted(e.name for e in entries),
                             sorted(os.path.basename(p) for p in paths))
            for path in paths:
                entry = originals[os.path.basename(path)]
                self.assertEqual(entry.size, os.path.getsize(path))
            os.rename(self.dest, self.dest + '-%s' % '-'.join(
                map(str, wanted)))

    def test_ranges_hold_their_files_and_at_most_a_chunk_each_side(self):
        entries = self.entries(1, 3, 4)
        ranges = payload_ranges.plan(self.manifest, entries)
        # 3 and 4 are neighbours: one range; 2 between 1 and 3 is empty.
        self.assertEqual(1, len(ranges))
        self.assertEqual(tuple(entries), ranges[0].files)
        plain = sum(e.size for e in entries)
        self.assertLessEqual(ranges[0].length,
                             plain + 2 * base.SMALL_CHUNK
                             + ranges[0].frames * chunked_aead.TAG_SIZE)
        self.assertEqual([], payload_ranges.plan(self.manifest,
                                                 self.entries(2)))

    def assertRefused(self, error, wanted, fetched):
        e = self.assertRaises(error, self.extract, wanted, fetched)
        self.assertFalse(os.path.exists(self.dest))
        self.assertEqual([], [n for n in os.listdir(self.out_dir)
                              if n.startswith('.')])
        return e

    def test_a_modified_byte_is_refused(self):
        entries = self.entries(3)
        fetched = bytearray(self.fetch(entries))
        fetched[len(fetched) // 2] ^= 1
        self.assertRefused(exceptions.ChunkAuthenticationError, entries,
                           bytes(fetched))

    def test_a_range_answered_with_other_bytes_is_refused(self):
        entries = self.entries(3)
        r, = payload_ranges.plan(self.manifest, entries)
        other = self.payload[r.start + FRAME:r.start + FRAME + r.length]
        self.assertRefused(exceptions.ChunkAuthenticationError, entries,
                           other)

    def test_short_or_long_ranges_are_refused(self):
        entries = self.entries(0)
        fetched = self.fetch(entries)
        self.assertRefused(exceptions.TruncatedPayloadError, entries,
                           fetched[:-1])
        self.assertRefused(exceptions.EndlessDataError, entries,
                           fetched + b'\0')

    def resealed(self, plaintext):
        """The payload encrypted again, as any key holder can: a guest."""
        sink = io.BytesIO()
        encryptor = chunked_aead.ChunkEncryptor(
            sink, self.encryption_key,
            bytes.fromhex(keys.encryption_key_id(self.encryption_key)),
            base.SMALL_CHUNK, bytes.fromhex(self.manifest.encryption.salt))
        encryptor.write(plaintext)
        encryptor.close()
        return sink.getvalue()

    def plaintext(self):
        return chunked_aead.open_decryptor(
            io.BytesIO(self.read(self.path)),
            self.encryption_key).read()

    def test_a_tampered_wheel_sealed_again_is_refused(self):
        entries = self.entries(3)
        plaintext = bytearray(self.plaintext())
        plaintext[sum(SIZES[:3]) + 10] ^= 1
        e = self.assertRefused(
            exceptions.FileHashMismatchError, entries,
            self.fetch(entries, self.resealed(bytes(plaintext))))
        self.assertIn(entries[0].name, str(e))

    def test_a_wheel_with_another_entry_s_bytes_is_refused(self):
        # Same size files swapped in the plaintext, sealed at the right
        # positions: each is a genuine signed file, at the wrong name.
        self.path, manifest = self.build('twins', sizes=(5000, 5000))
        self.manifest = verify.VerifiedManifest(**{
            f.name: getattr(manifest, f.name)
            for f in dataclasses.fields(manifest)})
        plaintext = self.plaintext()
        swapped = self.resealed(plaintext[5000:] + plaintext[:5000])
        entries = self.entries(0)
        e = self.assertRefused(exceptions.FileHashMismatchError, entries,
                               self.fetch(entries, swapped))
        self.assertIn('it is the signed file %r'
                      % self.manifest.files[1].name, str(e))
