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

"""Upgrades held DEFERRED by Trove, sent once nothing holds them.

The API and the reconcilers record an upgrade held when Trove reports its
instance busy or its agent is not registered yet
(``trove_upgrade.services.trove_instances``); the conductor's periodic
pass here sends each once Trove reports the instance idle.
"""

from oslo_log import log as logging
from oslo_utils import timeutils

from trove_upgrade.db import held as db_held
from trove_upgrade.db import resends as db_resends
from trove_upgrade.services import resends
from trove_upgrade.services import trove_instances
from trove_upgrade.services import upgrades

LOG = logging.getLogger(__name__)


def send_one(context, agent_api, upgrade):
    """Cast ``upgrade`` to its agent, with every argument it holds."""
    agent_api.upgrade(context, upgrade['instance_id'], upgrade['id'],
                      upgrade['instance_version'], upgrade['strategy'],
                      upgrade['location'], upgrade['metadata'],
                      upgrade['allow_downgrade'],
                      upgrade['expected_manifest'])


def send_held_upgrades(context, agent_api):
    """Send the held upgrades nothing holds any more; return their ids.

    The conductor's periodic pass. Each is released by a compare-and-swap
    before its cast, so that of two conductors only one sends it; the
    release counts as its first send, so a conductor killed between the
    two leaves it to be sent again ``[conductor] resend_interval`` seconds
    later (``trove_upgrade.services.resends``), as does a cast RabbitMQ
    returned or could not take.
    ``[conductor] upgrade_timeout`` counts from creation, held time
    included.
    """
    held = db_held.list_held_upgrades(context)
    if not held:
        return []
    reasons = trove_instances.hold_reasons(
        context, {u['instance_id'] for u in held})
    sent = []
    for upgrade in held:
        if upgrade['instance_id'] in reasons:
            LOG.debug('Upgrade %(id)s still held: %(reason)s.',
                      {'id': upgrade['id'],
                       'reason': reasons[upgrade['instance_id']]})
            continue
        released = db_held.release_upgrade(
            context, upgrade['id'], 'conductor',
            'Sent to the agent: Trove reports the instance idle and its '
            'agent registered.', resends.resend_at(1))
        if released is None:
            continue
        try:
            send_one(context, agent_api, released)
        except Exception as e:
            if resends.sent_again_later(e):
                detail = resends.not_sent_detail(e)
                upgrades.warn_not_sent(released, detail)
                db_resends.record_sends(
                    context, [(released, detail)], 'conductor',
                    timeutils.utcnow())
                continue
            upgrades.record_unsent(context, released, e, 'conductor')
            continue
        LOG.info('Held upgrade %(id)s sent to the agent of instance '
                 '%(instance)s.', {'id': upgrade['id'],
                                   'instance': upgrade['instance_id']})
        sent.append(upgrade['id'])
    return sent
