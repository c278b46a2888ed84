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

"""What one pass of a rollout's reconcile decides: :func:`plan`.

:func:`plan` is a pure function of what the database holds now (the
rollout, the agents it selects and the upgrades it dispatched), so any
conductor, restarted or not, reaches the same decision.

The threshold arithmetic, documented in ``doc/source/admin/rollouts.rst``:

* ``targets`` is the number of agents the selector picks on this pass
  (agents already at the version included; agents owned by an older
  active rollout excluded);
* a percent ``max_in_flight`` allows ``ceil(percent * targets / 100)``
  upgrades in flight, and never fewer than 1;
* a percent ``max_failures`` tolerates ``floor(percent * targets / 100)``
  failed agents; a count tolerates that many;
* an agent has failed when its last attempt ended in FAILED, ROLLED_BACK,
  TIMED_OUT or CANCELLED and it has no retry left; a TIMED_OUT attempt is
  judged (retried or failed) only once the agent heartbeats after the
  timeout, or stays silent for ``[conductor] agent_down_time``: until
  then it counts as in flight;
* the rollout pauses when the failed agents not yet acknowledged by a
  resume *exceed* the tolerance: ``max_failures`` 2 pauses at the third;
* until the first agent outside the canaries is dispatched the tolerance
  is 0: any failed canary pauses the rollout.

With ``[trove] connection`` set, and unless the rollout's
``order_by_topology`` is off, Trove's replication sets and clusters order
the dispatches (``topology.py``): one member of a set in flight at once,
replicas before their primary, and with ``hold_set_on_failure`` a failed
member holds the rest of its set.
"""

import collections

from oslo_utils import timeutils

from trove_upgrade.common import rollout_states as rs
from trove_upgrade.common import states
from trove_upgrade.common import versions
from trove_upgrade import conf
from trove_upgrade.services import topology as trove_topology

CONF = conf.CONF

COUNT = 'count'
PERCENT = 'percent'

# What a plan asks the reconciler to do with the rollout's status.
PAUSE = 'pause'
COMPLETE = 'complete'
# Keep RUNNING, saying why in its status detail: it selects nothing yet.
WAIT = 'wait'

NOTHING_SELECTED = ('The selector matches no agent yet: the rollout waits '
                    'for one to register (or abort it).')

Plan = collections.namedtuple(
    'Plan', ['agents', 'counters', 'dispatch', 'action', 'reason', 'sets'],
    defaults=(None,))
Plan.__doc__ = """A reconcile pass's decision.

``agents`` maps each target instance to its state in the rollout,
``counters`` counts them per state (plus ``targets``, ``in_flight`` and the
computed ``in_flight_limit`` and ``failure_tolerance``), ``dispatch`` lists
``(instance_id, attempt, canary)`` to send now, ``action`` is None, PAUSE
or COMPLETE and ``reason`` says why. ``sets`` are Trove's replication sets
and clusters of the agents, each in the order its members are upgraded
(``topology.Gate.describe``), or None when the topology is not followed.
"""


