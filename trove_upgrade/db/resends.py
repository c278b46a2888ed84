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

"""Database API of the casts of upgrades that their agents have not claimed.

An upgrade counts as sent (``send_count``) from the transaction that
decides to cast it, which also sets ``resend_at``: when the conductor casts
it again unless its agent has claimed it by then. A process killed
between that commit and its cast therefore leaves the upgrade to be sent
again, not lost. Due upgrades are taken in one transaction that locks
their rows and skips rows another transaction holds, so of several
conductors exactly one sends each again.
"""

import sqlalchemy as sa

from trove_upgrade.common import states
from trove_upgrade.db import common
from trove_upgrade.db import models
from trove_upgrade.db import upgrades as db_upgrades

_UPGRADE = models.Upgrade

# Nobody claimed them: the agent may not have them.
UNCLAIMED_STATES = states.CANCELLABLE_STATES


def _unclaimed():
    return (_UPGRADE.status.in_(UNCLAIMED_STATES),
            _UPGRADE.held.is_(False),
            _UPGRADE.resend_at.is_not(None))


_UPGRADES = _UPGRADE.__table__
# Built once: every reconciler pass runs the first, most find nothing.
_DUE = (
    sa.select(*db_upgrades.UPGRADE_COLUMNS)
    .where(*_unclaimed(), _UPGRADE.resend_at <= sa.bindparam('b_now'))
    .order_by(_UPGRADE.resend_at, _UPGRADE.id)
    .limit(sa.bindparam('b_limit'))
    .with_for_update(skip_locked=True))
_COUNT_SEND = (
    sa.update(_UPGRADES)
    .where(_UPGRADES.c.id == sa.bindparam('b_id'))
    .values(send_count=sa.bindparam('b_send_count'),
            resend_at=sa.bindparam('b_resend_at'),
            status_detail=sa.bindparam('b_status_detail'),
            updated_at=sa.bindparam('b_now')))


@common.retry_on_deadlock
def take_due_upgrades(context, now, next_resend_at, limit, source,
                      detail):
    """Take up to ``limit`` unclaimed upgrades due at ``now``; oldest first.

    Each taken one gets ``send_count`` one higher, ``resend_at`` of
    ``next_resend_at(send_count)`` with the new count, and an event in its
    history (same state before and after) whose detail, ``detail(upgrade)``,
    becomes its ``status_detail``. They are returned as they are after the
    change, and the caller casts them.
    """
    with common.context_manager.writer.connection.using(
            context) as connection:
        common.take_sqlite_write_lock(connection, _UPGRADES)
        rows = connection.execute(_DUE, {'b_now': now,
                                         'b_limit': limit}).all()
        taken = []
        for row in rows:
            upgrade = db_upgrades.upgrade_dict(row)
            upgrade['send_count'] += 1
            upgrade['resend_at'] = next_resend_at(upgrade['send_count'])
            upgrade['status_detail'] = common.bounded_detail(
                detail(upgrade))
            upgrade['updated_at'] = now
            taken.append(upgrade)
        if taken:
            # One UPDATE by primary key per row, in one round trip.
            connection.execute(_COUNT_SEND, [
                {'b_id': u['id'], 'b_send_count': u['send_count'],
                 'b_resend_at': u['resend_at'],
                 'b_status_detail': u['status_detail'], 'b_now': now}
                for u in taken])
            connection.execute(db_upgrades.INSERT_EVENT, [
                db_upgrades.event_row(context, u['id'], now, source,
                                      u['status'], u['status'],
                                      u['status_detail'])
                for u in taken])
        return taken


@common.retry_on_deadlock
def record_sends(context, sends, source, now):
    """Record each ``(upgrade, detail)`` of ``sends`` in its history.

    For what became of a send (a cast RabbitMQ returned, one that failed).

    The event keeps the upgrade's state (from and to the same) and the
    detail becomes its ``status_detail``; an upgrade whose state changed
    meanwhile (its agent claimed it) gets neither, since the detail is
    no longer news.
    """
    with common.context_manager.writer.using(context) as session:
        for upgrade, detail in sends:
            detail = common.bounded_detail(detail)
            result = session.execute(
                sa.update(_UPGRADE)
                .where(_UPGRADE.id == upgrade['id'],
                       _UPGRADE.status == upgrade['status'])
                .values(status_detail=detail, updated_at=now)
                .execution_options(synchronize_session=False))
            if result.rowcount == 1:
                session.execute(
                    sa.insert(models.UpgradeEvent.__table__).values(
                        db_upgrades.event_row(
                            context, upgrade['id'], now, source,
                            upgrade['status'], upgrade['status'], detail)))


def mark_received(context, upgrade_id, instance_id):
    """Cast it no more: the agent of ``instance_id`` reported having it."""
    with common.context_manager.writer.using(context) as session:
        session.execute(
            sa.update(_UPGRADE)
            .where(_UPGRADE.id == upgrade_id,
                   _UPGRADE.instance_id == instance_id,
                   _UPGRADE.resend_at.is_not(None))
            .values(resend_at=None)
            .execution_options(synchronize_session=False))
