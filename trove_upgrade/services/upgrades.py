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

"""What the control plane does with an upgrade, whoever asks.

The REST API creates and cancels upgrades; the conductor lets agents claim
them, records what the agents report and times out silent ones. Both go
through these functions, so that every change is checked against the state
machine, recorded with its event by the database's compare-and-swap and
announced by one piece of code.

Races this module relies on the compare-and-swap to settle:

* the agent may receive a rollout's cast and claim the upgrade before the
  conductor has recorded SENT, so a claim is accepted from PENDING too,
  and the PENDING to SENT move then finds a newer state and changes
  nothing (the API records SENT with the upgrade, before its cast);
* an operator's cancel and the agent's claim both start from the
  cancellable states: whichever is recorded first wins and the other is
  refused, so a cancelled upgrade is never started and a started one never
  cancelled.
"""

import datetime

from oslo_log import log as logging
from oslo_utils import timeutils
from oslo_utils import uuidutils

from trove_upgrade.common import exception
from trove_upgrade.common import exception as package_exc
from trove_upgrade.common import states
from trove_upgrade import conf
from trove_upgrade.db import held as db_held
from trove_upgrade.db import resends as db_resends
from trove_upgrade.db import transitions as db_transitions
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.services import agent_rpcapi
from trove_upgrade.services import agents
from trove_upgrade.services import notifications
from trove_upgrade.services import packages as package_registry
from trove_upgrade.services import resends
from trove_upgrade.services import sealing_keys
from trove_upgrade.services import trove_instances

CONF = conf.CONF
LOG = logging.getLogger(__name__)

# States an agent may report; the others are the control plane's to set.
AGENT_STATES = frozenset([
    states.DEFERRED, states.DOWNLOADING, states.VERIFYING,
    states.INSTALLING, states.RESTARTING, states.SUCCESS, states.FAILED,
    states.ROLLED_BACK,
])

# States from which the agent may claim an upgrade and start it.
CLAIMABLE_STATES = states.CANCELLABLE_STATES

# The state the API's cast finds an upgrade in, unless it moved on.
_SENT = frozenset([states.SENT])

# Why a report changed nothing.
DUPLICATE = 'duplicate'
STALE = 'stale'
ILLEGAL = 'illegal'
REJECTED = 'rejected'


def create_upgrade(context, values):
    """Record an upgrade, send it to the instance's agent, return it.

    ``values`` are those of ``db.upgrades.create_upgrade``, or name a
    registered ``package`` instead of ``strategy`` and ``location``
    (``packages.deploy_by_reference``). The upgrade,
    its event and its first send (SENT) are recorded in one transaction,
    which reads the instance's keys too, then it is cast; until its agent
    claims it, it is cast again (``trove_upgrade.services.resends``), so that a
    cast lost on the way, or never made because this process died first,
    still reaches the agent. When the message cannot be sent (the
    messaging server stays unreachable through ``[DEFAULT]
    rpc_send_retries``, or the version cap is below what the agent API can
    send, or its keys cannot be read) the upgrade moves on to FAILED with
    the reason, and DispatchError is raised. One that RabbitMQ returned (no
    queue of the agent yet) stays SENT, with that reason recorded.

    An upgrade of an instance Trove reports busy is recorded PENDING and
    held DEFERRED instead, and sent once it is idle.
    """
    # First: a bad [upgrade_levels] agent must fail before anything is
    # recorded.
    agent_api = agent_rpcapi.shared()
    values = dict(values)
    package_registry.deploy_by_reference(
        context, values, lambda: agents.agents_of(context,
                                                  values['instance_id']))
    hold = None
    if trove_instances.configured():
        values = dict(values, instance_id=trove_instances.resolve_instance(
            context, values['instance_id']))
        hold = trove_instances.hold_reasons(
            context, [values['instance_id']]).get(values['instance_id'])
    elif not trove_instances.is_instance_id(values['instance_id']):
        raise exception.TroveNotConfiguredError(
            what='Naming an instance by name',
            hint='%r is not an instance id; give the instance id.'
            % values['instance_id'])
    if hold:
        return _create_held(context, values, hold)
    upgrade, key_rows = db_upgrades.create_sent_upgrade(
        context, values, resends.resend_at(1))
    notifications.notify_upgrade(context, notifications.CREATE, upgrade)
    try:
        instance_id = upgrade['instance_id']
        agent_api.upgrade_with_keys(context, upgrade, sealing_keys.keyrings_of(
            [instance_id], key_rows)[instance_id])
    except Exception as e:
        if not resends.returned(e):
            reason = record_unsent(context, upgrade, e, 'api',
                                   allowed_from=_SENT)
            if reason is None:
                # Sent again and claimed, or cancelled, while this cast
                # was retried: its failure is no longer news.
                return db_upgrades.get_upgrade(context, upgrade['id'])
            raise exception.DispatchError(upgrade_id=upgrade['id'],
                                          reason=reason)
        warn_not_sent(upgrade, resends.RETURNED)
        now = timeutils.utcnow()
        db_resends.record_sends(context, [(upgrade, resends.RETURNED)],
                                'api', now)
        upgrade = dict(upgrade, status_detail=resends.RETURNED,
                       updated_at=now)
    return upgrade


