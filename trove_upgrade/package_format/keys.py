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

"""Key files, key ids, the trusted signing keys and the decryption keyring.

Two kinds of keys exist. Ed25519 *signing* keys make manifests trustworthy:
the operator keeps the private half offline, agents trust a set of public
halves with a threshold, so a key can be rotated by trusting old and new for
a while, and one stolen key can be made insufficient. AES-256 *encryption*
keys keep packages confidential; every agent holds them, which is why they
never stand for authenticity (the signed payload hash does). Agents may hold
several, selected by key id, so the encryption key can be rotated too.

A key id is what a manifest and a payload name a key by. It is computed from
the key, never read from a file: for a signing key the SHA-256 of the raw
32-byte public key, for an encryption key the SHA-256 of a fixed label and
the key (the label keeps the id from ever being a plain hash of a secret
that could also be used elsewhere). Key files are small JSON documents;
they are created with mode 0600 and never overwritten, and those holding
secrets are read only when no other user could have planted or read them
(``secret_files``).
"""

import hashlib
import json
import os
import secrets

from cryptography import exceptions as crypto_exceptions
from cryptography.hazmat.primitives.asymmetric import ed25519

from trove_upgrade.common import exception as exceptions
from trove_upgrade.common import secret_files

SIGNING_KEY_TYPE = 'ed25519'
ENCRYPTION_KEY_TYPE = 'aes-256-gcm'
ENCRYPTION_KEY_SIZE = 32
PUBLIC_KEY_SUFFIX = '.pub'
_ENCRYPTION_KEY_ID_LABEL = b'trove-upgrade encryption key id\x00'
_MAX_KEY_FILE_SIZE = 64 * 1024


def signing_key_id(public_raw):
    """Key id of an Ed25519 public key given as its 32 raw bytes."""
    return hashlib.sha256(public_raw).hexdigest()


def encryption_key_id(key):
    """Key id of an AES-256 key; reveals nothing about the key."""
    return hashlib.sha256(_ENCRYPTION_KEY_ID_LABEL + key).hexdigest()


class SigningKey:
    """The private half of a signing key, used only by the packaging tool."""

    def __init__(self, private_key):
        self._private = private_key
        self.public_raw = private_key.public_key().public_bytes_raw()
        self.key_id = signing_key_id(self.public_raw)

    def sign(self, data):
        return self._private.sign(data)

    def private_raw(self):
        return self._private.private_bytes_raw()


class TrustedKeys:
    """The public keys a verifier trusts and how many must sign."""

    def __init__(self, public_keys, threshold=1):
        # The raw forms, not serialization's: that package loads its SSH
        # key support, the largest import of a verification.
        self._keys = {signing_key_id(key.public_bytes_raw()): key
                      for key in public_keys}
        if not isinstance(threshold, int) or not (
                1 <= threshold <= len(self._keys)):
            raise exceptions.InvalidThresholdError(
                'threshold %r must be between 1 and the number of distinct '
                'trusted keys (%d)' % (threshold, len(self._keys)))
        self.threshold = threshold

    @property
    def key_ids(self):
        return frozenset(self._keys)

    def __contains__(self, key_id):
        return key_id in self._keys

    def verify(self, key_id, signature, data):
        """True when ``signature`` over ``data`` is valid for ``key_id``."""
        try:
            self._keys[key_id].verify(signature, data)
        except crypto_exceptions.InvalidSignature:
            return False
        return True


class Keyring:
    """Decryption keys by key id; several allow rotating the key."""

    def __init__(self, keys):
        self._keys = {encryption_key_id(key): key for key in keys}

    @property
    def key_ids(self):
        return frozenset(self._keys)

    def __contains__(self, key_id):
        return key_id in self._keys

    def get(self, key_id):
        try:
            return self._keys[key_id]
        except KeyError:
            raise exceptions.MissingDecryptionKeyError(
                'no configured encryption key has key id %s (configured: '
                '%s)' % (key_id, ', '.join(sorted(self._keys)) or 'none'))


def generate_signing_key():
    return SigningKey(ed25519.Ed25519PrivateKey.generate())


def generate_encryption_key():
    return secrets.token_bytes(ENCRYPTION_KEY_SIZE)


def _write_new(path, document):
    data = (json.dumps(document, indent=2, sort_keys=True) + '\n').encode()
    secret_files.write_secret_file(path, data, replace=False)


