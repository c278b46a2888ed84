"""The control plane's side of the per-instance sealing keys.

Keys live in the ``instance_keys`` table, encrypted at rest with the key
in ``[conductor] instance_key_master_key_file`` when one is configured, so
that a copy of the database (a backup, a replica) alone does not let its
holder order upgrades. The master key file is kept apart from
``[database] connection`` on purpose: whoever has both could seal anyway.

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
from trove_upgrade import exception
from trove_upgrade.packaging import exceptions as package_exc
from trove_upgrade import sealing

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
            except package_exc.KeyFileError as e:
                raise exception.InstanceKeyError(reason=str(e))
        keys.append((row['key_id'], material))
    return sealing.InstanceKeys(instance_id, keys)


def _master_key_for(rows):
    return _master_key() if any(r['wrapped'] for r in rows) else None


def keyring(context, instance_id):
    """The unexpired keys of ``instance_id``; empty when it has none."""
    rows = db_keys.get_instance_keys(context, instance_id)
    return _keyring(instance_id, rows, _master_key_for(rows))


def keyrings(context, instance_ids):
    """:func:`keyring` of each of ``instance_ids``, read in one query.

    For the reconciler, which seals hundreds of upgrades at a time.
    """
    rows = db_keys.get_instance_keys_of(context, instance_ids)
    master = _master_key_for([r for found in rows.values() for r in found])
    return {instance_id: _keyring(instance_id, rows.get(instance_id, []),
                                  master)
            for instance_id in instance_ids}


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
