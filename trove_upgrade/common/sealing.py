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

"""Sealed RPC messages: who may order an upgrade or report one.

Anyone who can publish on the message bus could otherwise order an upgrade
(or a downgrade) or report a fake SUCCESS. Like upstream Trove's guest RPC,
every upgrade message (control plane to agent) and every registration,
heartbeat, claim and report (agent to conductor) is sealed with a key of the
instance it concerns, which only that instance's agent and the control
plane's database hold.

A seal is AES-256-GCM over the canonical JSON of the message's arguments.
Its associated data binds the method name, the instance id, the RPC version,
the direction, the key id, the timestamp and the message id, so none of
them can be changed or the seal moved to another message. The receiver
refuses, each with its own exception: no seal where one is required, a key
id it does not hold, a bad tag, a seal for another instance, a timestamp
older than the maximum age (or as far in the future), and a message id seen
before within that age (a replay).

The answer to a sealed call of a version that seals replies (the
conductor API's 1.3, ``rpc_interface.CONDUCTOR_SEALED_REPLIES``) is sealed
too, with the key that sealed the
call: its associated data holds the call's message id, so a reply made
by anyone without the key, or the genuine reply to another call, does
not open (:func:`seal_reply`, :func:`open_reply`). The reply's content
travels only inside the seal.

This module is pure: keys come in as :class:`InstanceKeys` objects and seen
message ids go through a :class:`ReplayCache`, so both sides and the tests
share it.
"""

import abc
import base64
import binascii
import contextlib
import heapq
import json
import math
import os
import threading
import time
import uuid

from cryptography.hazmat.primitives.ciphers import aead

from trove_upgrade.common import canonical
from trove_upgrade.common import exception
from trove_upgrade.common import exception as package_exc
from trove_upgrade.common import secret_files

FORMAT = 1
KEY_SIZE = 32
NONCE_SIZE = 12

TO_AGENT = 'to_agent'
TO_CONDUCTOR = 'to_conductor'
DIRECTIONS = (TO_AGENT, TO_CONDUCTOR)
# The associated data's direction of a reply to a call.
REPLY = 'reply'
# The only key of a sealed reply.
SEALED_REPLY = 'sealed_reply'

_ENVELOPE_FIELDS = ('format', 'instance_id', 'key_id', 'nonce', 'timestamp',
                    'message_id', 'version', 'ciphertext')


class SealError(exception.TroveUpgradeError):
    """A message cannot be trusted; the receiver must not act on it."""


class UnsealedError(SealError):
    """The message carries no seal where one is required."""


class MalformedSealError(SealError):
    """The seal is not a seal of this format."""


class UnknownKeyError(SealError):
    """The seal names a key the receiver does not hold."""


class BadSealError(SealError):
    """The tag does not verify: forged, or modified on the way."""


class InstanceMismatchError(SealError):
    """The seal was made for another instance than the message's."""


class StaleMessageError(SealError):
    """The seal is older (or newer) than the maximum age allows."""


class ReplayedMessageError(SealError):
    """A message with this id was already accepted."""


class ReplyMismatchError(SealError):
    """The sealed reply answers another call than the one made."""


def generate_key():
    """32 random bytes: a new AES-256 instance key."""
    return os.urandom(KEY_SIZE)


def new_key_id():
    return uuid.uuid4().hex


def sealable_text(value):
    """Whether the string ``value`` has a UTF-8 form, as a seal needs.

    JSON and Python let a lone surrogate (``"\\ud800"``) through; a
    message holding one cannot be sealed, nor written to the journal.
    """
    try:
        value.encode('utf-8')
    except UnicodeEncodeError:
        return False
    return True


def canonical_json(value):
    """The one JSON text of ``value`` both sides compute identically."""
    return canonical.dumps(value, floats=True)


def _b64(data):
    return base64.b64encode(data).decode('ascii')


def _unb64(text, what):
    try:
        return base64.b64decode(text.encode('ascii'), validate=True)
    except (AttributeError, UnicodeEncodeError, binascii.Error):
        raise MalformedSealError('the %s is not base64' % what)


