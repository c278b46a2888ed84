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

"""States of a rollout, and of each agent within one.

A rollout is PENDING until its ``start_at``, RUNNING while the reconciler
dispatches, PAUSED by an operator or by the failure threshold, and ends
COMPLETED (every selected agent settled) or ABORTED (by an operator).
Only an ended rollout may be deleted.

An agent's state within a rollout is computed on every pass from the
upgrades the rollout dispatched to it and the version it reports; it is
never stored.
"""

PENDING = 'PENDING'
RUNNING = 'RUNNING'
PAUSED = 'PAUSED'
ABORTED = 'ABORTED'
COMPLETED = 'COMPLETED'

ALL_STATES = frozenset([PENDING, RUNNING, PAUSED, ABORTED, COMPLETED])
ACTIVE_STATES = frozenset([PENDING, RUNNING, PAUSED])
FINISHED_STATES = frozenset([ABORTED, COMPLETED])

# An agent's state within a rollout.
AGENT_WAITING = 'waiting'          # selected, nothing dispatched yet
AGENT_IN_PROGRESS = 'in_progress'  # its upgrade has not ended
AGENT_RETRYING = 'retrying'        # last attempt failed, a retry is left
AGENT_SUCCEEDED = 'succeeded'      # the rollout's upgrade succeeded
AGENT_CURRENT = 'current'          # already at the version: nothing to do
AGENT_FAILED = 'failed'            # every attempt failed
AGENT_HELD = 'held'                # a member of its set failed (topology)

AGENT_STATES = (AGENT_WAITING, AGENT_IN_PROGRESS, AGENT_RETRYING,
                AGENT_SUCCEEDED, AGENT_CURRENT, AGENT_FAILED, AGENT_HELD)
# Agent states that need nothing more from the rollout.
AGENT_SETTLED = frozenset([AGENT_SUCCEEDED, AGENT_CURRENT, AGENT_FAILED,
                           AGENT_HELD])
