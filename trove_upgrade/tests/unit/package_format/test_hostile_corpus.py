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

"""The hostile corpus of issue 12: every input refused by name, in bounds.

Classes of attack, each refused with one named PackageError, nothing
extracted and a message of bounded length:

* tar archives written byte by byte (never by :mod:`tarfile`): pax records
  of huge numbers, pax and GNU sparse maps, GNU long names, base-256 and
  negative sizes, bad checksums. Signed as a format 1 package they are
  refused before anything reads them; inside a format 2 package they are
  just file contents, written out verbatim;
* an encryption-key holder (every guest) re-sealing the chunk framing and
  the last-chunk flag of a genuine package;
* byte-level variants of a validly signed manifest (unpadded times,
  ``true`` for 1, ``null`` for an absent field);
* lone surrogates, numbers and versions of thousands of digits, names of
  megabytes.

:class:`TestBoundedTime` runs the whole corpus in a child process that is
killed if it does not finish in a generous time.
"""

import hashlib
import io
import os
import subprocess
import sys

from trove_upgrade.common import canonical
from trove_upgrade.common import exception as exc
from trove_upgrade.package_format import chunked_aead
from trove_upgrade.package_format import manifest as manifest_mod
from trove_upgrade.package_format import verify
from trove_upgrade.tests.unit.package_format import base

MAX_MESSAGE = exc.MAX_MESSAGE_LENGTH
GOOD = ('good-1.0-py3-none-any.whl', b'good wheel ' * 1000)
HEADER = chunked_aead.HEADER_SIZE
FRAME = base.SMALL_CHUNK + chunked_aead.TAG_SIZE


def _octal(value, width):
    return b'%0*o\0' % (width - 1, value)


def tar_header(name=b'good-1.0-py3-none-any.whl', size=None, typeflag=b'0',
               linkname=b'', checksum=None, size_field=None):
    """One ustar header block, every field written by hand."""
    header = bytearray(512)
    header[0:len(name[:100])] = name[:100]
    header[100:108] = _octal(0o644, 8)
    header[108:116] = _octal(0, 8)
    header[116:124] = _octal(0, 8)
    header[124:136] = size_field if size_field is not None else _octal(
        size or 0, 12)
    header[136:148] = _octal(0, 12)
    header[148:156] = b' ' * 8
    header[156:157] = typeflag
    header[157:157 + len(linkname)] = linkname
    header[257:265] = b'ustar\x0000'
    total = checksum if checksum is not None else sum(header)
    header[148:156] = b'%06o\0 ' % total
    return bytes(header)


def tar_member(data, **fields):
    return (tar_header(size=len(data), **fields) + data
            + b'\0' * (-len(data) % 512))


def pax_header(records, typeflag=b'x'):
    body = b''.join(records)
    return tar_member(body, name=b'PaxHeader', typeflag=typeflag)


def pax_record(key, value):
    line = b' %s=%s\n' % (key, value)
    length = len(line) + 1
    length = len(line) + len(str(length + len(line)))
    return b'%d%s' % (length, line)


END = b'\0' * 1024
GOOD_MEMBER = tar_member(GOOD[1])

