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

"""Client side of the guest-side upgrade agent's RPC API.

It lives on the control plane's side, since it reads the agents' versions
and the instances' keys from the database; what the agent shares with it
(its topic) is in ``trove_upgrade.common.rpc_interface``.

The control plane (the API and anything else that starts an upgrade) uses
:class:`AgentAPI` to send work to the upgrade agent of one instance. Each
instance's agent listens on its own topic, ``guestagent_upgrade.<instance
id>`` (prefixed with ``[DEFAULT] control_exchange`` unless it is the
default ``trove_upgrade``): the upgrade consumer never competes with
Trove's own ``guestagent.<instance id>`` consumer for messages.

Rolling upgrades follow Ironic and Nova. ``[upgrade_levels] agent`` caps the
version this client sends so that agents of an older release still
understand every message; ``auto`` caps to the lowest version the registered
agents reported, read again on every send. A message goes at the oldest
version that carries its arguments (1.1 when sealed), so that it reaches
every agent able to act on it, with the arguments ``rpc_interface.AGENT``
declares for that version; above the cap, at the cap, an argument added
later is left out or, when it is binding and holds a value, the message
is refused (``ArgumentNeedsNewerVersionError``). The steps of a change are in
doc/source/contributor/rpc-changes.rst.
"""

from concurrent import futures
import os
import threading

import oslo_messaging as messaging

from trove_upgrade.common import exception
from trove_upgrade.common import release_mappings
from trove_upgrade.common import rpc
from trove_upgrade.common import rpc_interface
from trove_upgrade.common import sealing
from trove_upgrade import conf
from trove_upgrade.db import agents as db_agents
from trove_upgrade.services import sealing_keys

CONF = conf.CONF


_shared = None
_shared_lock = threading.Lock()


def _check_version_cap():
    """Refuse a bad ``[upgrade_levels] agent`` without the database.

    So that it stops a service at start, and an API request before
    anything is recorded, rather than failing at the first send.
    """
    release_mappings.resolve_version_cap(
        'agent', CONF.upgrade_levels.agent, auto=lambda: None)


def shared():
    """This process's :class:`AgentAPI`, for callers that send now and then.

    Building a client registers oslo.messaging's client options, which
    empties oslo.config's cache of every option's value: an AgentAPI per
    API request would cost it a client and, after it, every option read
    afresh. It is built again when the transport
    or ``[DEFAULT] rpc_send_retries`` changed, and the version cap is
    checked on every call, as a new AgentAPI would.
    """
    global _shared
    _check_version_cap()
    with _shared_lock:
        api = _shared
        if (api is None or api.transport is not rpc.get_transport()
                or api.retries != CONF.rpc_send_retries):
            api = _shared = AgentAPI()
        return api


def _allows(version_cap, version):
    """Whether ``version_cap`` (None: no cap) lets ``version`` go."""
    return version_cap is None or (release_mappings.version_key(version)
                                   <= release_mappings.version_key(
                                       version_cap))


