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

"""Trove's health as a gate: the control plane's verdict for one agent.

Trove's conductor records each guest agent heartbeat in its database
(``service_statuses``: a status and ``updated_at``). An upgrade agent asks
its conductor (``trove_health``, RPC API 1.4) twice: before the switch,
for the status to compare with (the baseline); after the restarted guest
agent answers its ping, for a marker (``now``), and then, until its
deadline, for the verdict on what Trove recorded since the marker. The
guest never reads Trove's database: this module does, on the control
plane, through ``db.trove``.

Trove writes ``updated_at`` with trove-conductor's clock and the marker is
this conductor's: both run on the control plane, whose clocks are kept in
step.
"""

from oslo_utils import timeutils

from trove_upgrade import conf
from trove_upgrade.db import trove as trove_db

CONF = conf.CONF

PASS = 'pass'
WAIT = 'wait'

# Trove's status descriptions (trove/instance/service_status.py), from
# best to worst: serving, busy with an operation, stopped, failed. A
# status Trove does not define ranks with the failed ones.
_RANKS = {
    'healthy': 0,
    'running': 1,
    'new': 2, 'building': 2, 'instance ready': 2, 'promoting replica': 2,
    'ejecting replica source': 2, 'transferring guest logs': 2,
    'restart required': 2, 'upgrading': 2, 'restarting': 2,
    'blocked': 3, 'paused': 3, 'shutdown': 3,
    'crashed': 4, 'failed to spawn': 4, 'unknown': 4, 'guestagent error': 4,
    'deleted': 4,
}
_WORST = 4


def rank(status):
    """How bad Trove's ``status`` is: 0 (healthy) to 4 (failed)."""
    if not isinstance(status, str):
        return _WORST
    return _RANKS.get(status.lower(), _WORST)


def is_worse(status, before):
    """Whether ``status`` is worse than ``before`` (None: none recorded)."""
    if before is None:
        return rank(status) > rank('running')
    return rank(status) > rank(before)


def enabled():
    """Whether the gate is on: ``[trove] health_gate`` with a connection."""
    return trove_db.configured() and CONF.trove.health_gate


def _iso(moment):
    return moment.isoformat() if moment is not None else None


def _parse(value):
    """A marker the agent gave back, as a naive UTC datetime, or None."""
    if not isinstance(value, str):
        return None
    try:
        return timeutils.normalize_time(timeutils.parse_isotime(value))
    except ValueError:
        return None


def verdict(instance_id, before, since):
    """The answer to an agent's ``trove_health`` call.

    Without ``since``, a baseline: Trove's status now, and ``now``, the
    marker the agent gives back as ``since`` once the new guest agent
    runs. With it, ``verdict`` too: PASS once Trove recorded a heartbeat
    after ``since`` whose status is no worse than ``before``, else WAIT
    with the reason (the caller decides when to stop waiting).
    ``gate`` False says the gate is off, and ``reason`` why: the agent
    then checks the ping only.
    """
    now = timeutils.utcnow()
    answer = {'gate': False, 'status': None, 'updated_at': None,
              'now': _iso(now), 'timeout': CONF.trove.health_gate_timeout,
              'verdict': None, 'reason': None}
    if not enabled():
        answer['reason'] = ('the health gate is off: [trove] health_gate '
                            'is false or [trove] connection is not set')
        return answer
    record = trove_db.get_service_status(instance_id)
    if record is None:
        answer['reason'] = ('Trove has no service status of instance %s'
                            % instance_id)
        return answer
    answer.update(gate=True, status=record['status'],
                  updated_at=_iso(record['updated_at']))
    if since is None:
        return answer
    marker = _parse(since)
    if marker is None:
        answer.update(verdict=WAIT, reason='the marker %r is no ISO 8601 '
                      'time' % (since,))
        return answer
    answer['verdict'], answer['reason'] = _judge(record, before, marker)
    return answer


def _judge(record, before, marker):
    """``(verdict, reason)`` of Trove's ``record`` since ``marker``."""
    updated_at = record['updated_at']
    status = record['status']
    if updated_at is None or updated_at <= marker:
        return WAIT, ('Trove recorded no heartbeat of the restarted guest '
                      'agent: its last one (status %s) is from %s, before '
                      'the restart was checked at %s'
                      % (status, _iso(updated_at) or 'never',
                         _iso(marker)))
    if is_worse(status, before):
        return WAIT, ('Trove recorded status %s at %s, worse than %s before '
                      'the upgrade' % (status, _iso(updated_at),
                                       before or '(none)'))
    return PASS, ('Trove recorded status %s at %s (before the upgrade: %s)'
                  % (status, _iso(updated_at), before or '(none)'))
