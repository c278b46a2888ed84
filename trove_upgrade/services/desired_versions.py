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

"""Desired versions: a standing declaration of what a selector should run.

A rollout is a one-off: it upgrades the agents it selects and ends. A
desired version never ends: on every reconciler pass it selects the
agents again, so an agent that registers later, or comes back from a
rebuild on an older version, is upgraded too. It dispatches under the
rollout rules (canary, ``max_in_flight``, ``max_failures`` and pause,
``per_agent_retries``, ``agent_deadline``), decided by the same
:func:`trove_upgrade.services.rollout_plan.plan`.

Owners and precedence (the service-tagging rule: every target carries
its owner's tag, and goes away only when no owner references it):

* an instance selected by an active rollout (PENDING, RUNNING, PAUSED) is
  that rollout's: a rollout is an explicit, bounded operator action and
  takes precedence over desired versions until it ends; the desired
  version then takes the instance back;
* otherwise the oldest desired version (ACTIVE or PAUSED) selecting it
  owns it; creating one that selects agents another already selects is
  refused (409), and an agent that later matches two is the older one's;
* a desired version only upgrades: an agent already running a newer
  version is ``ahead`` and left alone, and one below the package's
  ``min_upgrade_from`` is ``blocked``;
* deleting an owner deletes only its own target: instances another owner
  also selects keep that owner's target.

An agent's attempts are counted per round: when an agent converged and
later heartbeats on another version (rebuilt from an old image), a new
round starts and its earlier attempts no longer count.
"""

import collections

from oslo_log import log as logging
from oslo_serialization import jsonutils

from trove_upgrade.common import exception
from trove_upgrade.common import rollout_states as rs
from trove_upgrade.common import states
from trove_upgrade.common import versions
from trove_upgrade.db import desired_versions as db
from trove_upgrade.db import rollouts as db_rollouts
from trove_upgrade.db import transitions as db_transitions
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.services import packages as package_registry
from trove_upgrade.services import rollout_plan
from trove_upgrade.services import rollouts

LOG = logging.getLogger(__name__)

ACTIVE = db.ACTIVE
PAUSED = db.PAUSED

# Agent states of a desired version besides the rollout ones.
AGENT_AHEAD = 'ahead'
AGENT_BLOCKED = 'blocked'

ROLLOUT = 'rollout'
DESIRED_VERSION = 'desired_version'

View = collections.namedtuple('View', ['plan', 'rounds', 'extra'])
View.__doc__ = """A desired version's plan, each agent's round, and the
agents the plan leaves out (``{instance_id: AGENT_AHEAD or
AGENT_BLOCKED}``)."""


def _newer(agent, version):
    running = versions.parse(agent['guest_version'])
    return running is not None and running > versions.require(version)


def _selected(context, selector):
    """The agents a selector picks: the rollouts' selector language."""
    return rollouts.select_agents(context, selector)


def _claims(context, after=None, limit=None):
    """``(agent, owner)`` for each agent each owner selects.

    Owners come in precedence order; an owner is a dict of ``kind``
    (ROLLOUT or DESIRED_VERSION), ``id``, ``name``, ``version`` and
    ``status``. ``after`` and ``limit`` bound each owner's selection to
    its first ``limit`` agents after that instance id.
    """
    active = db_rollouts.list_rollouts_in(context, rs.ACTIVE_STATES)
    candidates = (
        [(ROLLOUT, r) for r in active]
        + [(DESIRED_VERSION, d) for d in db.list_desired_versions(context)])
    for kind, owner in candidates:
        tag = {'kind': kind, 'id': owner['id'], 'name': owner['name'],
               'version': owner['instance_version'],
               'status': owner['status']}
        for agent in rollouts.select_agents(context, owner['selector'],
                                            after, limit):
            yield agent, tag