class InstanceKeys:
    """The keys of one instance, newest first.

    The newest key seals; every key of the ring opens, so messages sealed
    just before a rotation still open while both keys are held.
    """

    def __init__(self, instance_id, keys):
        self.instance_id = instance_id
        self.keys = list(keys)
        for key_id, material in self.keys:
            if len(material) != KEY_SIZE:
                raise ValueError('key %s is %d bytes, not %d'
                                 % (key_id, len(material), KEY_SIZE))

    def __bool__(self):
        return bool(self.keys)

    def sealing_key(self):
        return self.keys[0]

    def get(self, key_id):
        for candidate, material in self.keys:
            if candidate == key_id:
                return material
        return None


def _aad(method, direction, envelope):
    return canonical_json({
        'method': method, 'direction': direction,
        'instance_id': envelope['instance_id'],
        'version': envelope['version'], 'key_id': envelope['key_id'],
        'timestamp': envelope['timestamp'],
        'message_id': envelope['message_id'], 'format': envelope['format']})


def seal(keyring, method, version, direction, args, now=None):
    """The seal of a ``method`` message with ``args``, a JSON dict."""
    key_id, material = keyring.sealing_key()
    nonce = os.urandom(NONCE_SIZE)
    envelope = {'format': FORMAT, 'instance_id': keyring.instance_id,
                'key_id': key_id, 'nonce': _b64(nonce),
                'timestamp': time.time() if now is None else now,
                'message_id': uuid.uuid4().hex, 'version': version}
    ciphertext = aead.AESGCM(material).encrypt(
        nonce, canonical_json(args), _aad(method, direction, envelope))
    envelope['ciphertext'] = _b64(ciphertext)
    return envelope


def _check_envelope(envelope):
    if not isinstance(envelope, dict) or set(envelope) != set(
            _ENVELOPE_FIELDS):
        raise MalformedSealError('the seal must have exactly the fields %s'
                                 % ', '.join(sorted(_ENVELOPE_FIELDS)))
    if envelope['format'] != FORMAT:
        raise MalformedSealError('unknown seal format %s'
                                 % package_exc.quoted(envelope['format']))
    for name in ('instance_id', 'key_id', 'message_id', 'version'):
        if not isinstance(envelope[name], str) or not envelope[name]:
            raise MalformedSealError('the seal %s must be a string' % name)
    timestamp = envelope['timestamp']
    if isinstance(timestamp, bool) or not isinstance(timestamp,
                                                     (int, float)):
        raise MalformedSealError('the seal timestamp must be a number')
    # NaN is never older than the maximum age, and an integer past the
    # floats' range cannot be compared with the time: no sealer makes one.
    try:
        finite = math.isfinite(timestamp)
    except OverflowError:
        finite = False
    if not finite:
        raise MalformedSealError('the seal timestamp must be a finite time')


def check_without_key(envelope, method, instance_id, max_age, now=None):
    """The checks of :func:`open_sealed` that need no key.

    A receiver runs them before it looks the instance's keys up, so that
    a forged message (unsealed, malformed, for another instance, stale)
    costs it no read of its database.

    :raises: UnsealedError, MalformedSealError, InstanceMismatchError or
    StaleMessageError.
    """
    if envelope is None:
        raise UnsealedError('the %s message is not sealed' % method)
    _check_envelope(envelope)
    if envelope['instance_id'] != instance_id:
        raise InstanceMismatchError(
            'the seal is for instance %s, the message for %s'
            % (package_exc.bounded(envelope['instance_id'], 64),
               instance_id))
    now = time.time() if now is None else now
    if abs(now - envelope['timestamp']) > max_age:
        raise StaleMessageError('the seal is %.0f s old; at most %s s accepted'
                                % (now - envelope['timestamp'], max_age))


