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

"""Trove's health as a gate: the agent's side.

A guest agent that answers its ping may still not heartbeat to Trove, or
report its datastore worse than before: Trove's users see an outage. So,
for a Trove guest agent, the upgrade agent asks its conductor
(``trove_health``, RPC API 1.4) what Trove recorded, never Trove's
database itself:

1. before the switch, the baseline: Trove's status then, kept in the
   journal's upgrade so that a restarted agent compares with the same;
2. once the new guest agent answers its ping, a marker (the control
   plane's time);
3. until the conductor's deadline (``[trove] health_gate_timeout``), the
   verdict: PASS once Trove recorded a heartbeat after the marker no
   worse than the baseline. Otherwise the pipeline rolls back, with the
   conductor's last reason.

The conductor says when the gate is off (``[trove] health_gate``, no
``[trove] connection``, no status of the instance in Trove's database);
a conductor older than 1.4, or an ``[upgrade_levels] conductor`` cap
below it, leaves the ping as the only check, and the agent logs so.
"""

import time

from oslo_log import log as logging
import oslo_messaging as messaging

from trove_upgrade.agent import reasons
from trove_upgrade.common import rpc_interface

LOG = logging.getLogger(__name__)

# The journal's key, in the upgrade in hand, of the baseline.
JOURNAL_KEY = 'trove_health'
PASS = 'pass'
# Seconds between two questions to the conductor while waiting.
POLL_INTERVAL = 2.0
# What the conductor says when it gave no reason.
_NO_REASON = 'no reason given'


def _conductor_too_old(error):
    """Whether ``error`` says the conductor does not serve 1.4."""
    if isinstance(error, (messaging.UnsupportedVersion,
                          messaging.NoSuchMethod)):
        return True
    return isinstance(error, messaging.RemoteError) and error.exc_type in (
        'UnsupportedVersion', 'NoSuchMethod')


class TroveHealthGate:
    """Asks the conductor for Trove's verdict on a restarted guest agent.

    ``sleep`` and ``clock`` are injected by unit tests.
    """

    def __init__(self, conductor_api, context, instance_id,
                 poll_interval=POLL_INTERVAL, sleep=time.sleep,
                 clock=time.monotonic):
        self.conductor_api = conductor_api
        self.context = context
        self.instance_id = instance_id
        self.poll_interval = poll_interval
        self.sleep = sleep
        self.clock = clock

    def _ask(self, upgrade, before=None, since=None):
        return self.conductor_api.trove_health(
            self.context, self.instance_id, upgrade['id'], before, since)

    def baseline(self, upgrade):
        """The gate of ``upgrade``: ``{'gate': bool, ...}``, asked once.

        ``{'gate': True, 'before': <Trove's status>, 'timeout': s}``, or
        ``{'gate': False, 'reason': ...}`` when the ping alone decides.
        A conductor that cannot be reached leaves the gate off for this
        upgrade, said in the log: without a baseline there is nothing to
        compare with, and the upgrade must not wait for the conductor.
        """
        if not self.conductor_api.can_ask_trove_health():
            return self._off(upgrade, '[upgrade_levels] conductor caps the '
                             'conductor RPC API below %s'
                             % rpc_interface.CONDUCTOR_TROVE_HEALTH)
        try:
            answer = self._ask(upgrade)
        except Exception as e:
            if _conductor_too_old(e):
                return self._off(upgrade, 'the conductor is older than RPC '
                                 'API %s' % rpc_interface
                                 .CONDUCTOR_TROVE_HEALTH)
            return self._off(upgrade, 'the conductor could not be asked: %s'
                             % reasons.of_error(e))
        if not isinstance(answer, dict) or not answer.get('gate'):
            reason = answer.get('reason') if isinstance(answer, dict) else (
                'it answered %r' % (answer,))
            return self._off(upgrade, reason or _NO_REASON)
        gate = {'gate': True, 'before': answer.get('status'),
                'timeout': float(answer.get('timeout') or 0)}
        LOG.info('Upgrade %s: Trove\'s health gate is on; Trove\'s status '
                 'before the upgrade is %s', upgrade['id'], gate['before'])
        return gate

    @staticmethod
    def _off(upgrade, reason):
        LOG.warning('Upgrade %s: Trove\'s health is not checked, only the '
                    'guest agent\'s RPC ping: %s', upgrade['id'], reason)
        return {'gate': False, 'reason': reason}

    def wait(self, upgrade, gate):
        """``(reason, detail)``: Trove's verdict, waited for.

        Called once the restarted guest agent answers its ping. ``reason``
        is None on a PASS (or with the gate off), else why not, at the
        deadline; ``detail`` is what Trove recorded, for the SUCCESS
        report (None with the gate off).
        """
        if not gate.get('gate'):
            return None, None
        before = gate.get('before')
        deadline = self.clock() + gate['timeout']
        marker = None
        last = 'the conductor did not answer'
        while True:
            try:
                if marker is None:
                    marker = self._ask(upgrade)['now']
                    LOG.info('Upgrade %s: waiting up to %.0fs for Trove to '
                             'record a heartbeat after %s', upgrade['id'],
                             gate['timeout'], marker)
                answer = self._ask(upgrade, before, marker)
            except Exception as e:
                last = 'the conductor could not be asked: %s' % (
                    reasons.of_error(e))
                LOG.warning('Upgrade %s: %s', upgrade['id'], last)
            else:
                last = answer.get('reason') or _NO_REASON
                if answer.get('verdict') == PASS:
                    return None, last
                if not answer.get('gate'):
                    # Turned off meanwhile: the ping passed.
                    return None, None
            left = deadline - self.clock()
            if left <= 0:
                return ('Trove\'s health gate did not pass within %.0fs: %s'
                        % (gate['timeout'], last)), None
            self.sleep(min(self.poll_interval, left))