def owners(context, instance_ids=None, after=None, limit=None):
    """Each selected instance's owners, in precedence order.

    Returns ``{instance_id: [owner, ...]}`` (owners as ``_claims`` gives
    them); the first owner is the one whose target counts. ``after`` and
    ``limit`` give one page of instances, by instance id: the first
    ``limit`` of the union are among each owner's first ``limit``, so no
    owner's selection is read past them (unless ``instance_ids`` picks
    among it).
    """
    found = collections.defaultdict(list)
    wanted = None if instance_ids is None else set(instance_ids)
    for agent, tag in _claims(context, after,
                              limit if wanted is None else None):
        if wanted is None or agent['instance_id'] in wanted:
            found[agent['instance_id']].append(tag)
    if limit is not None:
        found = {i: found[i] for i in sorted(found)[:limit]}
    return found


def first_owners(context):
    """``{instance_id: (first owner, version its agent runs)}``."""
    first = {}
    for agent, tag in _claims(context):
        first.setdefault(agent['instance_id'],
                         (tag, agent['guest_version']))
    return first


def describe_target(instance_owners):
    """The target of an instance and why, from its owners in order."""
    if not instance_owners:
        return None
    first = instance_owners[0]
    if first['kind'] == ROLLOUT:
        reason = ('selected by active rollout %s; active rollouts take '
                  'precedence over desired versions, the oldest first'
                  % first['id'])
    else:
        reason = ('selected by desired version %s, the oldest desired '
                  'version selecting it' % first['id'])
    return {'version': first['version'], 'owner': first, 'reason': reason,
            'shadowed': instance_owners[1:]}


def targets(context, desired):
    """The agents ``desired`` owns now (see the module docstring)."""
    taken = set()
    for other in db_rollouts.list_rollouts_in(context, rs.ACTIVE_STATES):
        taken.update(a['instance_id'] for a in
                     _selected(context, other['selector']))
    for other in db.list_desired_versions(context):
        if other['id'] == desired['id']:
            break
        taken.update(a['instance_id'] for a in
                     _selected(context, other['selector']))
    return [a for a in _selected(context, desired['selector'])
            if a['instance_id'] not in taken]


def _current_round(agent, attempts, version):
    """(round, attempts of it) of an agent, given its attempts in order."""
    if not attempts:
        return 0, []
    round_ = attempts[-1]['round']
    current = [a for a in attempts if a['round'] == round_]
    last = current[-1]
    heard = agent.get('last_heartbeat_at')
    if (last['status'] == states.SUCCESS
            and not versions.same(agent['guest_version'], version)
            and heard is not None and last['finished_at'] is not None
            and heard > last['finished_at']):
        return round_ + 1, []
    return round_, current


def view(context, desired, package=None, topology=None):
    """The plan of one pass over ``desired`` on what the database holds.

    Trove's replication sets and clusters order its dispatches as a
    rollout's, holding a set whose member failed; ``topology`` is Trove's
    when the caller read it for this pass.
    """
    version = desired['version']
    if package is None:
        package = package_registry.resolve(context, desired['package_name'],
                                           version)
    attempts = collections.defaultdict(list)
    for dispatch in db.list_dispatches(context, desired['id']):
        if versions.same(dispatch['version'], version):
            attempts[dispatch['instance_id']].append(dispatch)
    agents, rounds, extra, dispatches = [], {}, {}, []
    for agent in targets(context, desired):
        instance_id = agent['instance_id']
        round_, current = _current_round(agent, attempts[instance_id],
                                         version)
        if not current and _newer(agent, version):
            extra[instance_id] = AGENT_AHEAD
            continue
        if not current and package_registry.below_floor(
                package, agent['guest_version']):
            extra[instance_id] = AGENT_BLOCKED
            continue
        rounds[instance_id] = round_
        agents.append(agent)
        dispatches.extend(current)
    # Canaries belong to the current version's first round only.
    plan = rollout_plan.plan(desired, agents, dispatches,
                             db_upgrades.list_busy_instances(context),
                             topology=rollouts.followed_topology(desired,
                                                                 topology))
    return View(plan, rounds, extra)