def open_sealed(keyring, envelope, method, direction, args, max_age,
                replay_cache, now=None):
    """Check the seal of a received message; return normally if it holds.

    ``keyring`` holds the keys of the instance the message claims to
    concern; ``args`` are the arguments as received, which must be exactly
    the ones sealed. The message id is remembered in ``replay_cache`` only
    once everything else verified, so forged messages cannot fill it.

    :raises: a :class:`SealError` subclass saying why not.
    """
    if direction not in DIRECTIONS:
        raise ValueError('unknown direction %r' % (direction,))
    now = time.time() if now is None else now
    check_without_key(envelope, method, keyring.instance_id, max_age, now)
    material = keyring.get(envelope['key_id'])
    if material is None:
        raise UnknownKeyError('no key %s for instance %s'
                              % (package_exc.bounded(envelope['key_id'], 64),
                                 keyring.instance_id))
    try:
        expected = canonical_json(args)
    except (TypeError, ValueError, RecursionError) as e:
        # NaN, Infinity, a lone surrogate, nesting deeper than the encoder
        # goes: what seal() cannot encode was not sealed.
        raise BadSealError('the %s message arguments cannot have been sealed: '
                           '%s' % (method, package_exc.bounded(e, 200)))
    nonce = _unb64(envelope['nonce'], 'nonce')
    ciphertext = _unb64(envelope['ciphertext'], 'ciphertext')
    if len(nonce) != NONCE_SIZE:
        raise MalformedSealError('the nonce must be %d bytes' % NONCE_SIZE)
    try:
        plaintext = aead.AESGCM(material).decrypt(
            nonce, ciphertext, _aad(method, direction, envelope))
    except Exception:
        raise BadSealError(
            'the %s message does not verify with key %s: forged '
            'or modified' % (method, envelope['key_id']))
    if plaintext != expected:
        raise BadSealError('the %s message arguments differ from the sealed '
                           'ones' % method)
    replay_cache.add(envelope['message_id'],
                     envelope['timestamp'] + max_age, now)


def seal_reply(keyring, method, request, result, now=None):
    """The sealed reply to a call sealed as ``request``, answering ``result``.

    Sealed with the key the call named (the caller holds it) and bound to
    the call by its message id, which the associated data covers. The
    result, JSON, travels inside the seal only.
    """
    material = keyring.get(request['key_id'])
    if material is None:
        raise UnknownKeyError('no key %s for instance %s'
                              % (package_exc.bounded(request['key_id'], 64),
                                 keyring.instance_id))
    nonce = os.urandom(NONCE_SIZE)
    envelope = {'format': FORMAT, 'instance_id': keyring.instance_id,
                'key_id': request['key_id'], 'nonce': _b64(nonce),
                'timestamp': time.time() if now is None else now,
                'message_id': request['message_id'],
                'version': request['version']}
    ciphertext = aead.AESGCM(material).encrypt(
        nonce, canonical_json(result), _aad(method, REPLY, envelope))
    envelope['ciphertext'] = _b64(ciphertext)
    return {SEALED_REPLY: envelope}


def open_reply(keyring, method, request, reply):
    """The result in ``reply``, the answer to the call sealed as ``request``.

    :raises: UnsealedError when the reply is not a sealed reply (an answer
        from someone without the key looks like this), ReplyMismatchError
        when it answers another call, or another :class:`SealError`
        when it does not verify.
    """
    if not isinstance(reply, dict) or set(reply) != {SEALED_REPLY}:
        raise UnsealedError('the answer to %s is not sealed' % method)
    envelope = reply[SEALED_REPLY]
    _check_envelope(envelope)
    if (envelope['instance_id'] != request['instance_id']
            or envelope['message_id'] != request['message_id']
            or envelope['key_id'] != request['key_id']
            or envelope['version'] != request['version']):
        raise ReplyMismatchError('the sealed answer is not for the %s call %s'
                                 % (method, request['message_id']))
    material = keyring.get(envelope['key_id'])
    if material is None:
        raise UnknownKeyError('no key %s for instance %s'
                              % (package_exc.bounded(envelope['key_id'], 64),
                                 keyring.instance_id))
    nonce = _unb64(envelope['nonce'], 'nonce')
    if len(nonce) != NONCE_SIZE:
        raise MalformedSealError('the nonce must be %d bytes' % NONCE_SIZE)
    try:
        plaintext = aead.AESGCM(material).decrypt(
            nonce, _unb64(envelope['ciphertext'], 'ciphertext'),
            _aad(method, REPLY, envelope))
    except Exception:
        raise BadSealError('the answer to %s does not verify with key %s: '
                           'forged or modified' % (method, envelope['key_id']))
    return json.loads(plaintext)


