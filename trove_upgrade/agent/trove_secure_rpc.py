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

"""Trove's secure RPC format: how Trove's control plane talks to its guest.

With ``[DEFAULT] enable_secure_rpc_messaging`` (Trove's default) every
instance has a key, ``instance_rpc_encr_key``, that Trove writes into the
guest's ``guest_info.conf``; the guest agent's RPC server then decrypts the
context of every call (and its arguments) with it, and encrypts its answer.
A plain call is refused (``KeyError: 'context'``). This module speaks that
format without importing Trove, which runs on eventlet. It follows, in
Trove 25.1.0 and 26.0.0 alike (the modules are the same in both):

- ``trove/common/rpc/secure_serializer.py``, ``SecureSerializer``: the
  context becomes ``{'context': encode(encrypt(json(context)))}``, each
  entity (an argument, the answer) ``encode(encrypt(json(entity)))``;
- ``trove/common/crypto_utils.py``, ``encrypt_data`` / ``encode_data``,
  with the instance key (:mod:`trove_upgrade.common.trove_crypto`);
- ``trove/rpc.py``, ``get_client``, and ``trove/guestagent/api.py``,
  ``API.get_client``: Trove's client of a guest agent wraps its
  ``TroveRequestContextSerializer`` (the context as
  ``TroveContext.to_dict()``) in ``SecureSerializer`` with the instance's
  key.

The format encrypts but does not authenticate (CBC without a MAC): it keeps
the traffic private, it does not prove who sent it; trove-upgrade's own
messages are sealed (``trove_upgrade.common.sealing``). Trove's serializer
passes through what does not decrypt; this one refuses it
(:class:`UnreadableMessageError`), so a guest agent running with another key is
named as such rather than answering gibberish.
"""

import json

from oslo_context import context as oslo_context
from oslo_messaging import serializer

from trove_upgrade.common import trove_crypto

CONTEXT_FIELD = 'context'
# TroveContext.to_dict() adds these to oslo.context's fields.
_TROVE_CONTEXT_FIELDS = ('limit', 'marker', 'service_catalog')


class UnreadableMessageError(trove_crypto.TroveCryptoError):
    """A message is not in Trove's secure format for this key."""


def dumps(value, key, iv=None):
    """``value`` as JSON, encrypted and encoded: one entity."""
    return trove_crypto.encrypt(json.dumps(value).encode('utf-8'), key, iv)


def loads(encoded, key):
    """The value of one entity; UnreadableMessageError when it is not one."""
    try:
        text = trove_crypto.decrypt(encoded, key).decode('utf-8')
    except trove_crypto.TroveCryptoError as e:
        raise UnreadableMessageError('it %s' % e)
    except UnicodeDecodeError:
        raise UnreadableMessageError(
            'it decrypts to no UTF-8 text with this key')
    try:
        return json.loads(text)
    except ValueError:
        raise UnreadableMessageError('it decrypts to no JSON with this key')


def trove_context():
    """A context as Trove's control plane sends: ``TroveContext.to_dict``.

    A new request id each time, so the guest agent's log names the call.
    ``overwrite=False``: this thread's stored context stays as it is.
    """
    values = oslo_context.RequestContext(overwrite=False).to_dict()
    values.update(dict.fromkeys(_TROVE_CONTEXT_FIELDS))
    return values


class SecureSerializer(serializer.Serializer):
    """Trove's ``SecureSerializer`` for one instance key, over a base.

    With no key (None: an empty key is a key to Trove), messages pass as
    they are, as in Trove, so one client serves guests with and without
    secure RPC.
    """

    def __init__(self, key, base=None):
        self.key = key
        self.base = base or serializer.NoOpSerializer()

    def serialize_entity(self, ctxt, entity):
        entity = self.base.serialize_entity(ctxt, entity)
        if self.key is None:
            return entity
        return dumps(entity, self.key)

    def deserialize_entity(self, ctxt, entity):
        if self.key is not None:
            entity = loads(entity, self.key)
        return self.base.deserialize_entity(ctxt, entity)

    def serialize_context(self, ctxt):
        ctxt = self.base.serialize_context(ctxt)
        if self.key is None:
            return ctxt
        return {CONTEXT_FIELD: dumps(ctxt, self.key)}

    def deserialize_context(self, ctxt):
        if self.key is not None:
            if not isinstance(ctxt, dict) or CONTEXT_FIELD not in ctxt:
                raise UnreadableMessageError('the context is not encrypted')
            ctxt = loads(ctxt[CONTEXT_FIELD], self.key)
        return self.base.deserialize_context(ctxt)
