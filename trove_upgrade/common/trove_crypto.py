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

"""Trove's encryption of its keys and RPC messages, without Trove.

What ``trove/common/crypto_utils.py`` does (the same in Trove 25.1.0 and
26.0.0), ``encode_data(encrypt_data(data, key))`` and back: AES in CBC mode
whose key is the ASCII hex MD5 digest of the UTF-8 ``key`` (32 bytes:
AES-256), a random 16-byte IV before the ciphertext,
``pad_for_encryption``'s padding (N bytes of value N: PKCS#7), and standard
base64. Trove encrypts its instances' keys in its database so
(``trove_keys``) and its secure RPC messages (``agent/trove_secure_rpc``).

It encrypts but does not authenticate: Trove's choice, kept so that
Trove's processes agree. Decryption checks the padding, so a wrong key is
told apart from a right one almost always, not always.
"""

import base64
import binascii
import hashlib
import os

from cryptography.hazmat.primitives.ciphers import algorithms
from cryptography.hazmat.primitives.ciphers import Cipher
from cryptography.hazmat.primitives.ciphers import modes
from cryptography.hazmat.primitives import padding

from trove_upgrade.common import exception

IV_SIZE = 16
_BLOCK_BITS = 128


class TroveCryptoError(exception.TroveUpgradeError):
    """Not Trove's ciphertext of this key."""


def _cipher(key, iv):
    # Trove's key derivation, kept for Trove to agree: not a use of MD5
    # this project chose.
    digest = hashlib.md5(key.encode('utf-8'), usedforsecurity=False)
    return Cipher(algorithms.AES(digest.hexdigest().encode('ascii')),
                  modes.CBC(iv))


def encrypt(data, key, iv=None):
    """``data`` (bytes) encrypted with ``key`` as Trove does, in base64.

    ``iv`` is random unless given (the tests' vectors give it).
    """
    iv = os.urandom(IV_SIZE) if iv is None else iv
    padder = padding.PKCS7(_BLOCK_BITS).padder()
    padded = padder.update(data) + padder.finalize()
    encryptor = _cipher(key, iv).encryptor()
    sealed = iv + encryptor.update(padded) + encryptor.finalize()
    return base64.b64encode(sealed).decode('ascii')


def decrypt(encoded, key):
    """The bytes Trove encrypted with ``key`` into ``encoded`` (base64).

    :raises: TroveCryptoError when ``encoded`` is not such a ciphertext.
    """
    if not isinstance(encoded, (str, bytes)):
        raise TroveCryptoError('is %s, not base64 text'
                               % type(encoded).__name__)
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as e:
        raise TroveCryptoError('is not base64: %s' % e)
    if len(data) < 2 * IV_SIZE or len(data) % IV_SIZE:
        raise TroveCryptoError('is %d bytes, not an IV and whole AES blocks'
                               % len(data))
    decryptor = _cipher(key, data[:IV_SIZE]).decryptor()
    padded = decryptor.update(data[IV_SIZE:]) + decryptor.finalize()
    unpadder = padding.PKCS7(_BLOCK_BITS).unpadder()
    try:
        return unpadder.update(padded) + unpadder.finalize()
    except ValueError:
        raise TroveCryptoError('does not decrypt with this key (bad padding)')
