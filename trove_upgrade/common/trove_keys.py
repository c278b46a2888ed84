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

import hashlib

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf import hkdf

from trove_upgrade.common import exception
from trove_upgrade.common import sealing
from trove_upgrade.common import trove_crypto

INFO = b'trove-upgrade sealing v1 instance '
KEY_ID_PREFIX = 'trove-v1-'


class TroveKeyError(exception.TroveUpgradeError):
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
    """The :class:`sealing.InstanceKeys` derived from Trove's key."""
    material = derive_key(instance_id, trove_key)
    return sealing.InstanceKeys(instance_id, [(key_id(material), material)])


def decrypt_trove_key(encrypted_key, inst_rpc_key_encr_key):
    """Trove's plain instance key from its ``instances.encrypted_key``.

    What Trove's ``DBInstance.key`` does: ``trove.common.crypto_utils``
    with ``inst_rpc_key_encr_key`` (:mod:`trove_upgrade.common.trove_crypto`).

    :raises: TroveKeyError when it is not such a ciphertext of that key.
    """
    try:
        return trove_crypto.decrypt(encrypted_key, inst_rpc_key_encr_key)
    except trove_crypto.TroveCryptoError as e:
        raise TroveKeyError('the encrypted key %s (inst_rpc_key_encr_key)'
                            % e)
