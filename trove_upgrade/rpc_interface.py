"""What both ends of the upgrade agent's RPC API agree on.

The guest-side agent imports this module and the control plane's client
of the agent (``conductor.agent_rpcapi``) does too, so it must never
import control-plane code (the database layer, the key store): guests do
not load it.
"""

AGENT_TOPIC_PREFIX = 'guestagent_upgrade'


def agent_topic(instance_id):
    """The topic on which ``instance_id``'s upgrade agent listens."""
    return '%s.%s' % (AGENT_TOPIC_PREFIX, instance_id)