def _create_held(context, values, hold):
    """Record an upgrade held DEFERRED by ``hold``, Trove's reason."""
    upgrade = db_upgrades.create_upgrade(context, values)
    notifications.notify_upgrade(context, notifications.CREATE, upgrade)
    held = db_held.hold_upgrade(context, upgrade['id'], 'api',
                                'Held by the control plane: %s.' % hold)
    if held is None:
        # Cancelled meanwhile: nothing to hold, nor to send.
        return db_upgrades.get_upgrade(context, upgrade['id'])
    LOG.info('Upgrade %(id)s held DEFERRED: %(reason)s.',
             {'id': upgrade['id'], 'reason': hold})
    return held


def warn_not_sent(upgrade, detail):
    """Log why the cast of ``upgrade`` will be sent again later."""
    LOG.warning('Upgrade %(id)s to instance %(instance)s: %(reason)s',
                {'id': upgrade['id'], 'instance': upgrade['instance_id'],
                 'reason': detail})


def record_casts(context, cast, failures, source):
    """Record what became of the casts of the PENDING upgrades ``cast``.

    ``failures`` are ``AgentAPI.upgrade_many``'s. The upgrades sent, and
    those RabbitMQ returned or could not take (out of reach), are marked
    SENT, the latter with the reason, and sent again until their agents
    claim them: a broker restart must not fail a rollout's attempts. The
    others are FAILED. Returns the ids of the upgrades marked SENT.
    """
    by_detail = {None: []}
    for upgrade in cast:
        error = failures.get(upgrade['id'])
        if error is None:
            by_detail[None].append(upgrade['id'])
        elif resends.sent_again_later(error):
            detail = resends.not_sent_detail(error)
            warn_not_sent(upgrade, detail)
            by_detail.setdefault(detail, []).append(upgrade['id'])
        else:
            record_unsent(context, upgrade, error, source)
    first_resend = resends.resend_at(1)
    marked = []
    for detail, ids in by_detail.items():
        db_upgrades.mark_upgrades_sent(context, ids, source, first_resend,
                                       detail=detail)
        marked.extend(ids)
    return marked


def record_unsent(context, upgrade, error, source, allowed_from=None):
    """Record and log FAILED for an upgrade whose cast raised ``error``.

    Whatever stopped the cast (oslo.messaging's errors, the driver's
    connection errors it does not wrap, the version cap, a missing key),
    the upgrade was not sent; in a rollout it counts as an attempt.
    Returns the reason recorded; None, recording nothing, when the
    upgrade has left ``allowed_from`` meanwhile.
    """
    reason = '%s: %s' % (type(error).__name__, error)
    LOG.error('Upgrade %(id)s could not be sent to the agent of instance '
              '%(instance)s: %(reason)s',
              {'id': upgrade['id'], 'instance': upgrade['instance_id'],
               'reason': reason})
    try:
        changed, upgrade = db_transitions.transition_upgrade(
            context, upgrade['id'], states.FAILED, source,
            detail='Could not be sent to the agent: %s' % reason,
            allowed_from=allowed_from)
    except exception.InvalidStateTransitionError as e:
        LOG.info('Upgrade %(id)s is %(status)s: not recorded FAILED.',
                 {'id': upgrade['id'], 'status': e.kwargs['from_state']})
        return None
    if changed:
        notifications.notify_final_state(context, upgrade)
    return reason


def get_upgrade(context, upgrade_id, with_events=False):
    """:raises: UpgradeNotFoundError."""
    return db_upgrades.get_upgrade(context, upgrade_id,
                                   with_events=with_events)


def list_upgrades(context, **query):
    """Upgrades newest first, filtered and paged as ``query`` says."""
    return db_upgrades.list_upgrades(context, **query)


def cancel_upgrade(context, upgrade_id):
    """Cancel an upgrade its agent has not started; return it.

    Cancelling a cancelled upgrade changes nothing.

    :raises: UpgradeNotFoundError; InvalidStateTransitionError once the agent
    claimed
        it or it ended.
    """
    _changed, upgrade = db_transitions.transition_upgrade(
        context, upgrade_id, states.CANCELLED, 'api',
        allowed_from=states.CANCELLABLE_STATES)
    return upgrade


