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

"""Trove's replication sets and clusters, and the order upgrades take in them.

Trove's failover and cluster actions go through the guest agents of
several members of a set at once: restarting them together takes away
the operator's failover. With ``[trove] connection`` set, :func:`read`
reads the sets from Trove's database (``instances.slave_of_id`` and
``instances.cluster_id``, one query) and :class:`Gate` tells a rollout's
plan which members may be dispatched now. The rules, documented in
``doc/source/admin/rollouts.rst``:

* a replication set is a primary and every instance whose chain of
  ``slave_of_id`` leads to it; a cluster is the instances of one
  ``cluster_id`` (a cluster member is in its cluster only, never in a
  replication set);
* at most one member of a set is between SENT and a final state at once,
  whoever sent its upgrade;
* replicas go before their primary (the farthest from it first), cluster
  members one at a time, each in instance id order;
* with ``hold`` a member that failed holds the members of its set that
  still wait (they are ``held``, settled, never dispatched).

Without Trove, or for an instance in no set, nothing changes.
"""

import collections

from trove_upgrade.common import rollout_states as rs
from trove_upgrade.db import trove as trove_db

REPLICATION = 'replication'
CLUSTER = 'cluster'

PRIMARY = 'primary'
REPLICA = 'replica'
MEMBER = 'member'

Member = collections.namedtuple('Member', ['instance_id', 'role'])


class Topology:
    """Each instance's set, and each set's members in upgrade order.

    :param rows: ``(id, slave_of_id, cluster_id)`` of the replicas and
        cluster members, as ``db.trove.get_topology_rows`` reads them.
    """

    def __init__(self, rows):
        self._sets = {}
        self._of = {}
        clusters = collections.defaultdict(list)
        sources = {}
        for instance_id, source, cluster_id in rows:
            if cluster_id:
                clusters[cluster_id].append(instance_id)
            elif source:
                sources[instance_id] = source
        for cluster_id, ids in clusters.items():
            self._add((CLUSTER, cluster_id),
                      [Member(i, MEMBER) for i in sorted(ids)])
        in_cluster = {i for ids in clusters.values() for i in ids}
        replicas = collections.defaultdict(list)
        for instance_id in sources:
            root, depth = _root(instance_id, sources)
            if root not in in_cluster:
                replicas[root].append((-depth, instance_id))
        for root, found in replicas.items():
            self._add((REPLICATION, root),
                      [Member(i, REPLICA) for _d, i in sorted(found)]
                      + [Member(root, PRIMARY)])

    def _add(self, key, members):
        self._sets[key] = members
        for member in members:
            self._of[member.instance_id] = key

    def __bool__(self):
        return bool(self._sets)

    def set_of(self, instance_id):
        """``(kind, id)`` of the instance's set, or None."""
        return self._of.get(instance_id)

    def members(self, key):
        """The set's :class:`Member` s in upgrade order."""
        return self._sets[key]


def _root(instance_id, sources):
    """(primary, distance to it) of a replica; a cycle stops at its start."""
    seen = {instance_id}
    current, depth = instance_id, 0
    while current in sources and sources[current] not in seen:
        current = sources[current]
        seen.add(current)
        depth += 1
    return current, depth


EMPTY = Topology(())


def read():
    """The topology Trove's database holds now; EMPTY without Trove."""
    if not trove_db.configured():
        return EMPTY
    return Topology(trove_db.get_topology_rows())


class Gate:
    """Which agents of a plan the topology lets it dispatch now.

    :param agent_states: ``{instance_id: state}`` of the plan's agents.
    :param busy: instances with an unfinished upgrade of anyone's.
    :param hold: whether a failed member holds its set's waiting ones.
    """

    def __init__(self, topology, agent_states, busy, hold):
        self.topology = topology
        self._next = {}
        self._closed = set()
        self.held = set()
        keys = {topology.set_of(i) for i in agent_states} - {None}
        for key in keys:
            ids = [m.instance_id for m in topology.members(key)]
            found = [agent_states.get(i) for i in ids]
            if any(i in busy for i in ids) or rs.AGENT_IN_PROGRESS in found:
                self._closed.add(key)
            if hold and rs.AGENT_FAILED in found:
                self._closed.add(key)
                self.held.update(i for i, s in zip(ids, found)
                                 if s == rs.AGENT_WAITING)
            for instance_id, state in zip(ids, found):
                if state in (rs.AGENT_WAITING, rs.AGENT_RETRYING):
                    self._next[key] = instance_id
                    break
        self.keys = keys

    def admits(self, instance_id):
        """Whether the instance may be dispatched on this pass."""
        key = self.topology.set_of(instance_id)
        if key is None:
            return True
        return key not in self._closed and self._next.get(key) == instance_id

    def describe(self, agent_states):
        """The sets of the plan's agents, each member in upgrade order.

        ``[{'kind', 'id', 'members': [{'instance_id', 'role', 'state'}]}]``
        ordered by kind and id; a member the plan does not act on has
        state None.
        """
        return [{'kind': kind, 'id': set_id,
                 'members': [{'instance_id': m.instance_id, 'role': m.role,
                              'state': agent_states.get(m.instance_id)}
                             for m in self.topology.members((kind, set_id))]}
                for kind, set_id in sorted(self.keys)]
