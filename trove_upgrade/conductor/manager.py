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

"""The conductor's RPC endpoint: what the agents' messages do.

Registrations and heartbeats go to the ``agents`` table; claims and state
reports go through ``trove_upgrade.services.upgrades``, which holds the
rules. The manager only checks what crosses the wire before handing it on.

From version 1.1 every message may carry a seal
(``trove_upgrade.common.sealing``).
The messages of an instance that has a key must be sealed with it, and with
``[conductor] require_sealed`` those of every instance: anything else is
refused and logged with the instance id (at most ``refusal_log``'s number
of lines a minute), so that nobody else on the bus can register,
heartbeat, claim or report in an agent's name. What can be refused
without the instance's keys (no seal where one is required, a malformed
or stale seal, one for another instance) is refused before they are
looked up: a forged message costs no read of the database. The ids of
accepted messages are kept in this process's memory for
``[conductor] seal_max_age`` seconds; with several conductors, a genuine
message replayed to another conductor within that time is accepted once
more, which changes nothing: registrations and heartbeats are upserts and
claims and reports of a state already recorded are ignored.

From version 1.3 the answer to a sealed call is sealed with the call's key
and bound to its message id (``sealing.seal_reply``), so that nobody else
on the bus can answer an agent in a conductor's name: an answer holding
only ``sealed_reply``. A sealed message takes the arguments of the version
its seal names (``rpc_interface``), and is refused when it carries one
that version does not have.

From version 1.4 an agent asks for Trove's view of its restarted guest
agent (``trove_health``, answered by ``services.trove_health``).
"""

import threading

from oslo_log import log as logging
import oslo_messaging as messaging
from oslo_utils import uuidutils

from trove_upgrade.common import exception
from trove_upgrade.common import exception as package_exc
from trove_upgrade.common import rpc_interface
from trove_upgrade.common import sealing
from trove_upgrade.conductor import db_outage
from trove_upgrade.conductor import heartbeats
from trove_upgrade.conductor import refusal_log
from trove_upgrade.conductor import report_writer
from trove_upgrade import conf
from trove_upgrade.db import agents as db_agents
from trove_upgrade.services import sealing_keys
from trove_upgrade.services import trove_health
from trove_upgrade.services import upgrade_memory
from trove_upgrade.services import upgrades

CONF = conf.CONF

LOG = logging.getLogger(__name__)

RPC_API_VERSION = '1.4'

# What the endpoints that answer refuse with: sent back to the caller as
# itself, and logged by oslo.messaging without a traceback.
_REFUSALS = (
    exception.InvalidInputError, exception.MessageNotAuthenticatedError,
    exception.DatabaseUnavailableError)

# Locks that serialize the reports of one instance (by hash of its id).
_REPORT_LOCKS = 64


def _check_instance_id(instance_id):
    if not uuidutils.is_uuid_like(instance_id):
        raise exception.InvalidInputError(
            reason='instance_id must be a UUID, not %s'
            % package_exc.quoted(instance_id))


def _check_reports(reports):
    """Refuse a ``report_upgrade_states`` list that is not one.

    The values themselves are ``upgrades.record_reports``' to judge; here
    only that each report is a dict of the declared fields, with strings
    where ids and states go, so that none can break the loop over them.
    """
    if not isinstance(reports, list) or not (
            1 <= len(reports) <= rpc_interface.MAX_REPORTS_PER_CALL):
        raise exception.InvalidInputError(
            reason='reports must be a list of 1 to %d reports'
            % rpc_interface.MAX_REPORTS_PER_CALL)
    for report in reports:
        if not isinstance(report, dict) or set(report) != set(
                rpc_interface.REPORT_FIELDS):
            raise exception.InvalidInputError(
                reason='each report has exactly the fields %s'
                % ', '.join(rpc_interface.REPORT_FIELDS))
        if not all(isinstance(report[name], str)
                   for name in ('upgrade_id', 'to_state')) or not all(
                report[name] is None or isinstance(report[name], str)
                for name in ('detail', 'from_version', 'to_version')):
            raise exception.InvalidInputError(
                reason='a report\'s upgrade_id and to_state are strings, '
                       'its detail and versions strings or null')


def _agent_values(agent_version, guest_version, rpc_api_version, state,
                  labels, host):
    return {'agent_version': agent_version,
            'guest_version': guest_version,
            'rpc_api_version': rpc_api_version,
            'state': state,
            'labels': labels if labels is not None else {},
            'host': host}


