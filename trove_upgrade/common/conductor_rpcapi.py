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

"""Client side of the conductor's RPC API.

The guest-side upgrade agents use :class:`ConductorAPI` to register,
heartbeat, claim an upgrade before they start it and report each state it
reaches. All conductors listen on :func:`topic` and share its
messages. ``[upgrade_levels] conductor`` caps the version the agents send
while the conductors run an older release than the agents; the cap and
``can_send_version`` work as described in
``trove_upgrade.services.agent_rpcapi``.

An agent that holds its instance's keys seals every message with them
(version 1.1), so that nobody else on the bus can register, heartbeat,
claim or report in its name. From version 1.3 it calls expecting the
answer sealed with its key and bound to the call (``sealing.open_reply``),
so that nobody else on the bus can answer in a conductor's name; an
answer that does not open raises ReplyNotAuthenticatedError.
"""

import oslo_messaging as messaging

from trove_upgrade.common import exception
from trove_upgrade.common import release_mappings
from trove_upgrade.common import rpc
from trove_upgrade.common import rpc_interface
from trove_upgrade.common import sealing
from trove_upgrade import conf

CONF = conf.CONF

DEFAULT_TOPIC = 'trove_upgrade_conductor'


def topic():
    """The conductors' topic: ``[conductor] topic``, or the default one.

    The default is scoped by the control exchange (``rpc.scoped_topic``),
    so that two deployments on one RabbitMQ vhost stay apart.
    """
    return CONF.conductor.topic or rpc.scoped_topic(DEFAULT_TOPIC)


