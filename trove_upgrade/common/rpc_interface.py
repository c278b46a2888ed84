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

The topics, and for each method the arguments it carries in each version
of its API, declared once: a client sends exactly the arguments of the
version it sends, the servers' endpoints must take every argument of the
newest version (checked when their module is imported, those added after
the method's first version with a default, which older clients leave in
place) and both sides seal and open exactly the arguments of the version
sent (``trove_upgrade.common.sealing``). Adding an argument is an edit of
:data:`AGENT` or :data:`CONDUCTOR` here (a :class:`Method`'s ``added``),
of the endpoint's signature, which the check then demands, and of the
client's version (doc/source/contributor/rpc-changes.rst).

The guest-side agent imports this module, so it must never import
control-plane code (the database layer, the key store).
"""

import inspect

from trove_upgrade.common import exception
from trove_upgrade.common import release_mappings
from trove_upgrade.common import rpc

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


# The conductor API version from which the answer to a sealed call is
# sealed and bound to it (``sealing.seal_reply``).
CONDUCTOR_SEALED_REPLIES = '1.3'


# The conductor API version that answers ``trove_health``: Trove's own
# view of a restarted guest agent (``services.trove_health``).
CONDUCTOR_TROVE_HEALTH = '1.4'


def _key(version):
    return release_mappings.version_key(version)


def seals_replies(version):
    """Whether a conductor call of ``version`` gets a sealed answer."""
    return _key(version) >= _key(CONDUCTOR_SEALED_REPLIES)


def sealed_version(sealed):
    """The version a received seal names, or None when it names none.

    Only a well-formed one: the seal itself is checked after the
    arguments of its version were taken (``sealing.open_sealed``).
    """
    if isinstance(sealed, dict):
        version = sealed.get('version')
        if isinstance(version, str) and release_mappings.is_version(version):
            return version
    return None


class Method:
    """One RPC method: how it goes and its arguments, version by version.

    ``kinds`` is ``'call'``, ``'cast'`` or a tuple of both, the default
    first. ``arguments`` are those of its first version, ``since``;
    ``added`` maps a later API version to the arguments it added, absent
    from every message of an older version. ``binding`` names added
    arguments that a client must not leave out for an older peer once
    they hold a value (not None): each carries a check the older peer
    could not make, and a message without it would weaken the check
    rather than merely lose a detail.
    """

    def __init__(self, kinds, arguments, since='1.0', added=None,
                 binding=()):
        self.kinds = kinds if isinstance(kinds, tuple) else (kinds,)
        self.since = since
        self.versions = [(since, tuple(arguments))] + sorted(
            ((version, tuple(names))
             for version, names in (added or {}).items()),
            key=lambda item: _key(item[0]))
        self.binding = frozenset(binding)
        unknown = self.binding - set(self.arguments(None)[len(arguments):])
        if unknown:
            raise ValueError('binding arguments %s were not added after %s'
                             % (', '.join(sorted(unknown)), since))

    def arguments(self, version):
        """The arguments of a message of ``version`` (None: the newest).

        Those of the method's first version for any version before it.
        """
        names = ()
        for added_in, added in self.versions:
            if names and version is not None and (
                    _key(added_in) > _key(version)):
                break
            names += added
        return names

    def oldest_version(self, values, floor):
        """The oldest version, ``floor`` at least, carrying ``values``.

        That is, every argument of ``values`` holding a value (not None):
        sent at that version, a message reaches every peer that can read
        it, including those of releases older than this one.
        """
        version = max(floor, self.since, key=_key)
        for added_in, added in self.versions[1:]:
            if any(values.get(name) is not None for name in added):
                version = max(version, added_in, key=_key)
        return version

    def added_since(self, version):
        """The arguments a message of ``version`` does not carry."""
        return self.arguments(None)[len(self.arguments(version)):]


class Interface:
    """The methods of one RPC API: ``{name: Method}``.

    A ``(kinds, arguments)`` tuple stands for a Method of version 1.0
    whose arguments never changed.
    """

    def __init__(self, name, methods):
        self.name = name
        self.methods = {
            method: (declared if isinstance(declared, Method)
                     else Method(*declared))
            for method, declared in methods.items()}
        # The endpoint functions checked so far, by method name.
        self.served = {}

    def kinds(self, method):
        """How a ``method`` message may go: ``'call'``, ``'cast'`` or both.

        The first is the one a client sends unless it chooses the other.
        """
        return self.methods[method].kinds

    def kind(self, method):
        """How a ``method`` message goes by default: the first of its kinds."""
        return self.kinds(method)[0]

    def arguments(self, method, version=None):
        """The arguments a ``method`` message of ``version`` carries.

        None: those of the newest version, which its endpoint takes.
        """
        return self.methods[method].arguments(version)

    def version_to_send(self, method, values, floor, cap):
        """The version of a ``method`` message of ``values``.

        The oldest that carries them (:meth:`Method.oldest_version`), at
        least ``floor``, and not above ``cap`` (None: no cap) unless the
        cap is below ``floor`` too: the client then refuses, or the send
        raises RPCVersionCapError. :meth:`message` of that version leaves
        out what it does not carry, or refuses a binding argument.
        """
        version = self.methods[method].oldest_version(values, floor)
        if cap is None or _key(version) <= _key(cap):
            return version
        return max(cap, floor, key=_key)

    def message(self, method, values, version=None):
        """The arguments of a ``method`` message of ``version``.

        Taken from ``values``, which maps at least every argument name of
        that version to its value (the caller's ``locals()``, say); the
        result is what is sent and sealed, so both ends compute the same
        dict. Arguments added after ``version`` are left out: when one
        of them is binding (:class:`Method`) and holds a value, the
        message is refused instead.

        :raises: ArgumentNeedsNewerVersionError
        """
        declared = self.methods[method]
        for name in declared.added_since(version) if version else ():
            if name in declared.binding and values.get(name) is not None:
                raise exception.ArgumentNeedsNewerVersionError(
                    api=self.name, method=method, argument=name,
                    version=version)
        return {name: values[name]
                for name in declared.arguments(version)}

    def received(self, method, values, version):
        """The arguments a ``method`` message of ``version`` carried.

        ``values`` are the endpoint's arguments; one added after
        ``version`` that holds anything but its default was sent beside
        a message that cannot carry it (nobody sealed it), and refuses
        the message.

        :raises: MalformedMessageError
        """
        self.check_version_arguments(method, version, [
            name for name in self.methods[method].added_since(version)
            if values.get(name) is not None])
        return self.message(method, values, version)

    def check_version_arguments(self, method, version, names):
        """Refuse ``names`` in a ``method`` message of ``version``.

        When one of them was added after ``version``: a server takes an
        argument only from a message whose version has it.

        :raises: MalformedMessageError
        """
        newer = set(self.methods[method].added_since(version))
        unknown = sorted(newer.intersection(names))
        if unknown:
            raise exception.MalformedMessageError(
                method=method, reason='%s came in a message of version %s, '
                'which has no such argument' % (', '.join(unknown), version))

    def endpoint(self, func):
        """Declare ``func`` the server side of its method; checked now.

        Applied to the function itself, below any other decorator, so
        that its own signature is checked.

        :raises: TypeError at import when the endpoint's parameters
            (besides ``self``, ``context`` and ``sealed``) are not the
            declared arguments of the newest version, in order, or one
            added after the method's first version has no default of
            None: older clients do not send it.
        """
        parameters = inspect.signature(func).parameters
        taken = tuple(name for name in parameters
                      if name not in _ENDPOINT_ONLY)
        declared = self.arguments(func.__name__)
        if taken != declared:
            raise TypeError('%s endpoint %s takes %s but its messages carry '
                            '%s' % (self.name, func.__name__,
                                    ', '.join(taken), ', '.join(declared)))
        method = self.methods[func.__name__]
        for name in method.added_since(method.since):
            if parameters[name].default is not None:
                raise TypeError('%s endpoint %s must default %s to None: '
                                'messages older than its version do not '
                                'carry it' % (self.name, func.__name__,
                                              name))
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

# What an upgrade message's ``expected_manifest`` holds: the SHA-256 of
# the manifest file the agent must get (lower-case hex) and the package
# name it must sign, either may be null.
EXPECTED_MANIFEST_FIELDS = ('sha256', 'package')

# What an upgrade installs (``component``, agent API 1.3): Trove's guest
# agent, or trove-upgrade-agent itself (``agent.self_upgrade``). None in a
# message is the guest agent, the only component before 1.3.
GUEST_AGENT = 'guest-agent'
UPGRADE_AGENT = 'upgrade-agent'
COMPONENTS = (GUEST_AGENT, UPGRADE_AGENT)

# The upgrade agent's API: the control plane sends, the agent serves.
# ``expected_manifest`` (1.2) binds the upgrade to one package: an agent
# of 1.1 would install any package of the version, so it is binding.
# ``component`` (1.3) is binding too: an agent of 1.2 would install the
# upgrade agent's package as its guest agent.
AGENT = Interface('agent', {
    'upgrade': Method('cast', ('upgrade_id', 'instance_id',
                               'instance_version', 'strategy', 'location',
                               'metadata', 'allow_downgrade'),
                      added={'1.2': ('expected_manifest',),
                             '1.3': ('component',)},
                      binding=('expected_manifest', 'component')),
})

# The conductor's API: agents send, the conductors serve. Progress reports
# may go by cast (``agent.outbox``): the conductor records them the same
# way and the answer nobody waits for is dropped. ``trove_health`` (1.4)
# asks for Trove's verdict on a restarted guest agent.
CONDUCTOR = Interface('conductor', {
    'register_agent': Method('call', _AGENT_FIELDS),
    'heartbeat': Method('cast', _AGENT_FIELDS),
    'start_upgrade': Method('call', ('instance_id', 'upgrade_id',
                                     'from_version')),
    'report_upgrade_state': Method('call',
                                   ('instance_id',) + REPORT_FIELDS),
    'report_upgrade_states': Method(('call', 'cast'),
                                    ('instance_id', 'reports'),
                                    since='1.2'),
    'trove_health': Method('call', ('instance_id', 'upgrade_id', 'before',
                                    'since'),
                           since=CONDUCTOR_TROVE_HEALTH),
})