# name -> the archive bytes; each would make tarfile hang, raise an
# unexpected error, or quote megabytes if it were ever parsed.
HOSTILE_ARCHIVES = {
    # CVE-2024-6232 class: quadratic pax parsing of a huge length field.
    'pax_huge_length': pax_header(
        [b'0' * 200000 + b'1 ' + b'a' * 200000 + b'\n']) + GOOD_MEMBER + END,
    'pax_huge_size_value': pax_header(
        [pax_record(b'size', b'9' * 100000)]) + GOOD_MEMBER + END,
    'pax_sparse_map': pax_header(
        [pax_record(b'GNU.sparse.major', b'1'),
         pax_record(b'GNU.sparse.minor', b'0'),
         pax_record(b'GNU.sparse.name', b'good-1.0-py3-none-any.whl'),
         pax_record(b'GNU.sparse.realsize', b'99999999999999')])
    + GOOD_MEMBER + END,
    'pax_bad_record': pax_header([b'12 x\n']) + GOOD_MEMBER + END,
    'gnu_long_name': tar_member(b'n' * (4 * 1024 * 1024) + b'\0',
                                name=b'././@LongLink', typeflag=b'L')
    + GOOD_MEMBER + END,
    'gnu_long_link': tar_member(b'/etc/passwd\0', name=b'././@LongLink',
                                typeflag=b'K')
    + tar_header(typeflag=b'2') + END,
    'gnu_sparse': tar_header(typeflag=b'S', size=4096) + b'\0' * 4096 + END,
    'base256_size': tar_header(
        size_field=b'\x80' + b'\x00' * 3 + b'\xff' * 8) + GOOD[1] + END,
    'negative_size': tar_header(size_field=b'\xff' * 12) + END,
    'bad_checksum': tar_header(size=len(GOOD[1]), checksum=1)
    + GOOD[1] + END,
    'symlink_then_file': tar_header(typeflag=b'2', linkname=b'/etc')
    + tar_member(b'x', name=b'good-1.0-py3-none-any.whl/../../x') + END,
}


class CorpusTestCase(base.PackagingTestCase):

    def assertRefusedAs(self, error, function, *args, **kwargs):
        """``function`` raises exactly ``error``, briefly; nothing stays."""
        raised = self.assertRaises(exc.PackageError, function, *args,
                                   **kwargs)
        self.assertIsInstance(raised, error)
        self.assertLessEqual(len(str(raised)), MAX_MESSAGE)
        self.assertNothingExtracted()
        return raised


class TestHostileArchives(CorpusTestCase):
    """Hand-written tar archives: never parsed by anything."""

    def refuse_format_1(self, archive):
        path, _ = self.package_from_plaintext(
            archive, [GOOD], format_version=manifest_mod.TAR_FORMAT_VERSION)
        raised = self.assertRefusedAs(exc.UnsupportedFormatError,
                                      self.verify_payload, path)
        self.assertIn('rebuild', str(raised))

    def extract_verbatim_in_format_2(self, archive):
        name = 'tar-1.0-py3-none-any.whl'
        path, _ = self.package_from_plaintext(archive, [(name, archive)])
        [extracted] = self.verify_payload(path)
        self.assertEqual(archive, self.read(extracted))
        self.assertEqual([name], os.listdir(self.dest))

    def test_every_archive_signed_as_format_1_is_refused_unread(self):
        for name, archive in HOSTILE_ARCHIVES.items():
            with self.subTest(name):
                self.refuse_format_1(archive)

    def test_pax_huge_length_format_1(self):
        self.refuse_format_1(HOSTILE_ARCHIVES['pax_huge_length'])

    def test_pax_sparse_map_format_1(self):
        self.refuse_format_1(HOSTILE_ARCHIVES['pax_sparse_map'])

    def test_gnu_long_name_format_1(self):
        self.refuse_format_1(HOSTILE_ARCHIVES['gnu_long_name'])

    def test_gnu_sparse_format_1(self):
        self.refuse_format_1(HOSTILE_ARCHIVES['gnu_sparse'])

    def test_base256_size_format_1(self):
        self.refuse_format_1(HOSTILE_ARCHIVES['base256_size'])

    def test_negative_size_format_1(self):
        self.refuse_format_1(HOSTILE_ARCHIVES['negative_size'])

    def test_bad_checksum_format_1(self):
        self.refuse_format_1(HOSTILE_ARCHIVES['bad_checksum'])

    def test_archives_are_inert_file_contents_in_format_2(self):
        for name, archive in HOSTILE_ARCHIVES.items():
            with self.subTest(name):
                self.extract_verbatim_in_format_2(archive)
                os.rename(self.dest, self.dest + '-' + name)
                os.rename(self.dest + '-' + name,
                          os.path.join(self.tmp, name))


