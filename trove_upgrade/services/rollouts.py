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

"""What a rollout is and what it should do next, whoever asks.

The API creates rollouts and moves them between RUNNING and PAUSED or to
ABORTED; the conductor's reconciler (``conductor/reconciler.py``) asks
``rollout_plan.plan`` on every pass what to dispatch and whether the
rollout must pause or has completed; this module reads what it decides on.
"""

from oslo_log import log as logging
from oslo_utils import timeutils

from trove_upgrade.common import exception
from trove_upgrade.common import rollout_states as rs
from trove_upgrade.common import states
from trove_upgrade.common import versions
from trove_upgrade import conf
from trove_upgrade.db import agents as db_agents
from trove_upgrade.db import common as db_common
from trove_upgrade.db import rollouts as db_rollouts
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.services import rollout_plan
from trove_upgrade.services import topology as trove_topology
from trove_upgrade.services import trove_instances
from trove_upgrade.services import upgrades

CONF = conf.CONF
LOG = logging.getLogger(__name__)


def followed_topology(rollout, topology):
    """The topology the rollout follows: None when it follows none."""
    if not rollout.get('order_by_topology', True):
        return None
    if topology is None:
        topology = trove_topology.read()
    return topology or None


def quick_plan(context, rollout, active=None, topology=None):
    """The pass's ``rollout_plan.Plan`` when a few small reads decide it.

    Or None when they do not.

    :func:`plan_for` reads every selected agent and every attempt: a
    pass's largest cost, growing with the fleet, paid once a second. A
    count over the rollout's upgrades, and the first agents it never
    dispatched to, decide two passes as the plan would (``agents`` and
    ``counters`` are then None), on bounds documented in
    ``doc/source/admin/rollouts.rst``:

    * a pass that can only wait (``rollout_plan.WAIT``, keeping the status
      detail): an upgrade of the rollout is unfinished, so it cannot
      complete; no failure could pause it (every upgrade that ended other
      than SUCCESS counted as a failed agent, against the smallest
      tolerance the rollout has: ``rollout_plan.least_tolerance``); and
      its unfinished upgrades fill ``max_in_flight`` (a percent taken of
      every registered agent, a limit no lower than the plan's), or no
      attempt can be retried and no agent the selector picks waits for a
      first dispatch (its ``trove`` facts aside: a wider choice);
    * a pass on the happy path: no upgrade of the rollout ended other than
      SUCCESS, the canary phase is over, ``max_in_flight`` is a count and
      the selector has no ``trove`` facts. The plan then dispatches the
      first waiting agents in instance order that nothing else is busy
      with, as many as the unfinished upgrades leave room for, when none
      of them is in one of Trove's replication sets or clusters (their
      order is the plan's to decide).

    Either way no pass skips a plan that would act otherwise, but for one
    case: an unfinished upgrade whose agent stopped matching the selector
    keeps its place in flight until it ends or times out at the
    rollout's ``agent_deadline``.

    Its reads share one transaction, as :func:`plan_for`'s do.
    ``topology`` is Trove's (``topology.read``), when the caller read it
    for this pass.
    """
    if rollout['status_detail'] == rollout_plan.NOTHING_SELECTED:
        return None
    topology = followed_topology(rollout, topology)
    with db_common.reading(context):
        return _quick_plan(context, rollout, active, topology)


def _quick_plan(context, rollout, active, topology):
    counts = db_rollouts.count_rollout_upgrades(context, rollout['id'])
    if (counts.unsuccessful - rollout['failures_acknowledged']
            > rollout_plan.least_tolerance(rollout)):
        return None
    if rollout['max_in_flight_kind'] == rollout_plan.PERCENT:
        limit = rollout_plan.in_flight_limit(
            rollout, db_agents.count_agents(context))
    else:
        limit = rollout['max_in_flight']
    wait = rollout_plan.Plan(None, None, [], rollout_plan.WAIT,
                             rollout['status_detail'])
    if counts.unfinished and counts.unfinished >= limit:
        return wait
    if counts.unsuccessful and rollout['per_agent_retries']:
        return None
    waiting = _waiting_agents(context, rollout, limit - counts.unfinished)
    if (counts.unsuccessful
            or rollout['max_in_flight_kind'] == rollout_plan.PERCENT
            or 'trove' in rollout['selector']
            or (rollout['canary'] and not counts.beyond_canaries)):
        if counts.unfinished and next(waiting, None) is None:
            return wait
        return None
    free, any_waiting = _free_agents(context, rollout, active, waiting,
                                     limit - counts.unfinished)
    if topology is not None and any(topology.set_of(i) for i in free):
        return None
    if free:
        return rollout_plan.Plan(None, None, [(i, 1, False) for i in free],
                                 None, None)
    if counts.unfinished and not any_waiting:
        return wait
    return None


