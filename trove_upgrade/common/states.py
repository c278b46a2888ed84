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

"""The upgrade state machine: every state and every legal move between them.

An upgrade only moves forward. The agent may skip stages it does not need
(an agent that finds the version already installed reports SUCCESS straight
from SENT), so a move is legal when the target comes later in ``ORDER`` and
the target's own rule allows it. A report of the current state is a
duplicate, and a report of an earlier state is stale: both are ignored, so a
report resent by the agent's outbox is harmless.

A final state is final, with one exception: an upgrade the conductor timed
out may still receive the agent's late final report, which replaces
TIMED_OUT because it is what actually happened on the guest.
"""

from trove_upgrade.common import exception

PENDING = 'PENDING'
SENT = 'SENT'
DEFERRED = 'DEFERRED'
DOWNLOADING = 'DOWNLOADING'
VERIFYING = 'VERIFYING'
INSTALLING = 'INSTALLING'
RESTARTING = 'RESTARTING'
SUCCESS = 'SUCCESS'
FAILED = 'FAILED'
ROLLED_BACK = 'ROLLED_BACK'
CANCELLED = 'CANCELLED'
TIMED_OUT = 'TIMED_OUT'

# Stages in the order an upgrade goes through them.
ORDER = (PENDING, SENT, DEFERRED, DOWNLOADING, VERIFYING, INSTALLING,
         RESTARTING)

FINAL_STATES = frozenset([SUCCESS, FAILED, ROLLED_BACK, CANCELLED,
                          TIMED_OUT])
ALL_STATES = frozenset(ORDER) | FINAL_STATES

# States from which the agent has not started work: cancelling is safe.
CANCELLABLE_STATES = frozenset([PENDING, SENT, DEFERRED])

# Final states an agent reports after its late final report of a timeout.
_LATE_FINAL_STATES = frozenset([SUCCESS, FAILED, ROLLED_BACK])

# Which states may be entered from where, besides moving forward in ORDER.
_ENTERED_FROM = {
    CANCELLED: CANCELLABLE_STATES,
    ROLLED_BACK: frozenset([INSTALLING, RESTARTING]),
    SUCCESS: frozenset(ORDER) - {PENDING},
    FAILED: frozenset(ORDER),
    TIMED_OUT: frozenset(ORDER),
}


def _forward(from_state, to_state):
    return ORDER.index(to_state) > ORDER.index(from_state)


def is_legal(from_state, to_state):
    """True when an upgrade in ``from_state`` may move to ``to_state``."""
    if from_state == TIMED_OUT:
        return to_state in _LATE_FINAL_STATES
    if from_state in FINAL_STATES:
        return False
    if to_state in FINAL_STATES:
        return from_state in _ENTERED_FROM[to_state]
    return _forward(from_state, to_state)


def is_duplicate_or_stale(from_state, to_state):
    """True for a report that repeats or predates what is recorded.

    Such a report is ignored without error: the agent resends reports until
    they are acknowledged, and RPC may deliver an old one late.
    """
    if from_state == to_state:
        return True
    if from_state in FINAL_STATES:
        return not is_legal(from_state, to_state)
    if to_state in FINAL_STATES:
        return False
    return ORDER.index(to_state) < ORDER.index(from_state)


def decide(upgrade, to_state, allowed_from, instance_id):
    """True to move ``upgrade`` on, False when the move is not news.

    :raises: UpgradeOfAnotherInstanceError, InvalidStateTransitionError
    """
    if instance_id is not None and upgrade['instance_id'] != instance_id:
        raise exception.UpgradeOfAnotherInstanceError(
            upgrade_id=upgrade['id'], instance_id=instance_id,
            owner=upgrade['instance_id'])
    current = upgrade['status']
    if current == to_state:
        return False
    if allowed_from is not None and current not in allowed_from:
        raise exception.InvalidStateTransitionError(
            upgrade_id=upgrade['id'], from_state=current, to_state=to_state)
    if is_duplicate_or_stale(current, to_state):
        return False
    if not is_legal(current, to_state):
        raise exception.InvalidStateTransitionError(
            upgrade_id=upgrade['id'], from_state=current, to_state=to_state)
    return True


def transitions():
    """Every legal (from, to) pair, for the documentation and the tests."""
    return sorted((a, b) for a in ALL_STATES for b in ALL_STATES
                  if is_legal(a, b))