def _check_no_overlap(context, selector, desired_id=None):
    selected = {a['instance_id'] for a in _selected(context, selector)}
    other, shared = rollout_plan.first_overlap(
        selected,
        [d for d in db.list_desired_versions(context)
         if d['id'] != desired_id],
        lambda other_selector: _selected(context, other_selector))
    if other is not None:
        raise exception.PackageConflictError(reason=(
            'Desired version %s (%s) already selects %d of these agents: '
            '%s.' % (other['id'], other['name'], len(shared),
                     rollout_plan.listed(shared))))


def create(context, values):
    """Record a desired version of a registered, deployable package."""
    package = package_registry.resolve(context, values['package_name'],
                                       values['version'])
    values = dict(values, version=package['version'])
    _check_no_overlap(context, values['selector'])
    desired = db.create_desired_version(
        context, values, detail='%s %s for selector %s' % (
            package['name'], package['version'],
            jsonutils.dumps(values['selector'], sort_keys=True)))
    LOG.info('Desired version %(id)s (%(name)s): %(version)s.', desired)
    return desired


def change(context, dv_id, values):
    """Change the version or the thresholds of a desired version.

    A new version is resolved again and its failures start from zero.
    """
    desired = db.get_desired_version(context, dv_id)
    detail = []
    if 'version' in values:
        package = package_registry.resolve(context, desired['package_name'],
                                           values['version'])
        values = dict(values, version=package['version'],
                      failures_acknowledged=0)
        detail.append('version %s -> %s' % (desired['version'],
                                            package['version']))
    detail.extend('%s=%s' % (k, v) for k, v in sorted(values.items())
                  if k not in ('version', 'failures_acknowledged')
                  and not k.endswith('_kind'))
    changed = db.update_desired_version(context, dv_id, values, 'changed',
                                        'api', detail='; '.join(detail))
    if changed is None:
        raise exception.PackageConflictError(reason=(
            'Desired version %s changed meanwhile; try again.' % dv_id))
    return changed


def pause(context, dv_id, reason='Paused by an operator.', source='api'):
    changed = db.update_desired_version(
        context, dv_id, {'status': PAUSED, 'status_detail': reason},
        'paused', source, detail=reason, from_states={ACTIVE})
    if changed is None:
        raise exception.PackageConflictError(reason=(
            'Desired version %s is not ACTIVE: it cannot be paused.'
            % dv_id))
    return changed


def resume(context, dv_id):
    """PAUSED to ACTIVE; the failures seen so far are acknowledged."""
    desired = db.get_desired_version(context, dv_id)
    failed = view(context, desired).plan.counters[rs.AGENT_FAILED]
    changed = db.update_desired_version(
        context, dv_id, {'status': ACTIVE, 'status_detail': None,
                         'failures_acknowledged': failed},
        'resumed', 'api', detail='%d failure(s) acknowledged' % failed,
        from_states={PAUSED})
    if changed is None:
        raise exception.PackageConflictError(reason=(
            'Desired version %s is not PAUSED: it cannot be resumed.'
            % dv_id))
    return changed


def delete(context, dv_id):
    """Delete it; its unstarted upgrades are cancelled.

    Instances another owner also selects keep that owner's target: they
    were never this one's (see ``targets``).
    """
    desired = db.get_desired_version(context, dv_id)
    for dispatch in db.list_dispatches(context, dv_id):
        if dispatch['status'] in states.CANCELLABLE_STATES:
            try:
                db_transitions.transition_upgrade(
                    context, dispatch['upgrade_id'], states.CANCELLED, 'api',
                    allowed_from=states.CANCELLABLE_STATES)
            except exception.InvalidStateTransitionError:
                pass
    db.delete_desired_version(context, dv_id)
    LOG.info('Desired version %(id)s (%(name)s) deleted.', desired)


def get_desired_version(context, dv_id):
    """:raises: DesiredVersionNotFoundError."""
    return db.get_desired_version(context, dv_id)


def list_desired_versions(context, filters=None):
    """Desired versions, oldest first: the order of their precedence."""
    return db.list_desired_versions(context, filters=filters)


def list_events(context, dv_id):
    """Every recorded change of a desired version, oldest first."""
    return db.list_events(context, dv_id)