def _waiting_agents(context, rollout, room):
    """Instance ids of the agents that wait for a first dispatch, in order.

    Those ``_agent_selector`` picks that the rollout never dispatched to
    and that are not at its version yet; read a page at a time, the first
    one about ``room`` long.
    """
    version = rollout['instance_version']
    for instance_id, found in db_agents.selected_undispatched_agents(
            context, _agent_selector(rollout['selector']), rollout['id'],
            first_page=room + _PAGE_SLACK):
        if not versions.same(found, version):
            yield instance_id


# Agents read beyond the room of a pass, for those some other upgrade or
# Trove is busy with.
_PAGE_SLACK = 16


def _free_agents(context, rollout, active, waiting, room):
    """The first ``room`` of ``waiting`` no one else is busy with.

    Busy as :func:`plan_for` judges it: an unfinished upgrade of anyone's,
    Trove busy with the instance; an older active rollout owning it takes
    it out of this one's targets. Also says whether any agent waited.
    """
    taken = db_upgrades.list_busy_instances(context) | _owned_elsewhere(
        context, rollout, active)
    free, candidates, any_waiting = [], [], False
    for instance_id in waiting:
        any_waiting = True
        if instance_id not in taken:
            candidates.append(instance_id)
        if len(free) + len(candidates) >= room:
            free += _not_busy_in_trove(candidates)
            candidates = []
            if len(free) >= room:
                return free[:room], any_waiting
    return free + _not_busy_in_trove(candidates), any_waiting


def _not_busy_in_trove(instance_ids):
    busy = trove_instances.busy_instances(set(instance_ids))
    return [i for i in instance_ids if i not in busy]


def _agent_selector(selector):
    """What of ``selector`` the agents' own rows answer: all but ``trove``."""
    agent_selector = {k: v for k, v in selector.items() if k != 'trove'}
    if not agent_selector.keys() & {'instance_ids', 'group', 'labels'}:
        agent_selector['labels'] = {}
    return agent_selector


def select_agents(context, selector, after=None, limit=None):
    """The agents ``selector`` picks, ordered by instance id.

    Its ``instance_ids``, ``group`` or ``labels`` select among the agents
    (every agent when it has none of them), and its ``availability_zone``
    among those the zone the agents reported (``db.agents``); its
    ``trove`` facts then keep those whose instance Trove describes so
    (``trove_instances.select``). ``after`` and ``limit`` give one page:
    the first ``limit`` agents whose instance id sorts after ``after``.
    """
    agent_selector = _agent_selector(selector)
    if 'trove' not in selector:
        return db_agents.list_selected_agents(context, agent_selector, after,
                                              limit)
    agents = db_agents.list_selected_agents(context, agent_selector, after)
    return trove_instances.select(agents, selector['trove'])[:limit]


def _owned_elsewhere(context, rollout, active=None):
    """Instances an older active rollout selects: it has precedence."""
    owned = set()
    if active is None:
        active = db_rollouts.list_rollouts_in(context, rs.ACTIVE_STATES)
    for other in active:
        if other['id'] == rollout['id']:
            break
        owned.update(a['instance_id'] for a in
                     select_agents(context, other['selector']))
    return owned


def targets(context, rollout, active=None):
    """The agents the rollout acts on now, ordered by instance id.

    ``active`` are the active rollouts, oldest first, when the caller
    has just read them.
    """
    owned = _owned_elsewhere(context, rollout, active)
    return [a for a in select_agents(context, rollout['selector'])
            if a['instance_id'] not in owned]


def plan_for(context, rollout, active=None, topology=None):
    """``rollout_plan.plan`` of the rollout on what the databases hold now.

    Instances Trove is busy with count as busy: nothing is dispatched to
    them until Trove is done, and they wait meanwhile. ``active`` is as
    :func:`targets` takes it; ``topology`` as :func:`quick_plan` does.
    """
    topology = followed_topology(rollout, topology)
    with db_common.reading(context):
        agents = targets(context, rollout, active)
        busy = db_upgrades.list_busy_instances(context) | (
            trove_instances.busy_instances(
                {a['instance_id'] for a in agents}))
        dispatches = db_rollouts.list_rollout_dispatches(context,
                                                         rollout['id'])
    return rollout_plan.plan(rollout, agents, dispatches, busy,
                             topology=topology)


def check_no_overlap(context, selector):
    """Refuse a selector that picks agents of an active rollout: 409."""
    selected = {a['instance_id']
                for a in select_agents(context, selector)}
    other, shared = rollout_plan.first_overlap(
        selected, db_rollouts.list_rollouts_in(context, rs.ACTIVE_STATES),
        lambda other_selector: select_agents(context, other_selector))
    if other is not None:
        raise exception.RolloutConflictError(reason=(
            'Active rollout %s (%s) already selects %d of these agents: '
            '%s.' % (other['id'], other['name'], len(shared),
                     rollout_plan.listed(shared))))