class TestEncryptionKeyHolder(CorpusTestCase):
    """A guest holding the encryption key, but no signing key, re-seals."""

    def setUp(self):
        super().setUp()
        self.path, self.manifest = self.build(sizes=(10000, 3000))
        self.original = self.read(self.path)
        self.header = chunked_aead.StreamHeader.from_bytes(
            self.original[:HEADER])
        self.cipher = chunked_aead._chunk_cipher(self.encryption_key,
                                                 self.header)
        self.plain = chunked_aead.open_decryptor(
            io.BytesIO(self.original), self.encryption_key).read()
        size = base.SMALL_CHUNK
        self.chunks = [self.plain[i:i + size]
                       for i in range(0, len(self.plain), size)]

    def seal(self, counter, data, last):
        return self.cipher.encrypt(
            chunked_aead._nonce(counter, b'\x01' if last else b'\x00'),
            data, self.header.to_bytes())

    def refuse(self, error, frames):
        self.write(self.path, self.original[:HEADER] + b''.join(frames))
        self.assertRefusedAs(error, self.verify_payload, self.path)

    def test_last_flag_on_the_first_chunk_rest_dropped(self):
        # The signed size says more follows chunk 0: its flag is wrong.
        self.refuse(exc.TrailingDataError,
                    [self.seal(0, self.chunks[0], True)])

    def test_last_flag_on_the_first_chunk_rest_kept(self):
        frames = [self.seal(0, self.chunks[0], True)] + [
            self.seal(i, c, i == len(self.chunks) - 1)
            for i, c in enumerate(self.chunks) if i]
        self.refuse(exc.TrailingDataError, frames)

    def test_last_chunk_without_its_flag(self):
        frames = [self.seal(i, c, False) for i, c in enumerate(self.chunks)]
        self.refuse(exc.TruncatedPayloadError, frames)

    def test_counter_shifted_by_one(self):
        frames = [self.seal(i + 1, c, i == len(self.chunks) - 1)
                  for i, c in enumerate(self.chunks)]
        self.refuse(exc.ChunkAuthenticationError, frames)

    def test_extra_chunk_after_a_resealed_end(self):
        chunks = self.chunks + [b'more']
        frames = [self.seal(i, c, i == len(chunks) - 1)
                  for i, c in enumerate(chunks)]
        # By the signed size the genuine last chunk is the last frame; it
        # is no longer flagged so (the flag moved to the extra chunk).
        self.refuse(exc.TruncatedPayloadError, frames)

    def test_same_framing_other_plaintext(self):
        chunks = [bytes(len(c)) for c in self.chunks]
        frames = [self.seal(i, c, i == len(chunks) - 1)
                  for i, c in enumerate(chunks)]
        self.refuse(exc.PayloadHashMismatchError, frames)

    def test_shorter_last_chunk_padded_by_a_short_frame(self):
        # Same total size, frames cut differently: the signed size fixes
        # where every frame ends, so the first one no longer opens.
        chunks = [self.chunks[0][:-16]] + [self.chunks[0][-16:]] + \
            self.chunks[1:-1]
        chunks.append(self.chunks[-1][:-16] if len(self.chunks[-1]) > 16
                      else b'')
        frames = [self.seal(i, c, i == len(chunks) - 1)
                  for i, c in enumerate(chunks)]
        data = b''.join(frames)[:len(self.original) - HEADER]
        self.refuse(exc.ChunkAuthenticationError, [data])