def in_flight_limit(rollout, targets):
    """How many of the rollout's upgrades may be in flight at once."""
    if rollout['max_in_flight_kind'] == PERCENT:
        return max(1, -(-rollout['max_in_flight'] * targets // 100))
    return rollout['max_in_flight']


def failure_tolerance(rollout, targets):
    """How many failed agents the rollout runs on with."""
    if rollout['max_failures_kind'] == PERCENT:
        return rollout['max_failures'] * targets // 100
    return rollout['max_failures']


def unheard_since_timeout(agent, attempt, now, down_time):
    """The attempt timed out and the agent has not spoken since.

    The deadline closes the transaction, but the agent may have been
    working on it all along (its reports lost with a killed conductor):
    until its next heartbeat says which version it runs, retrying could
    upgrade it twice. An agent silent for ``down_time`` after the timeout
    is unreachable, and judged without its word.
    """
    if attempt['status'] != states.TIMED_OUT:
        return False
    timed_out_at = attempt['finished_at']
    heard = agent.get('last_heartbeat_at')
    if heard is not None and heard > timed_out_at:
        return False
    return (now - timed_out_at).total_seconds() <= down_time


def agent_state(rollout, agent, attempts, now, down_time, current):
    """``current(version)`` says whether a version is the rollout's."""
    if not attempts:
        if current(agent['guest_version']):
            return rs.AGENT_CURRENT
        return rs.AGENT_WAITING
    if attempts[-1]['status'] == states.SUCCESS:
        return rs.AGENT_SUCCEEDED
    if attempts[-1]['status'] not in states.FINAL_STATES:
        return rs.AGENT_IN_PROGRESS
    if current(agent['guest_version']):
        return rs.AGENT_CURRENT
    if unheard_since_timeout(agent, attempts[-1], now, down_time):
        return rs.AGENT_IN_PROGRESS
    if len(attempts) <= rollout['per_agent_retries']:
        return rs.AGENT_RETRYING
    return rs.AGENT_FAILED


def least_tolerance(rollout):
    """The failure tolerance the rollout has at the least, any pass."""
    if rollout['canary'] > 0 or rollout['max_failures_kind'] == PERCENT:
        return 0
    return rollout['max_failures']


def plan(rollout, agents, dispatches, busy, now=None, down_time=None,
         topology=None):
    """Decide one pass of the reconciler; see the module docstring.

    :param agents: the target agents, ordered by instance id.
    :param dispatches: the rollout's attempts, as
        ``db.rollouts.list_rollout_dispatches`` returns them.
    :param busy: instances with an unfinished upgrade of anyone's; none of
        them is sent another.
    :param now: the time of the pass (default: now).
    :param down_time: seconds without a heartbeat after which an agent is
        unreachable (default: ``[conductor] agent_down_time``).
    :param topology: Trove's sets (``topology.Topology``) the dispatches
        follow, or None.
    """
    now = now or timeutils.utcnow()
    if down_time is None:
        down_time = CONF.conductor.agent_down_time
    attempts = collections.defaultdict(list)
    for dispatch in dispatches:
        attempts[dispatch['instance_id']].append(dispatch)
    canaries = {d['instance_id'] for d in dispatches if d['canary']}
    # A fleet runs a few versions: each is compared once, not per agent.
    compared = {}

    def current(version):
        if version not in compared:
            compared[version] = versions.same(version,
                                              rollout['instance_version'])
        return compared[version]

    agent_states = {
        a['instance_id']: agent_state(rollout, a,
                                      attempts.get(a['instance_id']), now,
                                      down_time, current)
        for a in agents}
    gate = None
    if topology:
        gate = trove_topology.Gate(topology, agent_states, busy,
                                   rollout.get('hold_set_on_failure', True))
        agent_states.update(dict.fromkeys(gate.held, rs.AGENT_HELD))
    counters = collections.Counter(agent_states.values())
    targets = len(agents)
    in_flight = counters[rs.AGENT_IN_PROGRESS]
    limit = in_flight_limit(rollout, targets)
    canary_phase = rollout['canary'] > 0 and not any(
        not d['canary'] for d in dispatches)
    tolerance = 0 if canary_phase else failure_tolerance(rollout, targets)
    summary = dict({s: counters[s] for s in rs.AGENT_STATES},
                   targets=targets, in_flight=in_flight,
                   in_flight_limit=limit, failure_tolerance=tolerance)
    sets = gate.describe(agent_states) if gate else None

    def decided(dispatch, action=None, reason=None):
        return Plan(agent_states, summary, dispatch, action, reason, sets)

    unacknowledged = (counters[rs.AGENT_FAILED]
                      - rollout['failures_acknowledged'])

    if unacknowledged > tolerance:
        reason = ('%d failed agent(s) exceed the tolerance of %d'
                  % (unacknowledged, tolerance))
        if canary_phase:
            reason += ' during the canary phase'
        return decided([], PAUSE, reason + '.')
    if not agents and not dispatches:
        # Nothing done is not everything done: a rollout whose selector
        # matches no agent (yet) never claims to have completed.
        return decided([], WAIT, NOTHING_SELECTED)
    if all(s in rs.AGENT_SETTLED for s in agent_states.values()):
        reason = ('%d agent(s) succeeded, %d already current, %d failed'
                  % (counters[rs.AGENT_SUCCEEDED],
                     counters[rs.AGENT_CURRENT], counters[rs.AGENT_FAILED]))
        if counters[rs.AGENT_HELD]:
            reason += (', %d held by a failed member of their set'
                       % counters[rs.AGENT_HELD])
        return decided([], COMPLETE, reason + '.')

    room = limit - in_flight
    dispatch = []
    # Retries first, in instance order: they were started before the rest.
    for instance_id, state in sorted(agent_states.items()):
        if room <= len(dispatch):
            break
        if (state == rs.AGENT_RETRYING and instance_id not in busy
                and (gate is None or gate.admits(instance_id))):
            previous = attempts[instance_id][-1]
            dispatch.append((instance_id, previous['attempt'] + 1,
                             previous['canary']))
    waiting = [i for i, s in sorted(agent_states.items())
               if s == rs.AGENT_WAITING and i not in busy
               and (gate is None or gate.admits(i))]
    if canary_phase:
        # Canaries are the first agents in instance order still waiting;
        # nobody else is dispatched before every one of them settled.
        wanted = rollout['canary'] - len(canaries)
        if wanted > 0 and waiting:
            new = waiting[:max(0, min(room - len(dispatch), wanted))]
            dispatch.extend((i, 1, True) for i in new)
            return decided(dispatch)
        if any(agent_states.get(i, rs.AGENT_SUCCEEDED)
               not in rs.AGENT_SETTLED for i in canaries):
            return decided(dispatch)
    for instance_id in waiting:
        if room <= len(dispatch):
            break
        dispatch.append((instance_id, 1, False))
    return decided(dispatch)


def first_overlap(selected, others, select):
    """The first of ``others`` selecting one of the ``selected`` agents.

    Rollouts and desired versions may not share an agent: ``others`` are
    the active ones, ``select(selector)`` the agents a selector picks.
    Returns ``(other, shared instance ids, sorted)``, or ``(None, [])``.
    """
    for other in others:
        shared = selected & {a['instance_id']
                             for a in select(other['selector'])}
        if shared:
            return other, sorted(shared)
    return None, []


def listed(instance_ids, most=5):
    """At most ``most`` of ``instance_ids``, comma-separated, for a message."""
    return ', '.join(instance_ids[:most]) + (
        ', ...' if len(instance_ids) > most else '')
