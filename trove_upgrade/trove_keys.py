"""Sealing keys derived from the RPC key Trove gives every instance.

Trove generates a random key for each instance when it creates it, writes
it into the guest's configuration (``[DEFAULT] instance_rpc_encr_key``) and
keeps a copy in its database (``instances.encrypted_key``), encrypted with
its ``inst_rpc_key_encr_key``. Both ends of trove-upgrade already reach
one of the two copies, so no key needs distributing: the sealing key is
HKDF-SHA256 of Trove's key, with an info string naming this use and the
instance, so that it is never Trove's own key and differs per instance
even if Trove's keys were ever reused.

This module is pure and imports nothing of the control plane: the agent
uses :func:`keyring`, the control plane :func:`decrypt_trove_key` first.
"""

import base64
import binascii
import hashlib

from cryptography.hazmat.primitives.ciphers import algorithms
from cryptography.hazmat.primitives.ciphers import Cipher
from cryptography.hazmat.primitives.ciphers import modes
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf import hkdf

from trove_upgrade import sealing

INFO = b'trove-upgrade sealing v1 instance '
KEY_ID_PREFIX = 'trove-v1-'
_IV_SIZE = 16


class TroveKeyError(Exception):
    """Trove's key of an instance cannot be read or decrypted."""


def derive_key(instance_id, trove_key):
    """The 32-byte sealing key of ``instance_id`` from Trove's key."""
    if isinstance(trove_key, str):
        trove_key = trove_key.encode('utf-8')
    if not trove_key:
        raise TroveKeyError('the Trove key of instance %s is empty'
                            % instance_id)
    return hkdf.HKDF(algorithm=hashes.SHA256(), length=sealing.KEY_SIZE,
                     salt=None, info=INFO + instance_id.encode('utf-8')
                     ).derive(trove_key)


def key_id(material):
    """A key id naming the derived key without revealing it.

    It changes when Trove's key changes, so a conductor and an agent that
    disagree about the key say so in the refusal (unknown key id) instead
    of failing on a bad tag.
    """
    digest = hashlib.sha256(b'trove-upgrade key id v1 ' + material)
    return KEY_ID_PREFIX + digest.hexdigest()[:16]


def keyring(instance_id, trove_key):
    """The :class:`sealing.Keyring` derived from Trove's key."""
    material = derive_key(instance_id, trove_key)
    return sealing.Keyring(instance_id, [(key_id(material), material)])


def decrypt_trove_key(encrypted_key, inst_rpc_key_encr_key):
    """Trove's plain instance key from its ``instances.encrypted_key``.

    What Trove's ``DBInstance.key`` does (``trove.common.crypto_utils``):
    base64, then AES-CBC whose key is the hex MD5 digest of
    ``inst_rpc_key_encr_key`` (32 ASCII bytes: AES-256), the IV the first
    16 bytes, and a padding of N bytes of value N.

    :raises: TroveKeyError when it is not such a ciphertext of that key.
    """
    try:
        data = base64.b64decode(encrypted_key, validate=True)
    except (binascii.Error, ValueError, TypeError) as e:
        raise TroveKeyError('the encrypted key is not base64: %s' % e)
    if len(data) < 2 * _IV_SIZE or len(data) % _IV_SIZE:
        raise TroveKeyError('the encrypted key is %d bytes, not an IV and '
                            'whole AES blocks' % len(data))
    aes_key = hashlib.md5(inst_rpc_key_encr_key.encode('utf-8'),
                          usedforsecurity=False).hexdigest().encode('ascii')
    decryptor = Cipher(algorithms.AES(aes_key),
                       modes.CBC(data[:_IV_SIZE])).decryptor()
    plain = decryptor.update(data[_IV_SIZE:]) + decryptor.finalize()
    pad = plain[-1]
    if not 1 <= pad <= _IV_SIZE or plain[-pad:] != bytes([pad]) * pad:
        raise TroveKeyError('the encrypted key does not decrypt with '
                            'inst_rpc_key_encr_key (bad padding)')
    return plain[:-pad]