def write_signing_key(path, signing_key):
    """Write the private key to ``path`` and the public key beside it.

    Returns the two paths; both files are new and have mode 0600.
    """
    public_path = path + PUBLIC_KEY_SUFFIX
    for target in (path, public_path):
        if os.path.lexists(target):
            raise exceptions.KeyFileExistsError(
                '%s already exists; refusing to overwrite a key file'
                % target)
    common = {'keytype': SIGNING_KEY_TYPE, 'key_id': signing_key.key_id,
              'public': signing_key.public_raw.hex()}
    _write_new(path, dict(common, private=signing_key.private_raw().hex()))
    try:
        _write_new(public_path, common)
    except BaseException:
        os.unlink(path)
        raise
    return path, public_path


def write_encryption_key(path, key):
    """Write an encryption key to a new file with mode 0600."""
    _write_new(path, {'keytype': ENCRYPTION_KEY_TYPE,
                      'key_id': encryption_key_id(key), 'key': key.hex()})
    return path


def _read_key_file(path, keytype, secret=True):
    """The JSON document of a key file.

    A secret one passes the checks of ``secret_files.read_secret_file``;
    a public key may be world-readable.
    """
    if secret:
        data = secret_files.read_secret_file(path, _MAX_KEY_FILE_SIZE)
    else:
        try:
            with open(path, 'rb') as source:
                data = source.read(_MAX_KEY_FILE_SIZE + 1)
        except OSError as exc:
            raise exceptions.KeyFileError(
                'cannot read key file %s: %s' % (path, exc.strerror or exc))
        if len(data) > _MAX_KEY_FILE_SIZE:
            raise exceptions.KeyFileError('%s is too large for a key file'
                                          % path)
    try:
        document = json.loads(data)
    except (ValueError, RecursionError):
        raise exceptions.KeyFileError('%s is not a JSON key file' % path)
    if not isinstance(document, dict) or document.get('keytype') != keytype:
        raise exceptions.KeyFileError(
            '%s is not a %s key file' % (path, keytype))
    return document


def _hex_field(document, name, size, path):
    value = document.get(name)
    try:
        raw = bytes.fromhex(value)
    except (TypeError, ValueError):
        raw = b''
    if len(raw) != size:
        raise exceptions.KeyFileError(
            '%s: field %r must be %d bytes of hex' % (path, name, size))
    return raw


def _check_key_id(document, computed, path):
    if document.get('key_id', computed) != computed:
        raise exceptions.KeyFileError(
            '%s: key_id %r does not match the key (%s)'
            % (path, document.get('key_id'), computed))


def load_signing_key(path):
    """Load a private signing key written by :func:`write_signing_key`."""
    document = _read_key_file(path, SIGNING_KEY_TYPE)
    if 'private' not in document:
        raise exceptions.KeyFileError(
            '%s is a public key; signing needs the private key file' % path)
    private = ed25519.Ed25519PrivateKey.from_private_bytes(
        _hex_field(document, 'private', 32, path))
    signing_key = SigningKey(private)
    if document.get('public') != signing_key.public_raw.hex():
        raise exceptions.KeyFileError(
            '%s: the public key does not belong to the private key' % path)
    _check_key_id(document, signing_key.key_id, path)
    return signing_key


def load_public_key(path):
    """Load a public signing key file (the ``.pub`` one)."""
    document = _read_key_file(path, SIGNING_KEY_TYPE, secret=False)
    if 'private' in document:
        raise exceptions.KeyFileError(
            '%s holds a private key; trust its public %s file instead'
            % (path, PUBLIC_KEY_SUFFIX))
    raw = _hex_field(document, 'public', 32, path)
    _check_key_id(document, signing_key_id(raw), path)
    return ed25519.Ed25519PublicKey.from_public_bytes(raw)


def load_encryption_key(path):
    """Load an encryption key file; return the 32 key bytes."""
    document = _read_key_file(path, ENCRYPTION_KEY_TYPE)
    key = _hex_field(document, 'key', ENCRYPTION_KEY_SIZE, path)
    _check_key_id(document, encryption_key_id(key), path)
    return key


def load_trusted_keys(paths, threshold=1):
    """Trusted public keys from key files, with a signature threshold."""
    return TrustedKeys([load_public_key(path) for path in paths], threshold)


def load_keyring(paths):
    """A decryption keyring from encryption key files."""
    return Keyring([load_encryption_key(path) for path in paths])
