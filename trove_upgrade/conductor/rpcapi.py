"""Client side of the conductor's RPC API.

The guest-side upgrade agents use :class:`ConductorAPI` to register,
heartbeat, claim an upgrade before they start it and report each state it
reaches. All conductors listen on :func:`topic` and share its
messages. ``[upgrade_levels] conductor`` caps the version the agents send
while the conductors run an older release than the agents; the cap and
``can_send_version`` work as described in ``trove_upgrade.agent.rpcapi``.

An agent that holds its instance's keys seals every message with them
(version 1.1), so that nobody else on the bus can register, heartbeat,
claim or report in its name.
"""

import oslo_messaging as messaging

from trove_upgrade import conf
from trove_upgrade import release_mappings
from trove_upgrade import rpc
from trove_upgrade import sealing

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
    |       with the instance's key (``trove_upgrade.sealing``).
    """

    RPC_API_VERSION = '1.1'

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

    def _send(self, context, kind, method, **kwargs):
        """Cast or call ``method``, sealed at 1.1 when keys are held.

        A conductor capped below 1.1 does not know seals and gets the
        message unsealed, as before this version.
        """
        version = '1.1'
        if self.keyring and self.client.can_send_version(version):
            kwargs['sealed'] = sealing.seal(self.keyring, method, version,
                                            sealing.TO_CONDUCTOR, kwargs)
        else:
            version = '1.0'
        cctxt = self.client.prepare(version=version)
        return getattr(cctxt, kind)(context, method, **kwargs)

    def register_agent(self, context, instance_id, agent_version,
                       guest_version, rpc_api_version, state, labels, host):
        """Register the agent of ``instance_id`` (call).

        :returns: the conductor's RPC API version, the highest the agent may
            send to it.
        :raises: trove_upgrade.exception.Invalid when a field is malformed.
        """
        return self._send(context, 'call', 'register_agent',
                          instance_id=instance_id,
                          agent_version=agent_version,
                          guest_version=guest_version,
                          rpc_api_version=rpc_api_version,
                          state=state, labels=labels, host=host)

    def heartbeat(self, context, instance_id, agent_version, guest_version,
                  rpc_api_version, state, labels, host):
        """Tell the conductor the agent is alive and what it runs (cast)."""
        self._send(context, 'cast', 'heartbeat',
                   instance_id=instance_id,
                   agent_version=agent_version,
                   guest_version=guest_version,
                   rpc_api_version=rpc_api_version,
                   state=state, labels=labels, host=host)

    def start_upgrade(self, context, instance_id, upgrade_id, from_version):
        """Claim an upgrade before starting its work (call).

        The conductor moves the upgrade to DOWNLOADING only while nobody
        cancelled it; the answer tells the agent whether to go on.

        :returns: ``{'proceed': bool, 'status': <recorded status or None>,
            'reason': <why not, or None>}``
        """
        return self._send(context, 'call', 'start_upgrade',
                          instance_id=instance_id, upgrade_id=upgrade_id,
                          from_version=from_version)

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
        return self._send(context, 'call', 'report_upgrade_state',
                          instance_id=instance_id, upgrade_id=upgrade_id,
                          to_state=to_state, detail=detail,
                          from_version=from_version, to_version=to_version)
