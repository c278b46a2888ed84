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

"""Casting again the upgrades that their agents have not claimed.

A cast to an agent can be lost on the way: the agents' queues are not
durable by default, so after a RabbitMQ restart an agent's queue is gone
until the agent reconnects and declares it again, and RabbitMQ drops
whatever is sent to it meanwhile. Casts are published mandatory, so a cast
no queue takes comes back at once (``MessageUndeliverable``) and is
recorded as such, but one that a queue took can still be lost with it.
So every sent upgrade carries ``resend_at``, and the conductor's
reconciler casts it again when that time comes while nobody has claimed
it: after ``[conductor] resend_interval`` seconds, then twice as long each
time up to ``[conductor] resend_max_interval``, until its agent claims it
(the agent ignores the copies of an upgrade it has), reports it
``DEFERRED`` (it has it, and starts it when the guest allows) or
``[conductor] upgrade_timeout`` ends it. Each send is recorded in the
upgrade's history.
"""

import datetime

from oslo_log import log as logging
import oslo_messaging as messaging
from oslo_utils import timeutils

from trove_upgrade import conf
from trove_upgrade.db import resends as db_resends

CONF = conf.CONF
LOG = logging.getLogger(__name__)

# Upgrades sent again per reconciler pass at most; the rest wait for the
# next pass, [conductor] rollout_interval later.
BATCH = 1000

RETURNED = ('RabbitMQ returned it: no queue of the instance\'s agent took '
            'it (the agent has not started yet, is down, or has not '
            'reconnected since a broker restart). It is sent again until '
            'the agent claims it.')


# What a cast raises while the messaging server cannot be reached (through
# [DEFAULT] rpc_send_retries): the next send may well get through.
UNREACHABLE_ERRORS = (messaging.MessageDeliveryFailure,
                      messaging.MessagingTimeout, OSError)


def returned(error):
    """True when ``error`` says that no queue took a mandatory cast."""
    return isinstance(error, messaging.MessageUndeliverable)


def sent_again_later(error):
    """True when a cast that raised ``error`` is to be sent again.

    Returned casts and a messaging server out of reach are for the
    resends; anything else (the version cap, the instance's keys) would
    fail every send alike, and ends the upgrade.
    """
    return returned(error) or isinstance(error, UNREACHABLE_ERRORS)


def not_sent_detail(error):
    """The detail recorded with a first send that did not get through."""
    if returned(error):
        return RETURNED
    return ('Not sent: the messaging server could not be reached (%s: %s). '
            'It is sent again until the agent claims it.'
            % (type(error).__name__, _bounded(str(error))))


def _bounded(text, limit=300):
    text = ' '.join(text.split())
    return text if len(text) <= limit else text[:limit] + '...'


def resend_at(send_count, now=None):
    """When to cast an upgrade again after its ``send_count``-th send."""
    delay = min(CONF.conductor.resend_interval * 2 ** (send_count - 1),
                CONF.conductor.resend_max_interval)
    return (now or timeutils.utcnow()) + datetime.timedelta(seconds=delay)


def _sending_again(upgrade):
    return ('Sent to the agent again (send %d): not claimed since it was '
            'last sent.' % upgrade['send_count'])


def _not_sent(upgrade, error):
    count = upgrade['send_count']
    if returned(error):
        return 'Send %d: %s' % (count, RETURNED)
    return ('Send %d failed: %s: %s. It is sent again on %s.'
            % (count, type(error).__name__, _bounded(str(error)),
               upgrade['resend_at'].isoformat(timespec='seconds')))


def send_unclaimed_upgrades(context, agent_api):
    """Cast again the upgrades due for it; return the ids of those sent.

    The conductor's periodic pass; of several conductors, one takes each
    upgrade, and records the send in its history before the cast. A send
    that fails is recorded too, and tried again at the upgrade's next
    ``resend_at``.
    """
    now = timeutils.utcnow()
    taken = db_resends.take_due_upgrades(
        context, now, lambda count: resend_at(count, now), BATCH,
        'conductor', _sending_again)
    if not taken:
        return []
    failures = agent_api.upgrade_many(
        context, taken, threads=CONF.conductor.rollout_send_threads)
    not_sent = []
    for upgrade in taken:
        error = failures.get(upgrade['id'])
        if error is None:
            LOG.info('Upgrade %(id)s sent to the agent of instance '
                     '%(instance)s again (send %(count)d).',
                     {'id': upgrade['id'], 'instance': upgrade['instance_id'],
                      'count': upgrade['send_count']})
            continue
        detail = _not_sent(upgrade, error)
        not_sent.append((upgrade, detail))
        LOG.warning('Upgrade %(id)s of instance %(instance)s: %(detail)s',
                    {'id': upgrade['id'], 'instance': upgrade['instance_id'],
                     'detail': detail})
    if not_sent:
        db_resends.record_sends(context, not_sent, 'conductor', now)
    return [u['id'] for u in taken if u['id'] not in failures]