def _log_foreign(instance_id, upgrade_id, error):
    """Log a message about an upgrade that is not the instance's."""
    if isinstance(error, exception.UpgradeNotFoundError):
        LOG.warning('The agent of instance %(instance)s sent a message '
                    'about unknown upgrade %(id)s; ignored.',
                    {'instance': instance_id, 'id': upgrade_id})
    else:
        LOG.warning('The agent of instance %(instance)s sent a message '
                    'about upgrade %(id)s, which belongs to instance '
                    '%(owner)s; ignored.',
                    {'instance': instance_id, 'id': upgrade_id,
                     'owner': error.kwargs['owner']})


def _refuse_malformed_id(instance_id, upgrade_id, answer):
    """Log and answer a message whose upgrade id no upgrade can have.

    Refused before the database, whose drivers fail on ids that are not
    strings (or hold a lone surrogate) instead of finding nothing.
    """
    LOG.warning('The agent of instance %(instance)s sent a message about '
                'upgrade %(id)s, which is not an upgrade id; ignored.',
                {'instance': instance_id,
                 'id': package_exc.quoted(upgrade_id)})
    return answer


def _version_values(from_version):
    return {'from_version': from_version} if from_version else {}


def claim_upgrade(context, instance_id, upgrade_id, from_version,
                  memory=None, writer=None):
    """The agent's claim before it starts an upgrade's work.

    Moves the upgrade to DOWNLOADING unless it was cancelled, ended or
    claimed by another instance's agent meanwhile. A repeated claim (the
    agent retrying a call whose answer it lost) is granted again. The
    claimed upgrade is remembered in ``memory`` (see
    ``services.upgrade_memory.UpgradeMemory``) for the reports that follow.
    With ``writer`` (``conductor.report_writer``) its transaction may hold
    other agents' claims and reports too.

    :returns: ``{'proceed': bool, 'status': str or None, 'reason': str or
        None}``
    """
    if not uuidutils.is_uuid_like(upgrade_id):
        return _refuse_malformed_id(instance_id, upgrade_id, {
            'proceed': False, 'status': None,
            'reason': 'Upgrade ids are UUIDs, not %s.'
                      % package_exc.quoted(upgrade_id)})
    try:
        changed, upgrade = db_transitions.transition_upgrade(
            context, upgrade_id, states.DOWNLOADING, 'agent',
            allowed_from=CLAIMABLE_STATES,
            values=_version_values(from_version), instance_id=instance_id,
            memory=memory, writer=writer)
    except (exception.UpgradeNotFoundError,
            exception.UpgradeOfAnotherInstanceError) as e:
        _log_foreign(instance_id, upgrade_id, e)
        return {'proceed': False, 'status': None,
                'reason': 'Upgrade %s is not an upgrade of instance %s.'
                          % (upgrade_id, instance_id)}
    except exception.InvalidStateTransitionError as e:
        status = e.kwargs['from_state']
        LOG.info('Upgrade %(id)s is %(status)s: its agent will not start '
                 'it.', {'id': upgrade_id, 'status': status})
        return {'proceed': False, 'status': status,
                'reason': 'Upgrade %s is %s.' % (upgrade_id, status)}
    if changed:
        notifications.notify_upgrade(context, notifications.START, upgrade)
    return {'proceed': True, 'status': upgrade['status'], 'reason': None}


def record_report(context, instance_id, upgrade_id, to_state, detail,
                  from_version, to_version, source='agent', memory=None):
    """Record a state an agent reported, when it is news and legal.

    Never raises for a bad report: reports arrive by cast, nobody waits for
    an answer, and a bad one must change nothing. With ``memory`` (see
    ``services.upgrade_memory.UpgradeMemory``) a report it shows to be a
    duplicate or stale is answered without the database, with the status
    remembered.

    :returns: ``{'recorded': bool, 'status': the recorded status or None,
        'reason': None, DUPLICATE, STALE, ILLEGAL or REJECTED}``
    """
    [answer] = record_reports(context, instance_id, [{
        'upgrade_id': upgrade_id, 'to_state': to_state, 'detail': detail,
        'from_version': from_version, 'to_version': to_version}],
        source=source, memory=memory)
    return answer


