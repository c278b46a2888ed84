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

"""Database API of the upgrades the control plane holds DEFERRED.

An upgrade is held (``held`` true, status DEFERRED) when it may not be
sent yet (``trove_instances``); releasing it clears ``held`` in a
compare-and-swap, so that of two conductors' periodic passes only one
sends it. Kept apart from ``db.upgrades``: nothing else touches the column.
"""

from oslo_utils import timeutils
import sqlalchemy as sa

from trove_upgrade.common import states
from trove_upgrade.db import common
from trove_upgrade.db import models
from trove_upgrade.db import upgrades as db_upgrades

_UPGRADE = models.Upgrade


def _move(context, upgrade_id, source, from_state, held, values, detail):
    """CAS the upgrade from (from_state, held) to ``values``; dict or None."""
    detail = common.bounded_detail(detail)
    now = timeutils.utcnow()
    with common.context_manager.writer.using(context) as session:
        result = session.execute(
            sa.update(_UPGRADE)
            .where(_UPGRADE.id == upgrade_id, _UPGRADE.status == from_state,
                   _UPGRADE.held == held)
            .values(status_detail=detail, updated_at=now, **values)
            .execution_options(synchronize_session=False))
        if result.rowcount != 1:
            return None
        session.execute(sa.insert(models.UpgradeEvent.__table__).values(
            db_upgrades.event_row(context, upgrade_id, now, source,
                                  from_state,
                                  values.get('status', from_state), detail)))
    return db_upgrades.get_upgrade(context, upgrade_id)


def hold_upgrade(context, upgrade_id, source, detail):
    """PENDING to held DEFERRED; the upgrade, or None if not PENDING."""
    return _move(context, upgrade_id, source, states.PENDING, False,
                 {'status': states.DEFERRED, 'held': True}, detail)


def release_upgrade(context, upgrade_id, source, detail, resend_at):
    """Held DEFERRED to sent DEFERRED: the caller must send it now.

    It counts as sent from here, and is cast again at ``resend_at`` unless
    its agent has it by then: a caller killed before its cast leaves it
    to be sent again (``trove_upgrade.services.resends``). Returns the
    upgrade, or None when another conductor released it or it was
    cancelled or timed out meanwhile.
    """
    return _move(context, upgrade_id, source, states.DEFERRED, True,
                 {'held': False, 'resend_at': resend_at, 'send_count': 1},
                 detail)


# Plain rows, in a statement built once: every reconciler pass reads them.
_HELD = (
    sa.select(*db_upgrades.UPGRADE_COLUMNS)
    .where(_UPGRADE.status == states.DEFERRED, _UPGRADE.held.is_(True))
    .order_by(_UPGRADE.created_at, _UPGRADE.id))


def list_held_upgrades(context):
    """The held upgrades, oldest first."""
    with common.context_manager.reader.connection.using(
            context) as connection:
        return [db_upgrades.upgrade_dict(row)
                for row in connection.execute(_HELD)]