class ConductorAPI:
    """Client side of the conductor's RPC API.

    API version history:

    | 1.0 - Initial version: register_agent(), heartbeat(), start_upgrade(),
    |       report_upgrade_state().
    | 1.1 - Every method takes ``sealed``, the seal of its arguments made
    |       with the instance's key (``trove_upgrade.common.sealing``).
    | 1.2 - report_upgrade_states(): several reports of one instance in
    |       one call, recorded in order. Also sent by cast
    |       (cast_upgrade_states()), which the conductor of 1.2 takes as
    |       it takes the call.
    | 1.3 - The answer to a sealed call is sealed with the call's key and
    |       bound to its message id (``sealing.seal_reply``); casts stay
    |       at 1.2, having no answer.
    | 1.4 - trove_health(): Trove's status of the instance and, given a
    |       marker, the verdict on the heartbeats Trove recorded since.
    """

    RPC_API_VERSION = '1.4'

    def __init__(self, keyring=None):
        """``keyring``: the instance's keys; None sends unsealed."""
        self.keyring = keyring
        version_cap = release_mappings.resolve_version_cap(
            'conductor', CONF.upgrade_levels.conductor)
        target = messaging.Target(topic=topic(),
                                  version=self.RPC_API_VERSION)
        # Mandatory: right after a broker restart, before the conductors
        # declare their queue again, a report fails at once and the
        # agent's outbox resends it, rather than RabbitMQ dropping it.
        self.client = rpc.get_rpc_client(target, version_cap=version_cap,
                                         mandatory=True)

    def _version(self, method, kind):
        """The version of a ``method`` message sent by ``kind``.

        Sealed (1.1 or later) when keys are held and the cap allows it; a
        call at 1.3, whose answer comes sealed, when the cap allows that
        too; never below the method's first version.
        """
        since = rpc_interface.CONDUCTOR.methods[method].since
        candidates = ['1.0']
        if self.keyring:
            candidates.append('1.1')
            if kind == 'call':
                candidates.append(rpc_interface.CONDUCTOR_SEALED_REPLIES)
        version = since
        for candidate in candidates:
            if (release_mappings.version_key(candidate)
                    > release_mappings.version_key(version)
                    and self.client.can_send_version(candidate)):
                version = candidate
        return version

    def _send(self, context, method, values, kind=None):
        """Cast or call ``method``, sealed from 1.1 when keys are held.

        The message carries the arguments ``rpc_interface.CONDUCTOR``
        declares for the version sent, taken from ``values``. A method of
        1.0 goes to a conductor capped below 1.1, which does not know
        seals, unsealed, as before that version. ``kind``, one of the
        method's declared kinds, overrides its default one.
        """
        if kind is None:
            kind = rpc_interface.CONDUCTOR.kind(method)
        elif kind not in rpc_interface.CONDUCTOR.kinds(method):
            raise ValueError('%s is not sent by %s' % (method, kind))
        version = self._version(method, kind)
        kwargs = rpc_interface.CONDUCTOR.message(method, values, version)
        sealed = None
        if self.keyring and version != '1.0':
            sealed = sealing.seal(self.keyring, method, version,
                                  sealing.TO_CONDUCTOR, kwargs)
            kwargs['sealed'] = sealed
        cctxt = self.client.prepare(version=version)
        try:
            answer = getattr(cctxt, kind)(context, method, **kwargs)
        except exception.TroveUpgradeError as e:
            raise rpc.without_remote_traceback(e) from None
        if kind == 'call' and sealed is not None and (
                rpc_interface.seals_replies(version)):
            try:
                return sealing.open_reply(self.keyring, method, sealed,
                                          answer)
            except sealing.SealError as e:
                raise exception.ReplyNotAuthenticatedError(
                    method=method, instance_id=self.keyring.instance_id,
                    reason='%s: %s' % (type(e).__name__, e)) from None
        return answer

    def register_agent(self, context, instance_id, agent_version,
                       guest_version, rpc_api_version, state, labels, host):
        """Register the agent of ``instance_id`` (call).

        :returns: the conductor's RPC API version, the highest the agent may
            send to it.
        :raises: trove_upgrade.common.exception.InvalidInputError when a field
        is
            malformed.
        """
        return self._send(context, 'register_agent', locals())

    def heartbeat(self, context, instance_id, agent_version, guest_version,
                  rpc_api_version, state, labels, host):
        """Tell the conductor the agent is alive and what it runs (cast)."""
        self._send(context, 'heartbeat', locals())

    def start_upgrade(self, context, instance_id, upgrade_id, from_version):
        """Claim an upgrade before starting its work (call).

        The conductor moves the upgrade to DOWNLOADING only while nobody
        cancelled it; the answer tells the agent whether to go on.

        :returns: ``{'proceed': bool, 'status': <recorded status or None>,
            'reason': <why not, or None>}``
        """
        return self._send(context, 'start_upgrade', locals())

    def report_upgrade_state(self, context, instance_id, upgrade_id,
                             to_state, detail, from_version, to_version):
        """Report a state the upgrade reached (call).

        DEFERRED (the agent is busy and will start later), each stage from
        VERIFYING on, and the final SUCCESS, FAILED or ROLLED_BACK all go
        through here. A call, not a cast: its answer tells the agent's
        outbox that the conductor has handled the report, so the outbox
        drops it only then and sends the next one only after it. Casts
        handled by several conductor threads at once could be recorded out
        of order, the later stage first and the earlier one then ignored as
        stale. Resending a report is harmless: the conductor ignores
        duplicate and stale ones.

        :returns: ``{'recorded': bool, 'status': ..., 'reason': ...}``, the
            outcome the conductor recorded (see ``upgrades.record_report``).
        """
        return self._send(context, 'report_upgrade_state', locals())

    def reports_per_call(self):
        """How many reports one :meth:`report_upgrade_states` call sends.

        One to a conductor capped below 1.2, which takes them one by one.
        """
        if self.client.can_send_version('1.2'):
            return rpc_interface.MAX_REPORTS_PER_CALL
        return 1

    def report_upgrade_states(self, context, instance_id, reports):
        """Report several states, recorded in this order (call, 1.2).

        ``reports`` are dicts of ``rpc_interface.REPORT_FIELDS``, at most
        :meth:`reports_per_call` of them: one call answers for them all,
        so the outbox's reports cost the conductor one message, not one
        each. A conductor capped below 1.2 gets one
        :meth:`report_upgrade_state` call per report instead; when one of
        them fails, the ones before it were delivered, and resending them
        is harmless.

        :returns: the outcome of each report, in order (see
            :meth:`report_upgrade_state`).
        """
        if not self.client.can_send_version('1.2'):
            return [self.report_upgrade_state(context, instance_id,
                                              **report)
                    for report in reports]
        return self._send(context, 'report_upgrade_states', locals())

    def cast_upgrade_states(self, context, instance_id, reports):
        """Send :meth:`report_upgrade_states`'s message by cast (1.2).

        For reports of progress, which the agent's outbox keeps until a
        call confirms them (``agent.outbox``): the conductor records them
        as it records the call's and drops the answer, and a cast costs
        it about half what a call does. A conductor capped below 1.2 has
        no such message: RPCVersionCapError.
        """
        self._send(context, 'report_upgrade_states',
                   dict(instance_id=instance_id, reports=reports),
                   kind='cast')

    def can_ask_trove_health(self):
        """Whether the cap lets :meth:`trove_health` be sent (1.4)."""
        return self.client.can_send_version(
            rpc_interface.CONDUCTOR_TROVE_HEALTH)

    def trove_health(self, context, instance_id, upgrade_id, before, since):
        """Trove's status of the instance, and its verdict (call, 1.4).

        See ``services.trove_health.verdict``: without ``since`` a
        baseline and a marker, with it the verdict on what Trove recorded
        since the marker, compared with ``before``. A conductor older
        than 1.4 refuses the call (UnsupportedVersion).
        """
        return self._send(context, 'trove_health', locals())