def record_reports(context, instance_id, reports, source='agent',
                   memory=None, writer=None):
    """Record reports in order; answer each as ``record_report`` does.

    ``reports`` are dicts of ``record_report``'s arguments. Each run of
    reports of one upgrade is recorded in one transaction
    (``db.transitions.transition_upgrade_chain``), each report decided from
    the state the ones before it left, so that an agent's message of
    several reports costs one transaction, not one per report. With
    ``writer`` (``conductor.report_writer``) that transaction may hold
    other agents' reports too.
    """
    answers = [None] * len(reports)
    run = []

    def record_run():
        moves = [(reports[i]['to_state'], _described(reports[i]),
                  _version_values(reports[i]['from_version'])) for i in run]
        upgrade_id = reports[run[0]]['upgrade_id']
        outcomes = db_transitions.transition_upgrade_chain(
            context, upgrade_id, moves, source, instance_id=instance_id,
            memory=memory, writer=writer)
        for index, outcome in zip(run, outcomes):
            answers[index] = _answer(context, instance_id, upgrade_id,
                                     reports[index]['to_state'], outcome)
        del run[:]

    for index, report in enumerate(reports):
        answers[index] = _refusal(instance_id, report)
        if answers[index] is not None:
            continue
        if run and reports[run[0]]['upgrade_id'] != report['upgrade_id']:
            record_run()
        run.append(index)
    if run:
        record_run()
    return answers


def _refusal(instance_id, report):
    """The answer to a report no upgrade can take, or None."""
    upgrade_id, to_state = report['upgrade_id'], report['to_state']
    if not uuidutils.is_uuid_like(upgrade_id):
        return _refuse_malformed_id(instance_id, upgrade_id, {
            'recorded': False, 'status': None, 'reason': REJECTED})
    if not isinstance(to_state, str) or to_state not in AGENT_STATES:
        LOG.warning('The agent of instance %(instance)s reported state '
                    '%(state)s for upgrade %(id)s, which agents do not '
                    'report; ignored.',
                    {'instance': instance_id,
                     'state': package_exc.quoted(to_state),
                     'id': upgrade_id})
        return {'recorded': False, 'status': None, 'reason': REJECTED}
    return None


def _described(report):
    """The event's detail: a function of the upgrade as recorded."""
    def described(upgrade):
        to_version = report['to_version']
        if to_version and to_version != upgrade['instance_version']:
            return '%s (the agent reports version %s, not %s)' % (
                report['detail'] or report['to_state'], to_version,
                upgrade['instance_version'])
        return report['detail']
    return described


def _answer(context, instance_id, upgrade_id, to_state, outcome):
    """Log, announce and answer one report's outcome."""
    if isinstance(outcome, (exception.UpgradeNotFoundError,
                            exception.UpgradeOfAnotherInstanceError)):
        _log_foreign(instance_id, upgrade_id, outcome)
        return {'recorded': False, 'status': None, 'reason': REJECTED}
    if isinstance(outcome, exception.InvalidStateTransitionError):
        LOG.warning('Ignored report of instance %(instance)s: %(error)s',
                    {'instance': instance_id, 'error': outcome})
        return {'recorded': False, 'status': outcome.kwargs['from_state'],
                'reason': ILLEGAL}
    if isinstance(outcome, exception.InvalidInputError):
        LOG.warning('Ignored report of instance %(instance)s about upgrade '
                    '%(id)s: %(error)s',
                    {'instance': instance_id, 'id': upgrade_id,
                     'error': outcome})
        return {'recorded': False, 'status': None, 'reason': REJECTED}
    changed, upgrade = outcome
    if (to_state == upgrade['status'] == states.DEFERRED
            and upgrade['resend_at'] is not None):
        # The agent has it queued: casting it again would change nothing.
        db_resends.mark_received(context, upgrade_id, instance_id)
    if not changed:
        reason = DUPLICATE if upgrade['status'] == to_state else STALE
        LOG.debug('Ignored %(reason)s report %(state)s of upgrade %(id)s, '
                  'which is %(status)s.',
                  {'reason': reason, 'state': to_state, 'id': upgrade_id,
                   'status': upgrade['status']})
        return {'recorded': False, 'status': upgrade['status'],
                'reason': reason}
    notifications.notify_final_state(context, upgrade)
    return {'recorded': True, 'status': upgrade['status'], 'reason': None}


def time_out_upgrades(context):
    """Mark unfinished upgrades past the timeout TIMED_OUT; return them.

    The timeout is ``[conductor] upgrade_timeout``, counted from creation.
    """
    created_before = timeutils.utcnow() - datetime.timedelta(
        seconds=CONF.conductor.upgrade_timeout)
    timed_out = db_transitions.timeout_upgrades(context, created_before)
    for upgrade in timed_out:
        LOG.warning('Upgrade %(id)s of instance %(instance)s timed out.',
                    {'id': upgrade['id'], 'instance': upgrade['instance_id']})
        notifications.notify_final_state(context, upgrade)
    return timed_out