class ConductorManager:
    """Server side of ``common.conductor_rpcapi.ConductorAPI``."""

    RPC_API_VERSION = RPC_API_VERSION

    target = messaging.Target(version=RPC_API_VERSION)

    def __init__(self):
        self.replay_cache = sealing.MemoryReplayCache()
        self.refusals = refusal_log.RateLimitedLog(LOG)
        self.keyrings = sealing_keys.KeyringCache(
            CONF.conductor.instance_key_cache_time)
        self.heartbeats = heartbeats.HeartbeatWrites()
        self.upgrades = upgrade_memory.UpgradeMemory()
        self.reports = report_writer.ReportWriter()
        self._report_locks = [threading.Lock()
                              for _ in range(_REPORT_LOCKS)]

    def _authenticate(self, context, method, values):
        """Refuse a message not sealed as its instance requires.

        ``values`` are the endpoint's arguments (its ``locals()``).

        :returns: the instance's keys when the message was sealed with
            them, else None.
        :raises: MessageNotAuthenticatedError, logged with the instance id;
            MalformedMessageError when the message carries an argument the
            version of its seal does not have.
        """
        sealed = values['sealed']
        instance_id = values['instance_id']
        _check_instance_id(instance_id)
        args = rpc_interface.CONDUCTOR.received(
            method, values, rpc_interface.sealed_version(sealed))
        try:
            # Before the keys are looked up: a forged message must cost
            # no read of the database and no room in the keyring cache.
            # Only an unsealed message without require_sealed needs them
            # to be judged: it passes when the instance has none.
            if sealed is None and CONF.conductor.require_sealed:
                raise sealing.UnsealedError('the %s message is not sealed and '
                                            '[conductor] require_sealed is set'
                                            % method)
            if sealed is not None:
                sealing.check_without_key(sealed, method, instance_id,
                                          CONF.conductor.seal_max_age)
            keys = self.keyrings.get(context, instance_id)
            if keys:
                sealing.open_sealed(keys, sealed, method,
                                    sealing.TO_CONDUCTOR, args,
                                    CONF.conductor.seal_max_age,
                                    self.replay_cache)
            elif sealed is not None:
                raise sealing.UnknownKeyError('the instance has no key')
        except sealing.SealError as e:
            self.refusals.warning('Refused %(method)s message of instance '
                                  '%(instance)s: %(reason)s',
                                  {'method': method, 'instance': instance_id,
                                   'reason': e})
            raise exception.MessageNotAuthenticatedError(
                method=method, instance_id=instance_id, reason=str(e))
        return keys or None

    @staticmethod
    def _answer(keys, method, sealed, result):
        """``result``, sealed for the caller when its call seals replies.

        ``keys`` opened ``sealed``, the call's seal (None: unsealed).
        """
        if keys is None or not rpc_interface.seals_replies(
                sealed['version']):
            return result
        return sealing.seal_reply(keys, method, sealed, result)

    @messaging.expected_exceptions(*_REFUSALS)
    @db_outage.endpoint
    @rpc_interface.CONDUCTOR.endpoint
    def register_agent(self, context, instance_id, agent_version,
                       guest_version, rpc_api_version, state, labels, host,
                       sealed=None):
        """Record an agent's registration; return this RPC API version."""
        keys = self._authenticate(context, 'register_agent', locals())
        values = _agent_values(agent_version, guest_version,
                               rpc_api_version, state, labels, host)
        self.heartbeats.forget(instance_id)
        db_agents.register_agent(context, instance_id, values)
        self.heartbeats.written(instance_id, values)
        LOG.info('Agent of instance %(instance)s registered: agent '
                 '%(agent)s, RPC API %(rpc)s, state %(state)s.',
                 {'instance': instance_id, 'agent': agent_version,
                  'rpc': rpc_api_version, 'state': state})
        return self._answer(keys, 'register_agent', sealed,
                            self.RPC_API_VERSION)

    @messaging.expected_exceptions(exception.DatabaseUnavailableError)
    @db_outage.endpoint
    @rpc_interface.CONDUCTOR.endpoint
    def heartbeat(self, context, instance_id, agent_version, guest_version,
                  rpc_api_version, state, labels, host, sealed=None):
        """Record an agent's heartbeat; a bad one is logged only.

        A heartbeat that brings nothing new is written only when the one
        stored is old enough to matter (``heartbeats``), and then with
        the next batch. One that is not written changes nothing, whoever
        sent it, so it is not authenticated either: that read of the
        instance's keys cost more than the write it saves. Every
        heartbeat that is written is authenticated first.
        """
        values = _agent_values(agent_version, guest_version,
                               rpc_api_version, state, labels, host)
        if not self.heartbeats.needs_write(instance_id, values):
            return
        try:
            self._authenticate(context, 'heartbeat', locals())
            if self.heartbeats.is_unchanged(instance_id, values):
                self.heartbeats.queue(instance_id, values)
                return
            # Forgotten first: a failed write must not count as done.
            self.heartbeats.forget(instance_id)
            db_agents.register_agent(context, instance_id, values)
            self.heartbeats.written(instance_id, values)
        except (exception.InvalidInputError,
                exception.MessageNotAuthenticatedError) as e:
            LOG.warning('Ignored heartbeat of instance %(instance)s: '
                        '%(error)s', {'instance': package_exc.bounded(
                            instance_id, 64), 'error': e})

    @messaging.expected_exceptions(*_REFUSALS)
    @db_outage.endpoint
    @rpc_interface.CONDUCTOR.endpoint
    def start_upgrade(self, context, instance_id, upgrade_id, from_version,
                      sealed=None):
        """An agent's claim of an upgrade; see ``upgrades.claim_upgrade``."""
        keys = self._authenticate(context, 'start_upgrade', locals())
        return self._answer(keys, 'start_upgrade', sealed,
                            upgrades.claim_upgrade(
                                context, instance_id, upgrade_id,
                                from_version, memory=self.upgrades,
                                writer=self.reports))

    @messaging.expected_exceptions(*_REFUSALS)
    @db_outage.endpoint
    @rpc_interface.CONDUCTOR.endpoint
    def report_upgrade_state(self, context, instance_id, upgrade_id,
                             to_state, detail, from_version, to_version,
                             sealed=None):
        """An agent's state report; see ``upgrades.record_report``."""
        keys = self._authenticate(context, 'report_upgrade_state', locals())
        return self._answer(keys, 'report_upgrade_state', sealed,
                            upgrades.record_report(
                                context, instance_id, upgrade_id, to_state,
                                detail, from_version, to_version,
                                memory=self.upgrades))

    @messaging.expected_exceptions(*_REFUSALS)
    @db_outage.endpoint
    @rpc_interface.CONDUCTOR.endpoint
    def report_upgrade_states(self, context, instance_id, reports,
                              sealed=None):
        """Several state reports, recorded in order (1.2).

        One seal covers them all. Each is recorded as
        ``report_upgrade_state`` records it, and answered with its outcome;
        those of one upgrade in one transaction.
        Also cast by the agents' outboxes, each message with the reports
        before it again (``agent.outbox``): the messages of one instance
        are recorded one at a time, so that the later ones find the
        earlier reports in ``self.upgrades`` and answer them without the
        database, rather than racing them to the same compare-and-swap
        on several threads and losing. Several instances' reports that
        arrive together share one transaction (``report_writer``).
        """
        _check_reports(reports)
        keys = self._authenticate(context, 'report_upgrade_states',
                                  locals())
        lock = self._report_locks[hash(instance_id) % _REPORT_LOCKS]
        with lock:
            outcomes = upgrades.record_reports(context, instance_id, reports,
                                               memory=self.upgrades,
                                               writer=self.reports)
        return self._answer(keys, 'report_upgrade_states', sealed, outcomes)

    @messaging.expected_exceptions(*_REFUSALS)
    @db_outage.endpoint
    @rpc_interface.CONDUCTOR.endpoint
    def trove_health(self, context, instance_id, upgrade_id, before, since,
                     sealed=None):
        """Trove's status of the instance and the gate's verdict (1.4)."""
        keys = self._authenticate(context, 'trove_health', locals())
        if not uuidutils.is_uuid_like(upgrade_id):
            raise exception.InvalidInputError(
                reason='upgrade_id must be a UUID, not %s'
                % package_exc.quoted(upgrade_id))
        for name, value in (('before', before), ('since', since)):
            if value is not None and not (isinstance(value, str)
                                          and len(value) <= 64):
                raise exception.InvalidInputError(
                    reason='%s must be null or a string of at most 64 '
                           'characters' % name)
        answer = trove_health.verdict(instance_id, before, since)
        LOG.debug('Trove health of instance %(instance)s for upgrade '
                  '%(upgrade)s: %(answer)s', {'instance': instance_id,
                                              'upgrade': upgrade_id,
                                              'answer': answer})
        return self._answer(keys, 'trove_health', sealed, answer)