class TestManifestByteVariants(CorpusTestCase):
    """A validly signed manifest written differently keeps no signature."""

    def setUp(self):
        super().setUp()
        self.path, self.manifest = self.build()
        self.genuine = self.read(self.path + manifest_mod.MANIFEST_SUFFIX)

    def variant(self, old, new):
        self.assertIn(old, self.genuine)
        return self.genuine.replace(old, new, 1)

    def test_genuine_manifest_verifies(self):
        self.verify_manifest(self.genuine)

    def test_unpadded_time(self):
        created = manifest_mod.format_time(self.manifest.created)
        year, month, rest = created.split('-', 2)
        unpadded = '%s-%d-%s' % (year, int(month), rest)
        data = self.variant(created.encode(), unpadded.encode())
        self.assertRefusedAs(exc.BadSignatureError, self.verify_manifest,
                             data)

    def test_true_where_an_integer_was_signed(self):
        data = self.variant(
            b'"format_version":%d' % manifest_mod.FORMAT_VERSION,
            b'"format_version":true')
        self.assertRefusedAs(exc.ManifestError, self.verify_manifest, data)

    def test_null_for_an_absent_field(self):
        data = self.variant(b'"payload":',
                            b'"min_upgrade_from":null,"payload":')
        self.assertRefusedAs(exc.BadSignatureError, self.verify_manifest,
                             data)

    def test_null_health_check(self):
        data = self.variant(b'"min_upgrade_from"' if b'"min_upgrade_from"'
                            in self.genuine else b'"payload":',
                            b'"health_check":null,"payload":')
        self.assertRefusedAs(exc.BadSignatureError, self.verify_manifest,
                             data)

    def sign_raw(self, signed_bytes):
        """A manifest whose signer signed exactly ``signed_bytes``."""
        sig = self.signing_key.sign(manifest_mod.SIGNATURE_CONTEXT
                                    + signed_bytes)
        return (b'{"signatures":[{"key_id":"%s","sig":"%s"}],"signed":%s}'
                % (self.signing_key.key_id.encode(), sig.hex().encode(),
                   signed_bytes))

    def signed_part(self):
        document = canonical.loads(self.genuine)
        return canonical.signed_bytes(self.genuine, document)

    def test_signer_fooled_into_signing_an_unpadded_time(self):
        created = manifest_mod.format_time(self.manifest.created)
        signed = self.signed_part().replace(
            created.encode(), created.replace('-0', '-').encode())
        self.assertRefusedAs(exc.ManifestFormatError, self.verify_manifest,
                             self.sign_raw(signed))

    def test_signer_fooled_into_signing_a_null(self):
        signed = self.signed_part().replace(
            b'"payload":', b'"min_upgrade_from":null,"payload":')
        self.assertRefusedAs(exc.ManifestFormatError, self.verify_manifest,
                             self.sign_raw(signed))

    def test_signer_fooled_into_signing_true_for_format_1(self):
        signed = self.signed_part().replace(
            b'"format_version":%d' % manifest_mod.FORMAT_VERSION,
            b'"format_version":true')
        self.assertRefusedAs(exc.ManifestFormatError, self.verify_manifest,
                             self.sign_raw(signed))


