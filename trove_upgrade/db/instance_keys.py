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

"""Database API of the per-instance keys that seal RPC messages.

It uses the same enginefacade context manager as the other resources
and returns plain dicts.
"""

from oslo_utils import timeutils
import sqlalchemy as sa

from trove_upgrade.db import common
from trove_upgrade.db import models


def _key_dict(row, with_material=True):
    key = {'key_id': row.key_id, 'instance_id': row.instance_id,
           'wrapped': row.wrapped, 'created_at': row.created_at,
           'expires_at': row.expires_at}
    if with_material:
        key['key_material'] = row.key_material
    return key


def _unexpired(now):
    return sa.or_(models.InstanceKey.expires_at.is_(None),
                  models.InstanceKey.expires_at > now)


def add_instance_key(context, instance_id, key_id, key_material, wrapped,
                     expire_others_at=None):
    """Store a new key of ``instance_id``; it becomes the sealing key.

    With ``expire_others_at``, the instance's other keys that would
    outlive that time expire then (a rotation's grace period).
    """
    common.check_strings(models.InstanceKey, {
        'instance_id': instance_id, 'key_id': key_id,
        'key_material': key_material}, ['instance_id', 'key_id',
                                        'key_material'])
    now = timeutils.utcnow()
    with common.context_manager.writer.using(context) as session:
        if expire_others_at is not None:
            session.execute(
                sa.update(models.InstanceKey)
                .where(models.InstanceKey.instance_id == instance_id,
                       _unexpired(expire_others_at))
                .values(expires_at=expire_others_at)
                .execution_options(synchronize_session=False))
        row = models.InstanceKey(
            key_id=key_id, instance_id=instance_id,
            key_material=key_material, wrapped=wrapped, created_at=now,
            expires_at=None)
        session.add(row)
        session.flush()
        return _key_dict(row, with_material=False)


# Built once: every cast reads its instance's keys, and building the
# statement cost more CPU than running it.
_KEYS = models.InstanceKey.__table__
_READ_KEYS_OF = (
    sa.select(_KEYS)
    .where(_KEYS.c.instance_id.in_(sa.bindparam('b_ids', expanding=True)),
           sa.or_(_KEYS.c.expires_at.is_(None),
                  _KEYS.c.expires_at > sa.bindparam('b_now')))
    .order_by(_KEYS.c.created_at.desc(), _KEYS.c.key_id))


def get_instance_keys_of(context, instance_ids):
    """The unexpired keys of each of ``instance_ids``, in one query.

    Returns ``{instance_id: [keys, newest first]}``; instances without
    keys are left out.
    """
    with common.context_manager.reader.connection.using(
            context) as connection:
        return read_keys_of(connection, instance_ids)


def read_keys_of(connection, instance_ids):
    """:func:`get_instance_keys_of` in the caller's transaction."""
    found = {}
    rows = connection.execute(_READ_KEYS_OF, {
        'b_ids': sorted(instance_ids), 'b_now': timeutils.utcnow()})
    for row in rows:
        found.setdefault(row.instance_id, []).append(_key_dict(row))
    return found


def instances_with_key_changes(context, since):
    """Instances given a key, or whose key was given an expiry, since then.

    An expiry is set when a key is rotated out; those still ahead are
    included every time, so that an instance whose key is about to
    expire is read again until it has. For the conductors' caches of
    keys, which each ask every few seconds.
    """
    key = models.InstanceKey
    with common.context_manager.reader.using(context) as session:
        return set(session.scalars(
            sa.select(key.instance_id).distinct()
            .where(sa.or_(key.created_at >= since,
                          key.expires_at >= since))))


def list_instance_keys(context, instance_id=None):
    """Every key (expired ones too) without material, oldest first."""
    query = sa.select(models.InstanceKey).order_by(
        models.InstanceKey.instance_id, models.InstanceKey.created_at,
        models.InstanceKey.key_id)
    if instance_id is not None:
        query = query.where(models.InstanceKey.instance_id == instance_id)
    with common.context_manager.reader.using(context) as session:
        return [_key_dict(row, with_material=False)
                for row in session.scalars(query)]