def create_rollout(context, values):
    """Record a rollout; PENDING while ``start_at`` is in the future.

    With ``[trove] connection`` set, ``instance_ids`` may hold names and
    every one must be an instance Trove has (see
    ``trove_instances.resolve_instance``); without it they must be ids
    and ``trove`` facts cannot be selected by.

    :raises: RolloutConflictError when an active rollout selects one of the
        agents this one selects; InstanceNotFoundError,
        AmbiguousInstanceNameError,
        TroveNotConfiguredError.
    """
    selector = values['selector']
    if 'instance_ids' in selector:
        if trove_instances.configured():
            selector = dict(selector, instance_ids=(
                trove_instances.resolve_instances(
                    context, selector['instance_ids'])))
        elif not all(trove_instances.is_instance_id(i)
                     for i in selector['instance_ids']):
            raise exception.TroveNotConfiguredError(
                what='Naming instances by name',
                hint='give the instance ids.')
    if 'trove' in selector and not trove_instances.configured():
        raise exception.TroveNotConfiguredError(
            what='Selecting by Trove facts',
            hint='select by instance_ids, group or labels.')
    values = dict(values, selector=selector)
    check_no_overlap(context, values['selector'])
    start_at = values.get('start_at')
    running = start_at is None or start_at <= timeutils.utcnow(
        with_timezone=start_at.tzinfo is not None)
    values = dict(values, status=rs.RUNNING if running else rs.PENDING)
    rollout = db_rollouts.create_rollout(context, values)
    LOG.info('Rollout %(id)s (%(name)s) of version %(version)s created, '
             '%(status)s.', {'id': rollout['id'], 'name': rollout['name'],
                             'version': rollout['instance_version'],
                             'status': rollout['status']})
    return rollout


def _move(context, rollout_id, from_states, action, values, finished=False):
    rollout = db_rollouts.update_rollout(context, rollout_id, from_states,
                                         values, finished=finished)
    if rollout is None:
        current = db_rollouts.get_rollout(context, rollout_id)
        raise exception.InvalidRolloutStateError(
            rollout_id=rollout_id, status=current['status'], action=action)
    LOG.info('Rollout %(id)s %(action)s.', {'id': rollout_id,
                                            'action': action})
    return rollout


def pause_rollout(context, rollout_id, reason='Paused by an operator.'):
    """RUNNING or PENDING to PAUSED: nothing new is dispatched."""
    return _move(context, rollout_id, {rs.RUNNING, rs.PENDING}, 'paused',
                 {'status': rs.PAUSED, 'status_detail': reason})


def resume_rollout(context, rollout_id):
    """PAUSED to RUNNING; the failures seen so far are acknowledged.

    Acknowledged failures no longer count against the tolerance, so a
    rollout paused by its threshold goes on until as many new failures
    exceed it again.
    """
    rollout = db_rollouts.get_rollout(context, rollout_id)
    if rollout['status'] != rs.PAUSED:
        raise exception.InvalidRolloutStateError(
            rollout_id=rollout_id, status=rollout['status'],
            action='resumed')
    failed = plan_for(context, rollout).counters[rs.AGENT_FAILED]
    return _move(context, rollout_id, {rs.PAUSED}, 'resumed',
                 {'status': rs.RUNNING, 'status_detail': None,
                  'failures_acknowledged': failed})


def abort_rollout(context, rollout_id):
    """An active rollout to ABORTED; its unstarted upgrades are cancelled.

    Upgrades its agents already claimed run to their end.
    """
    rollout = _move(context, rollout_id, rs.ACTIVE_STATES, 'aborted',
                    {'status': rs.ABORTED,
                     'status_detail': 'Aborted by an operator.'},
                    finished=True)
    for dispatch in db_rollouts.list_rollout_dispatches(context, rollout_id):
        if dispatch['status'] in states.CANCELLABLE_STATES:
            try:
                upgrades.cancel_upgrade(context, dispatch['upgrade_id'])
            except exception.InvalidStateTransitionError:
                LOG.info('Upgrade %s was claimed before the abort could '
                         'cancel it.', dispatch['upgrade_id'])
    return rollout


def delete_rollout(context, rollout_id):
    """Delete an ended rollout; its upgrades keep its id."""
    db_rollouts.delete_rollout(context, rollout_id, rs.FINISHED_STATES)


def get_rollout(context, rollout_id):
    """:raises: RolloutNotFoundError."""
    return db_rollouts.get_rollout(context, rollout_id)


def list_rollouts(context, filters=None, limit=None, marker=None):
    """Rollouts newest first, filtered by exact match, a page at a time."""
    return db_rollouts.list_rollouts(context, filters=filters, limit=limit,
                                     marker=marker)
