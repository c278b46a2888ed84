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
those of many (:func:`keyrings_of` from keys read already) and
:class:`KeyringCache` those the conductor checks agent messages against;
the other functions serve ``trove-upgrade-manage instance-key``.
"""

import base64
import binascii
import datetime
import threading
import time

import cachetools
from oslo_utils import timeutils
from oslo_utils import uuidutils

from trove_upgrade.common import exception
from trove_upgrade.common import exception as package_exc
from trove_upgrade.common import sealing
from trove_upgrade.common import secret_files
from trove_upgrade.common import trove_keys
from trove_upgrade import conf
from trove_upgrade.db import instance_keys as db_keys
from trove_upgrade.db import trove as trove_db

CONF = conf.CONF


def _master_key():
    path = CONF.conductor.instance_key_master_key_file
    if not path:
        return None
    try:
        key = base64.b64decode(secret_files.read_secret_file(path).strip(),
                               validate=True)
    except (package_exc.KeyFileError, binascii.Error) as e:
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
    return keyrings_of(instance_ids,
                       db_keys.get_instance_keys_of(context, instance_ids))


def keyrings_of(instance_ids, rows):
    """:func:`keyrings` from ``rows``, the keys the database holds.

    ``rows`` are ``db.instance_keys.get_instance_keys_of``'s, read by a
    caller that had a transaction of its own to read them in.
    """
    master = _master_key_for([r for found in rows.values() for r in found])
    trove = _trove_keyrings([i for i in instance_ids if i not in rows])
    return {i: trove.get(i) or _keyring(i, rows.get(i, []), master)
            for i in instance_ids}


# Seconds by which the clocks that stamp keys (any host running
# trove-upgrade-manage) may run ahead of a conductor's: its look for key
# changes reaches this far back.
CLOCK_SKEW = 60


def _lasting(found):
    """Whether a keyring may be kept until its instance's keys change.

    Keys set with ``trove-upgrade-manage instance-key`` are watched for
    changes; an instance without keys, or one whose key is derived from
    Trove's, is read again every ``instance_key_cache_time`` instead.
    """
    return bool(found) and not any(
        key_id.startswith(trove_keys.KEY_ID_PREFIX)
        for key_id, _material in found.keys)


class KeyringCache:
    """The conductor's keyrings, read again only when they change.

    Every agent message is checked against its instance's keys; reading
    them for each one would cost the conductor a transaction per message.
    Once every ``ttl`` seconds (``[conductor] instance_key_cache_time``)
    one query asks which instances were given a key, or had one given an
    expiry, since the last look, and their keyrings are dropped; the
    others are kept (the ``maxsize`` most recently used). Keyrings that
    cannot be watched so (none, or derived from Trove's key) are kept
    ``ttl`` seconds. Either way a key added, rotated out or expired takes
    effect on messages to the conductor up to ``ttl`` seconds later; 0
    reads the keys for every message.

    Instances found without keys are kept apart (the ``keyless_maxsize``
    most recently used): messages naming random instances, which anyone
    on the bus can send, must not push the keys of real ones out.
    """

    def __init__(self, ttl, maxsize=100000, keyless_maxsize=10000,
                 timer=time.monotonic):
        self._ttl = ttl
        self._timer = timer
        self._lock = threading.Lock()
        # instance id -> (keyring, lasting, read at)
        self._cache = cachetools.LRUCache(maxsize) if ttl else None
        self._keyless = cachetools.LRUCache(keyless_maxsize) if ttl else None
        self._looked = None  # (timer, UTC time) of the last look

    def get(self, context, instance_id):
        if self._cache is None:
            return keyring(context, instance_id)
        self._drop_changed(context)
        now = self._timer()
        with self._lock:
            entry = (self._cache.get(instance_id)
                     or self._keyless.get(instance_id))
        if entry is not None and (entry[1] or now - entry[2] < self._ttl):
            return entry[0]
        found = keyring(context, instance_id)
        with self._lock:
            if found:
                self._keyless.pop(instance_id, None)
                self._cache[instance_id] = (found, _lasting(found), now)
            else:
                self._cache.pop(instance_id, None)
                self._keyless[instance_id] = (found, False, now)
        return found

    def _drop_changed(self, context):
        """Drop the keyrings whose keys changed, once every ``ttl``."""
        now = self._timer()
        with self._lock:
            previous = self._looked
            if previous is not None and now - previous[0] < self._ttl:
                return
            self._looked = (now, timeutils.utcnow())
        if previous is None:
            return  # nothing was read before this first look
        since = previous[1] - datetime.timedelta(seconds=CLOCK_SKEW)
        try:
            changed = db_keys.instances_with_key_changes(context, since)
        except Exception:
            with self._lock:
                self._cache.clear()
                self._keyless.clear()
                self._looked = previous
            raise
        with self._lock:
            for instance_id in changed:
                self._cache.pop(instance_id, None)
                self._keyless.pop(instance_id, None)


def add_key(context, instance_id, material=None, key_id=None, grace=0):
    """Store a key (a new one unless given) as the instance's newest.

    The instance's other keys expire ``grace`` seconds from now, or keep
    their expiry when ``grace`` is None.

    :returns: the stored key's row, without material.
    :raises: InstanceKeyError for an instance id that is not a UUID: no
        agent could use the key, which was stored all the same.
    """
    if not uuidutils.is_uuid_like(instance_id):
        raise exception.InstanceKeyError(
            reason='instance ids are UUIDs, not %s'
            % package_exc.quoted(instance_id))
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
