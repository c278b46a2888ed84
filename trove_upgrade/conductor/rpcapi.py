"""Client side of the conductor's RPC API.

The guest-side upgrade agents use :class:`ConductorAPI` to register,
heartbeat, claim an upgrade before they start it and report each state it
reaches. All conductors listen on ``[conductor] topic`` and share its
messages. ``[upgrade_levels] conductor`` caps the version the agents send
while the conductors run an older release than the agents; the cap and
``can_send_version`` work as described in ``trove_upgrade.agent.rpcapi``.
"""

import oslo_messaging as messaging

from trove_upgrade import conf
from trove_upgrade import release_mappings
from trove_upgrade import rpc

CONF = conf.CONF


class ConductorAPI:
    """Client side of the conductor's RPC API.

    API version history:

    | 1.0 - Initial version: register_agent(), heartbeat(), start_upgrade(),
    |       report_upgrade_state().
    """

    RPC_API_VERSION = '1.0'

    def __init__(self):
        version_cap = release_mappings.resolve_version_cap(
            'conductor', CONF.upgrade_levels.conductor)
        target = messaging.Target(topic=CONF.conductor.topic,
                                  version=self.RPC_API_VERSION)
        self.client = rpc.get_rpc_client(target, version_cap=version_cap)

    def register_agent(self, context, instance_id, agent_version,
                       guest_version, rpc_api_version, state, labels, host):
        """Register the agent of ``instance_id`` (call).

        :returns: the conductor's RPC API version, the highest the agent may
            send to it.
        :raises: trove_upgrade.exception.Invalid when a field is malformed.
        """
        cctxt = self.client.prepare(version='1.0')
        return cctxt.call(context, 'register_agent',
                          instance_id=instance_id,
                          agent_version=agent_version,
                          guest_version=guest_version,
                          rpc_api_version=rpc_api_version,
                          state=state, labels=labels, host=host)

    def heartbeat(self, context, instance_id, agent_version, guest_version,
                  rpc_api_version, state, labels, host):
        """Tell the conductor the agent is alive and what it runs (cast)."""
        cctxt = self.client.prepare(version='1.0')
        cctxt.cast(context, 'heartbeat',
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
        cctxt = self.client.prepare(version='1.0')
        return cctxt.call(context, 'start_upgrade',
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
        cctxt = self.client.prepare(version='1.0')
        return cctxt.call(context, 'report_upgrade_state',
                          instance_id=instance_id, upgrade_id=upgrade_id,
                          to_state=to_state, detail=detail,
                          from_version=from_version, to_version=to_version)
