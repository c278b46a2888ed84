"""The conductor's RPC endpoint: what the agents' messages do.

Registrations and heartbeats go to the ``agents`` table; claims and state
reports go through ``trove_upgrade.upgrades``, which holds the rules. The
manager only checks what crosses the wire before handing it on.
"""

from oslo_log import log as logging
import oslo_messaging as messaging
from oslo_utils import uuidutils

from trove_upgrade.db import api as db_api
from trove_upgrade import exception
from trove_upgrade import upgrades

LOG = logging.getLogger(__name__)

RPC_API_VERSION = '1.0'


def _check_instance_id(instance_id):
    if not uuidutils.is_uuid_like(instance_id):
        raise exception.Invalid(
            reason='instance_id must be a UUID, not %r' % (instance_id,))


def _agent_values(agent_version, guest_version, rpc_api_version, state,
                  labels, host):
    return {'agent_version': agent_version,
            'guest_version': guest_version,
            'rpc_api_version': rpc_api_version,
            'state': state,
            'labels': labels if labels is not None else {},
            'host': host}


class ConductorManager:
    """Server side of ``trove_upgrade.conductor.rpcapi.ConductorAPI``."""

    RPC_API_VERSION = RPC_API_VERSION

    target = messaging.Target(version=RPC_API_VERSION)

    @messaging.expected_exceptions(exception.Invalid)
    def register_agent(self, context, instance_id, agent_version,
                       guest_version, rpc_api_version, state, labels, host):
        """Record an agent's registration; return this RPC API version."""
        _check_instance_id(instance_id)
        db_api.register_agent(context, instance_id, _agent_values(
            agent_version, guest_version, rpc_api_version, state, labels,
            host))
        LOG.info('Agent of instance %(instance)s registered: agent '
                 '%(agent)s, RPC API %(rpc)s, state %(state)s.',
                 {'instance': instance_id, 'agent': agent_version,
                  'rpc': rpc_api_version, 'state': state})
        return self.RPC_API_VERSION

    def heartbeat(self, context, instance_id, agent_version, guest_version,
                  rpc_api_version, state, labels, host):
        """Record an agent's heartbeat; a malformed one is logged only."""
        try:
            _check_instance_id(instance_id)
            db_api.register_agent(context, instance_id, _agent_values(
                agent_version, guest_version, rpc_api_version, state,
                labels, host))
        except exception.Invalid as e:
            LOG.warning('Ignored heartbeat of instance %(instance)s: '
                        '%(error)s', {'instance': instance_id, 'error': e})

    @messaging.expected_exceptions(exception.Invalid)
    def start_upgrade(self, context, instance_id, upgrade_id, from_version):
        """An agent's claim of an upgrade; see ``upgrades.claim_upgrade``."""
        return upgrades.claim_upgrade(context, instance_id, upgrade_id,
                                      from_version)

    def report_upgrade_state(self, context, instance_id, upgrade_id,
                             to_state, detail, from_version, to_version):
        """An agent's state report; see ``upgrades.record_report``."""
        return upgrades.record_report(context, instance_id, upgrade_id,
                                      to_state, detail, from_version,
                                      to_version)
