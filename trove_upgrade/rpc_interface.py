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

"""What both ends of the agent's and the conductor's RPC APIs agree on.

The topics, and for each method the arguments it carries, declared once:
the clients send exactly those, the servers' endpoints must take exactly
those (checked when their module is imported) and both sides seal and
open exactly those (``trove_upgrade.sealing``). Adding an argument is an
edit of :data:`AGENT` or :data:`CONDUCTOR` here, and of the endpoint's
signature, which the check then demands.

The guest-side agent imports this module, so it must never import
control-plane code (the database layer, the key store).
"""

import inspect

from trove_upgrade import rpc

AGENT_TOPIC_PREFIX = 'guestagent_upgrade'

# The label in which an agent reports its instance's availability zone,
# and which a selector's ``availability_zone`` matches.
AVAILABILITY_ZONE_LABEL = 'availability_zone'

# Parameters of an endpoint that are not arguments of the message.
_ENDPOINT_ONLY = ('self', 'context', 'sealed')


def agent_topic(instance_id):
    """The topic on which ``instance_id``'s upgrade agent listens.

    Prefixed with the control exchange unless it is the default
    (``rpc.scoped_topic``).
    """
    return rpc.scoped_topic('%s.%s' % (AGENT_TOPIC_PREFIX, instance_id))


class Interface:
    """The methods of one RPC API: ``{name: (kinds, argument names)}``.

    ``kinds`` is ``'call'``, ``'cast'`` or a tuple of both, the default
    first.
    """

    def __init__(self, name, methods):
        self.name = name
        self.methods = methods
        # The endpoint functions checked so far, by method name.
        self.served = {}

    def kinds(self, method):
        """How a ``method`` message may go: ``'call'``, ``'cast'`` or both.

        The first is the one a client sends unless it chooses the other.
        """
        kinds = self.methods[method][0]
        return kinds if isinstance(kinds, tuple) else (kinds,)

    def kind(self, method):
        """How a ``method`` message goes by default: the first of its kinds."""
        return self.kinds(method)[0]

    def arguments(self, method):
        """The names of the arguments a ``method`` message carries."""
        return self.methods[method][1]

    def message(self, method, values):
        """The arguments of a ``method`` message, taken from ``values``.

        ``values`` maps at least every argument name to its value (the
        caller's ``locals()``, say); the result is what is sent and
        sealed, so both ends compute the same dict.
        """
        return {name: values[name] for name in self.arguments(method)}

    def endpoint(self, func):
        """Declare ``func`` the server side of its method; checked now.

        Applied to the function itself, below any other decorator, so
        that its own signature is checked.

        :raises: TypeError at import when the endpoint's parameters
            (besides ``self``, ``context`` and ``sealed``) are not the
            declared arguments, in order.
        """
        taken = tuple(name for name in inspect.signature(func).parameters
                      if name not in _ENDPOINT_ONLY)
        declared = self.arguments(func.__name__)
        if taken != declared:
            raise TypeError('%s endpoint %s takes %s but its messages carry '
                            '%s' % (self.name, func.__name__,
                                    ', '.join(taken), ', '.join(declared)))
        self.served[func.__name__] = func
        return func


_AGENT_FIELDS = ('instance_id', 'agent_version', 'guest_version',
                 'rpc_api_version', 'state', 'labels', 'host')

# What one state report carries besides the instance id: the arguments of
# ``report_upgrade_state``, and the keys of each report of
# ``report_upgrade_states``.
REPORT_FIELDS = ('upgrade_id', 'to_state', 'detail', 'from_version',
                 'to_version')

# The most labels an agent reports, and the longest key or value: a
# selector's own bounds (api/schemas/rollouts.py) are 16 labels of 255.
MAX_LABELS = 64
MAX_LABEL_LENGTH = 255

# An upgrade's metadata: a flat object of at most so many keys of at most
# so many characters, each value a string of at most so many, a number, a
# boolean or null (api/schemas/upgrades.py; the agent checks it again).
MAX_METADATA_ITEMS = 64
MAX_METADATA_KEY_LENGTH = 255
MAX_METADATA_VALUE_LENGTH = 1024

# The most reports one ``report_upgrade_states`` call carries: an agent's
# outbox sends more in several calls, a conductor refuses more.
MAX_REPORTS_PER_CALL = 50

# The upgrade agent's API: the control plane sends, the agent serves.
AGENT = Interface('agent', {
    'upgrade': ('cast', ('upgrade_id', 'instance_id', 'instance_version',
                         'strategy', 'location', 'metadata',
                         'allow_downgrade')),
})

# The conductor's API: agents send, the conductors serve. Progress reports
# may go by cast (``agent.outbox``): the conductor records them the same
# way and the answer nobody waits for is dropped.
CONDUCTOR = Interface('conductor', {
    'register_agent': ('call', _AGENT_FIELDS),
    'heartbeat': ('cast', _AGENT_FIELDS),
    'start_upgrade': ('call', ('instance_id', 'upgrade_id', 'from_version')),
    'report_upgrade_state': ('call', ('instance_id',) + REPORT_FIELDS),
    'report_upgrade_states': (('call', 'cast'), ('instance_id', 'reports')),
})
