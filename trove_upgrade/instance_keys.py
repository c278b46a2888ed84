"""The control plane's side of the per-instance sealing keys.

Keys live in the ``instance_keys`` table, encrypted at rest with the key
in ``[conductor] instance_key_master_key_file`` when one is configured, so
that a copy of the database (a backup, a replica) alone does not let its
holder order upgrades. The master key file is kept apart from
``[database] connection`` on purpose: whoever has both could seal anyway.

Without such keys, an instance's key is derived from the one Trove gave
it (``trove_keys``), read from Trove's database when ``[trove]
connection`` is set; keys set here take precedence.

:func:`keyring` gives ``sealing`` the keys of one instance, :func:`keyrings`
those of many and :class:`KeyringCache` those the conductor checks agent
messages against; the other functions serve ``trove-upgrade-manage
instance-key``.
"""

import base64
import binascii
import datetime
import threading
import time

import cachetools
from oslo_utils import timeutils

from trove_upgrade import conf
from trove_upgrade.db import instance_keys as db_keys
from trove_upgrade.db import trove as trove_db
from trove_upgrade import exception
from trove_upgrade import sealing
from trove_upgrade import trove_keys

CONF = conf.CONF


def _master_key():
    path = CONF.conductor.instance_key_master_key_file
    if not path:
        return None
    try:
        with open(path, 'rb') as f:
            key = base64.b64decode(f.read().strip(), validate=True)
    except (OSError, binascii.Error) as e:
        raise exception.InstanceKeyError(
            reason='cannot read the master key file %s: %s' % (path, e))
    if len(key) != sealing.KEY_SIZE:
        raise exception.InstanceKeyError(
            reason='the master key in %s must be %d bytes, base64'
            % (path, sealing.KEY_SIZE))
    return key


def _keyring(instance_id, rows, master):
    keys = []
    for row in rows:
        material = base64.b64decode(row['key_material'])
        if row['wrapped']:
            if master is None:
                raise exception.InstanceKeyError(
                    reason='the keys of instance %s are encrypted and no '
                    '[conductor] instance_key_master_key_file is set'
                    % instance_id)
            try:
                material = sealing.unwrap_key(master, instance_id,
                                              row['key_id'], material)
            except sealing.KeyFileError as e:
                raise exception.InstanceKeyError(reason=str(e))
        keys.append((row['key_id'], material))
    return sealing.Keyring(instance_id, keys)


def _master_key_for(rows):
    return _master_key() if any(r['wrapped'] for r in rows) else None


def _trove_keyrings(instance_ids):
    """Keyrings derived from the keys Trove gave ``instance_ids``.

    Only with ``[trove] connection``; an instance Trove gave no key (its
    ``enable_secure_rpc_messaging`` was off) or deleted is left out.
    """
    if not instance_ids or not trove_db.configured():
        return {}
    found = {}
    for instance_id, encrypted in trove_db.get_encrypted_keys(
            instance_ids).items():
        try:
            found[instance_id] = trove_keys.keyring(
                instance_id, trove_keys.decrypt_trove_key(
                    encrypted, CONF.trove.inst_rpc_key_encr_key))
        except trove_keys.TroveKeyError as e:
            raise exception.InstanceKeyError(
                reason='the key Trove holds for instance %s: %s; is '
                '[trove] inst_rpc_key_encr_key Trove\'s?' % (instance_id,
                                                             e))
    return found


def keyring(context, instance_id):
    """The keys of ``instance_id``; empty when it has none.

    Its unexpired keys set with ``trove-upgrade-manage instance-key``
    when it has any, else the key derived from Trove's key of the
    instance (``trove_keys``).
    """
    return keyrings(context, [instance_id])[instance_id]


def keyrings(context, instance_ids):
    """:func:`keyring` of each of ``instance_ids``, read in one query.

    For the reconciler, which seals hundreds of upgrades at a time.
    """
    rows = db_keys.get_instance_keys_of(context, instance_ids)
    master = _master_key_for([r for found in rows.values() for r in found])
    trove = _trove_keyrings([i for i in instance_ids if i not in rows])
    return {i: trove.get(i) or _keyring(i, rows.get(i, []), master)
            for i in instance_ids}


class KeyringCache:
    """The conductor's keyrings, each read at most once per ``ttl`` seconds.

    Every agent message is checked against its instance's keys; reading
    them for each one would cost the conductor a transaction per message.
    The price is that a key added, rotated out or expired takes effect on
    messages to the conductor up to ``[conductor] instance_key_cache_time``
    seconds later; 0 reads the keys for every message.
    """

    def __init__(self, ttl, maxsize=100000, timer=time.monotonic):
        self._lock = threading.Lock()
        self._cache = cachetools.TTLCache(maxsize, ttl, timer=timer) \
            if ttl else None

    def get(self, context, instance_id):
        if self._cache is None:
            return keyring(context, instance_id)
        with self._lock:
            found = self._cache.get(instance_id)
        if found is None:
            found = keyring(context, instance_id)
            with self._lock:
                self._cache[instance_id] = found
        return found


def add_key(context, instance_id, material=None, key_id=None, grace=0):
    """Store a key (a new one unless given) as the instance's newest.

    The instance's other keys expire ``grace`` seconds from now, or keep
    their expiry when ``grace`` is None.

    :returns: the stored key's row, without material.
    """
    material = material or sealing.generate_key()
    key_id = key_id or sealing.new_key_id()
    master = _master_key()
    stored = material if master is None else sealing.wrap_key(
        master, instance_id, key_id, material)
    expire = None if grace is None else (
        timeutils.utcnow() + datetime.timedelta(seconds=grace))
    return db_keys.add_instance_key(
        context, instance_id, key_id,
        base64.b64encode(stored).decode('ascii'), master is not None,
        expire_others_at=expire)


def list_keys(context, instance_id=None):
    return db_keys.list_instance_keys(context, instance_id)