class AgentAPI:
    """Client side of the upgrade agent's RPC API.

    API version history:

    | 1.0 - Initial version: upgrade().
    | 1.1 - upgrade() takes ``sealed``, the seal of its arguments made
    |       with the instance's key (``trove_upgrade.common.sealing``).
    | 1.2 - upgrade() takes ``expected_manifest``, the SHA-256 of the
    |       manifest and the package name the agent must get, or null;
    |       binding: not sent to 1.1 agents, which cannot check it.
    | 1.3 - upgrade() takes ``component``, what the upgrade installs:
    |       ``guest-agent`` (null: the same) or ``upgrade-agent``, the
    |       agent itself; binding: not sent to 1.2 agents.
    """

    RPC_API_VERSION = '1.3'

    def __init__(self):
        _check_version_cap()
        target = messaging.Target(topic=rpc_interface.AGENT_TOPIC_PREFIX,
                                  version=self.RPC_API_VERSION)
        self.transport = rpc.get_transport()
        self.retries = CONF.rpc_send_retries
        # Mandatory: a cast that no queue takes comes back at once
        # (trove_upgrade.services.resends) instead of vanishing.
        self.client = rpc.get_rpc_client(target, mandatory=True)
        self._senders = None
        self._senders_lock = threading.Lock()

    def _send_threads(self, threads):
        """This client's ``threads`` send threads, kept between batches.

        Starting a batch's threads anew for each batch, as a pass of the
        reconciler sends one, would cost it more than the casts: the
        threads are kept instead. The threads end once
        the client is gone; a process forked since they started (whose
        copy of the pool has no threads) starts its own.
        """
        wanted = (threads, os.getpid())
        with self._senders_lock:
            if self._senders is None or self._senders[0] != wanted:
                if self._senders is not None:
                    self._senders[1].shutdown(wait=False)
                self._senders = (wanted, futures.ThreadPoolExecutor(
                    threads, thread_name_prefix='agent-send'))
            return self._senders[1]

    def version_cap(self, context):
        """The highest version this client may send now (None: no cap).

        ``auto`` is the lowest version the registered agents reported, and
        no cap while no agent has registered: no older agent is known.
        """
        return release_mappings.resolve_version_cap(
            'agent', CONF.upgrade_levels.agent,
            auto=lambda: db_agents.min_agent_rpc_version(context))

    def _prepare(self, instance_id, version_cap, version):
        return self.client.prepare(
            topic=rpc_interface.agent_topic(instance_id),
            version_cap=version_cap, version=version)

    def upgrade(self, context, instance_id, upgrade_id, instance_version,
                strategy, location, metadata, allow_downgrade,
                expected_manifest=None, component=None):
        """Ask the agent of ``instance_id`` to carry out an upgrade (cast).

        The message waits in the instance's queue, which the agent declares
        whenever it connects, until the agent consumes it; the agent
        claims the upgrade from the conductor before it starts, so a
        cancelled upgrade is skipped. When no queue takes it (the agent
        never started, or has not declared its queue again since a broker
        restart), RabbitMQ returns it and MessageUndeliverable is raised.

        The message is sealed with the instance's newest key when it has
        one; that needs version 1.1, which every agent holding a key
        speaks. ``expected_manifest`` (``{'sha256': ..., 'package': ...}``
        or None) needs 1.2, ``component`` other than None (the guest
        agent) 1.3.

        :raises: MessageUndeliverable when RabbitMQ returned it;
            RPCVersionCapError when the cap is below 1.0;
            ArgumentNeedsNewerVersionError when ``expected_manifest`` is given
            but the cap is below 1.2, or ``component`` below 1.3;
            SealingUnavailableError when the instance has a key but the cap is
            below 1.1, or has none while ``[conductor] require_sealed`` is
            set; an oslo.messaging or driver connection error when the
            messaging server stays unreachable through
            ``[DEFAULT] rpc_send_retries``.
        """
        self._cast_upgrade(
            context, self.version_cap(context),
            sealing_keys.keyring(context, instance_id), locals())

    def upgrade_with_keys(self, context, upgrade, keys):
        """:meth:`upgrade` of ``upgrade`` (a dict of its fields).

        Sealed with ``keys``, the instance's keyring (``sealing_keys``)
        that the caller read already; raises as :meth:`upgrade` does.
        """
        self._cast_upgrade_of(context, self.version_cap(context), upgrade,
                              keys)

    def upgrade_many(self, context, upgrades, threads=1):
        """:meth:`upgrade` for each of ``upgrades``, dicts of their fields.

        For the reconciler, which sends hundreds at a time: the version
        cap is read once, every instance's keys in one query, and the
        casts made from ``threads`` threads, since each waits for the
        messaging server to confirm it; the threads are kept for the
        next batch. Returns ``{upgrade id: exception}``
        for those that could not be sent; one failure does not stop the
        others.
        """
        try:
            version_cap = self.version_cap(context)
            keys = sealing_keys.keyrings(
                context, {u['instance_id'] for u in upgrades})
        except Exception as e:
            return {u['id']: e for u in upgrades}
        # Serialized once for the batch rather than once per cast.
        wire_context = rpc.serialized_context(context)

        def send(upgrade):
            try:
                self._cast_upgrade_of(wire_context, version_cap, upgrade,
                                      keys[upgrade['instance_id']])
            # Whatever stopped the cast, this upgrade was not sent.
            except Exception as e:
                return upgrade['id'], e
            return upgrade['id'], None

        def send_all(share):
            return [send(upgrade) for upgrade in share]

        # One share per thread rather than one task per upgrade: handing
        # each cast to a pool thread and its result back cost more CPU
        # than the cast itself.
        used = max(1, min(threads, len(upgrades)))
        if used == 1:
            outcomes = send_all(upgrades)
        else:
            shares = [upgrades[i::used] for i in range(used)]
            outcomes = [outcome for done in self._send_threads(threads).map(
                send_all, shares) for outcome in done]
        return {upgrade_id: error for upgrade_id, error in outcomes
                if error is not None}

    def _cast_upgrade_of(self, context, version_cap, upgrade, keys):
        """Cast ``upgrade``, a dict of its fields, sealed with ``keys``.

        ``context`` is the request context or ``rpc.serialized_context``
        of it.
        """
        values = dict(upgrade, upgrade_id=upgrade['id'])
        values.setdefault('expected_manifest', None)
        values.setdefault('component', None)
        self._cast_upgrade(context, version_cap, keys, values)

    def _cast_upgrade(self, context, version_cap, keys, values):
        """Cast ``upgrade`` with ``values``, at the newest version allowed.

        Its arguments are those of that version (``rpc_interface``).
        """
        # One prepared context per cast: each prepare() builds a new one,
        # and the reconciler casts whole batches.
        instance_id = values['instance_id']
        if not keys and CONF.conductor.require_sealed:
            raise exception.SealingUnavailableError(
                method='upgrade', instance_id=instance_id,
                reason='the instance has no key and [conductor] '
                'require_sealed is set')
        floor = '1.1' if keys else '1.0'
        if keys and not _allows(version_cap, floor):
            raise exception.SealingUnavailableError(
                method='upgrade', instance_id=instance_id,
                reason='the agent RPC API is capped below %s' % floor)
        version = rpc_interface.AGENT.version_to_send('upgrade', values,
                                                      floor, version_cap)
        # Below 1.0, the cast raises RPCVersionCapError.
        cctxt = self._prepare(instance_id, version_cap, version)
        kwargs = rpc_interface.AGENT.message('upgrade', values, version)
        if keys:
            kwargs['sealed'] = sealing.seal(keys, 'upgrade', version,
                                            sealing.TO_AGENT, kwargs)
        cctxt.cast(context, 'upgrade', **kwargs)