class TestCrashesWithoutAKey(CorpusTestCase):
    """Inputs that escaped as other exceptions, or as huge messages."""

    def setUp(self):
        super().setUp()
        self.path, self.manifest = self.build()
        self.genuine = self.read(self.path + manifest_mod.MANIFEST_SUFFIX)
        self.version = b'"version":"%s"' % self.manifest.version.encode()

    def test_lone_surrogate_in_a_string(self):
        data = self.genuine.replace(self.version, b'"version":"\\ud800"')
        self.assertRefusedAs(exc.ManifestFormatError, self.verify_manifest,
                             data)

    def test_lone_surrogate_in_a_key(self):
        data = self.genuine.replace(b'{"signatures"',
                                    b'{"\\udfff":1,"signatures"')
        self.assertRefusedAs(exc.ManifestFormatError, self.verify_manifest,
                             data)

    def test_version_of_5000_digits(self):
        data = self.genuine.replace(self.version,
                                    b'"version":"%s"' % (b'1' * 5000))
        self.assertRefusedAs(exc.ManifestError, self.verify_manifest, data)

    def test_signed_version_of_5000_digits(self):
        signed = TestManifestByteVariants.signed_part(self).replace(
            self.version, b'"version":"%s"' % (b'1' * 5000))
        data = TestManifestByteVariants.sign_raw(self, signed)
        self.assertRefusedAs(exc.ManifestFormatError, self.verify_manifest,
                             data)

    def test_requested_version_of_5000_digits(self):
        self.assertRefusedAs(exc.InvalidVersionError, self.verify_manifest,
                             self.genuine, expected_version='1' * 5000)

    def test_installed_version_of_5000_digits(self):
        self.assertRefusedAs(
            exc.InvalidVersionError, self.verify_manifest, self.genuine,
            expected_version=self.manifest.version,
            installed_version='9' * 5000)

    def test_number_of_5000_digits(self):
        data = self.genuine.replace(
            b'"size":%d' % self.manifest.payload.size,
            b'"size":%s' % (b'7' * 5000))
        self.assertRefusedAs(exc.ManifestFormatError, self.verify_manifest,
                             data)

    def test_deep_nesting(self):
        data = self.genuine.replace(b'"signed":', b'"x":' + b'[' * 100000
                                    + b']' * 100000 + b',"signed":')
        self.assertRefusedAs(exc.ManifestFormatError, self.verify_manifest,
                             data, max_manifest_size=len(data))

    def test_signed_file_name_of_4_megabytes(self):
        name = self.manifest.files[0].name.encode()
        signed = TestManifestByteVariants.signed_part(self).replace(
            name, b'a' * (4 * 1024 * 1024))
        data = TestManifestByteVariants.sign_raw(self, signed)
        self.assertRefusedAs(exc.ManifestFormatError, self.verify_manifest,
                             data, max_manifest_size=len(data))

    def test_unknown_key_of_4_megabytes(self):
        data = self.genuine.replace(
            b'{"signatures"',
            b'{"%s":1,"signatures"' % (b'k' * (4 * 1024 * 1024)))
        self.assertRefusedAs(exc.ManifestFormatError, self.verify_manifest,
                             data, max_manifest_size=len(data))

    def test_too_many_files(self):
        files = canonical.dumps([
            {'name': 'f%05d.whl' % i, 'size': 0, 'sha256': '0' * 64}
            for i in range(manifest_mod.MAX_FILES + 1)])
        document = canonical.loads(self.genuine)
        signed = TestManifestByteVariants.signed_part(self)
        old = canonical.dumps(document['signed']['files'])
        data = TestManifestByteVariants.sign_raw(
            self, signed.replace(old, files))
        self.assertRefusedAs(exc.ManifestFormatError, self.verify_manifest,
                             data, max_manifest_size=len(data))


class TestBoundedMessages(base.PackagingTestCase):

    def test_a_huge_message_is_cut(self):
        error = exc.DestinationExistsError('x' * (10 * 1024 * 1024))
        self.assertLessEqual(len(str(error)), MAX_MESSAGE)
        self.assertIn('characters cut', str(error))

    def test_quoted_names_are_cut(self):
        self.assertLess(len(exc.quoted('y' * 100000)), 200)


class TestBoundedTime(base.PackagingTestCase):
    """The whole corpus finishes in a child killed after a generous time."""

    TIMEOUT = 600

    def test_corpus_returns_in_bounded_time(self):
        module = __name__
        classes = ['%s.%s' % (module, name) for name in (
            'TestHostileArchives', 'TestEncryptionKeyHolder',
            'TestManifestByteVariants', 'TestCrashesWithoutAKey')]
        try:
            result = subprocess.run(
                [sys.executable, '-m', 'testtools.run'] + classes,
                capture_output=True, timeout=self.TIMEOUT)
        except subprocess.TimeoutExpired:
            self.fail('verifying the hostile corpus did not finish in %ds'
                      % self.TIMEOUT)
        self.assertEqual(0, result.returncode,
                         result.stderr.decode(errors='replace')[-3000:])


def _digest(data):
    return hashlib.sha256(data).hexdigest()


__all__ = ['HOSTILE_ARCHIVES', 'tar_header', 'verify', '_digest']
