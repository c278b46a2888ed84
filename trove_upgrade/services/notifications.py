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

"""Notifications about upgrades, sent through the oslo.messaging notifier.

Event types, all with the upgrade's fields as payload:

``trove_upgrade.upgrade.create`` (INFO)
    an upgrade was recorded;
``trove_upgrade.upgrade.start`` (INFO)
    its agent claimed it and starts the work;
``trove_upgrade.upgrade.end`` (INFO)
    it reached SUCCESS;
``trove_upgrade.upgrade.error`` (ERROR)
    it ended in FAILED, ROLLED_BACK or TIMED_OUT.

Where they go is ``[oslo_messaging_notifications] driver`` (nowhere by
default). A notification that cannot be delivered is logged by
oslo.messaging and never fails the operation it describes.
"""

from trove_upgrade.common import rpc
from trove_upgrade.common import states

EVENT_PREFIX = 'trove_upgrade.upgrade'
CREATE = 'create'
START = 'start'
END = 'end'
ERROR = 'error'

_FINAL_EVENTS = {
    states.SUCCESS: END,
    states.FAILED: ERROR,
    states.ROLLED_BACK: ERROR,
    states.TIMED_OUT: ERROR,
}


def payload(upgrade):
    """The upgrade's own fields, without its event history.

    The notifier's JSON serializer turns the timestamps into strings.
    """
    return {k: v for k, v in upgrade.items() if k != 'events'}


def notify_upgrade(context, event, upgrade):
    """Send ``trove_upgrade.upgrade.<event>`` about ``upgrade``."""
    if not rpc.notifications_enabled():
        return
    notifier = rpc.get_notifier()
    event_type = '%s.%s' % (EVENT_PREFIX, event)
    if event == ERROR:
        notifier.error(context, event_type, payload(upgrade))
    else:
        notifier.info(context, event_type, payload(upgrade))


def notify_final_state(context, upgrade):
    """Send ``end`` or ``error`` when ``upgrade`` just reached one.

    CANCELLED is the operator's own decision and not announced.
    """
    event = _FINAL_EVENTS.get(upgrade['status'])
    if event is not None:
        notify_upgrade(context, event, upgrade)