class ReplayCache(abc.ABC):
    """Message ids accepted and not yet too old to be accepted again."""

    @abc.abstractmethod
    def add(self, message_id, expires_at, now):
        """Remember ``message_id`` until ``expires_at``.

        :raises: ReplayedMessageError when it is remembered already.
        """


class MemoryReplayCache(ReplayCache):
    """A replay cache in this process's memory, bounded by the max age.

    The ids also wait in a heap by expiry, so that forgetting the
    expired ones costs each id once, not a scan of every id per message:
    a conductor holds hundreds of thousands of them at scale.
    """

    def __init__(self):
        self._seen = {}
        self._expiries = []  # heap of (expires_at, message_id)
        self._lock = threading.Lock()

    def add(self, message_id, expires_at, now):
        with self._lock:
            while self._expiries and self._expiries[0][0] < now:
                _expiry, expired = heapq.heappop(self._expiries)
                self._seen.pop(expired, None)
            if message_id in self._seen:
                raise ReplayedMessageError('message %s was already accepted'
                                           % message_id)
            self._seen[message_id] = expires_at
            heapq.heappush(self._expiries, (expires_at, message_id))


def prune(seen, now):
    """Forget the ids of ``seen`` ({id: expiry}) that expired by ``now``."""
    for message_id in [m for m, expiry in seen.items() if expiry < now]:
        del seen[message_id]


def wrap_key(master_key, instance_id, key_id, material):
    """``material`` encrypted with ``master_key`` for storage at rest."""
    nonce = os.urandom(NONCE_SIZE)
    aad = canonical_json({'instance_id': instance_id, 'key_id': key_id})
    return nonce + aead.AESGCM(master_key).encrypt(nonce, material, aad)


def unwrap_key(master_key, instance_id, key_id, wrapped):
    aad = canonical_json({'instance_id': instance_id, 'key_id': key_id})
    try:
        return aead.AESGCM(master_key).decrypt(
            wrapped[:NONCE_SIZE], wrapped[NONCE_SIZE:], aad)
    except Exception:
        raise package_exc.KeyFileError(
            'key %s of instance %s does not open with the master key'
            % (key_id, instance_id))


def dump_key_file(path, keyring):
    """Write ``keyring`` to ``path``, readable by its owner only."""
    with key_file_writer(path) as write:
        write(keyring)


@contextlib.contextmanager
def key_file_writer(path):
    """Yield ``write(keyring)``, which replaces ``path`` with the keyring.

    ``secret_files.secret_file_writer`` makes the file: a crash leaves the
    old keys or the new ones, and ``path`` fails (a missing directory, a
    directory) before the block stores a key that no file would hold.
    """
    with secret_files.secret_file_writer(path) as write_bytes:
        def write(keyring):
            data = {'instance_id': keyring.instance_id,
                    'keys': [{'key_id': k, 'key': _b64(m)}
                             for k, m in keyring.keys]}
            write_bytes((json.dumps(data, indent=1) + '\n').encode('utf-8'))

        yield write


def load_key_file(path, instance_id=None):
    """The keyring in ``path``; it must be for ``instance_id`` if given.

    :raises: exception.KeyFileError when the file is missing,
        malformed or for another instance; its subclass
        InsecureKeyFileError when another user could have planted or read
        it (``secret_files``).
    """
    try:
        data = json.loads(secret_files.read_secret_file(path))
        keys = [(k['key_id'], _unb64(k['key'], 'key'))
                for k in data['keys']]
        keyring = InstanceKeys(data['instance_id'], keys)
    except package_exc.KeyFileError:
        raise
    except (OSError, ValueError, KeyError, TypeError, RecursionError,
            MalformedSealError) as e:
        raise package_exc.KeyFileError('cannot read instance key file %s: %s'
                                       % (path, e))
    if not keyring:
        raise package_exc.KeyFileError(
            'instance key file %s holds no key' % path)
    if instance_id is not None and keyring.instance_id != instance_id:
        raise package_exc.KeyFileError(
            'instance key file %s is for instance %s, not %s'
            % (path, keyring.instance_id, instance_id))
    return keyring
