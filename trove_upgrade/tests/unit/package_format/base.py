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

"""Packages made on the fly for tests: keys, wheels, and hostile payloads.

Nothing here is committed data: every key, wheel and package is generated
in a per-test temporary directory.
"""

import datetime
import hashlib
import os

from cryptography.hazmat.primitives.asymmetric import ed25519
import fixtures

from trove_upgrade.package_format import build
from trove_upgrade.package_format import chunked_aead
from trove_upgrade.package_format import keys
from trove_upgrade.package_format import manifest as manifest_mod
from trove_upgrade.package_format import verify
from trove_upgrade.tests import base

NOW = datetime.datetime(2026, 6, 1, 12, 0, 0, tzinfo=datetime.timezone.utc)
SMALL_CHUNK = 4096


def public_key(signing_key):
    return ed25519.Ed25519PublicKey.from_public_bytes(
        signing_key.public_raw)


class PackagingTestCase(base.TestCase):
    """A temporary directory, one signing key, one encryption key, wheels."""

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.signing_key = keys.generate_signing_key()
        self.encryption_key = keys.generate_encryption_key()
        self.trusted = keys.TrustedKeys([public_key(self.signing_key)])
        self.keyring = keys.Keyring([self.encryption_key])
        self.out_dir = os.path.join(self.tmp, 'out')
        os.mkdir(self.out_dir)
        self.dest = os.path.join(self.out_dir, 'extracted')

    def make_wheels(self, sizes=(70000, 5000), prefix='pkg'):
        wheel_dir = os.path.join(self.tmp, 'wheels-%s' % prefix)
        os.makedirs(wheel_dir, exist_ok=True)
        paths = []
        for number, size in enumerate(sizes):
            path = os.path.join(wheel_dir, '%s%d-1.0-py3-none-any.whl'
                                % (prefix, number))
            with open(path, 'wb') as out:
                out.write(os.urandom(size))
            paths.append(path)
        return paths

    def build(self, name='pkg', version='v1.0.1', signing_keys=None,
              encryption_key=None, sizes=(70000, 5000), **kwargs):
        """Build a package; return (payload path, manifest)."""
        kwargs.setdefault('created', NOW - datetime.timedelta(days=1))
        kwargs.setdefault('expires', NOW + datetime.timedelta(days=30))
        kwargs.setdefault('chunk_size', SMALL_CHUNK)
        path = os.path.join(self.tmp, name)
        manifest = build.build_package(
            self.make_wheels(sizes, prefix=name), path, version=version,
            signing_keys=signing_keys or [self.signing_key],
            encryption_key=encryption_key or self.encryption_key, **kwargs)
        return path, manifest

    def package_from_plaintext(self, plaintext, files, name='evil',
                               version='v1.0.1', chunk_size=SMALL_CHUNK,
                               format_version=manifest_mod.FORMAT_VERSION):
        """Encrypt and sign any plaintext, as a fooled build would.

        ``files`` are the (name, data) pairs the manifest lists; with
        ``format_version`` 1 the plaintext is meant to be a tar archive.
        """
        path = os.path.join(self.tmp, name)
        key_id = keys.encryption_key_id(self.encryption_key)
        with open(path, 'wb') as out:
            encryptor = chunked_aead.ChunkEncryptor(
                out, self.encryption_key, bytes.fromhex(key_id), chunk_size)
            encryptor.write(plaintext)
            encryptor.close()
        with open(path, 'rb') as source:
            payload = source.read()
        entries = tuple(sorted(
            (manifest_mod.FileEntry(n, len(d), hashlib.sha256(d).hexdigest())
             for n, d in files), key=lambda e: e.name))
        manifest = manifest_mod.Manifest(
            version=version, created=NOW - datetime.timedelta(days=1),
            expires=NOW + datetime.timedelta(days=30),
            payload=manifest_mod.Payload(
                len(payload), hashlib.sha256(payload).hexdigest()),
            encryption=manifest_mod.Encryption(
                key_id=key_id, chunk_size=chunk_size,
                salt=encryptor.header.salt.hex()),
            files=entries, format_version=format_version,
        ).with_signature(self.signing_key)
        build.write_manifest(path + manifest_mod.MANIFEST_SUFFIX, manifest)
        return path, manifest

    def read(self, path):
        with open(path, 'rb') as source:
            return source.read()

    def write(self, path, data):
        with open(path, 'wb') as out:
            out.write(data)

    def verify_manifest(self, manifest_bytes, trusted=None,
                        expected_version='1.0.1', installed_version='1.0.0',
                        **kwargs):
        kwargs.setdefault('now', NOW)
        return verify.verify_manifest(
            manifest_bytes, trusted or self.trusted,
            expected_version=expected_version,
            installed_version=installed_version, **kwargs)

    def verify_payload(self, path, manifest_path=None, **kwargs):
        """Verify and extract ``path`` into ``self.dest``."""
        manifest_path = manifest_path or path + manifest_mod.MANIFEST_SUFFIX
        manifest = self.verify_manifest(self.read(manifest_path))
        return verify.verify_and_extract(path, manifest, self.keyring,
                                         self.dest, **kwargs)

    def assertNothingExtracted(self):
        self.assertFalse(os.path.lexists(self.dest))
        self.assertEqual([], os.listdir(self.out_dir))

    def assertRefused(self, error, path, manifest_path=None, **kwargs):
        """Verification fails with exactly ``error``; nothing remains."""
        exc = self.assertRaises(error, self.verify_payload, path,
                                manifest_path, **kwargs)
        self.assertIs(error, type(exc))
        self.assertNothingExtracted()
        return exc
