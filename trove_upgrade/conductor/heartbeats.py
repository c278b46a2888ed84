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

"""Which heartbeats are worth a database write.

At one heartbeat per agent every 30 s, 10,000 agents send 333 a second;
nearly all of them repeat what the ``agents`` row already says, and the
only thing they change is its ``last_heartbeat``, which matters only
against ``[conductor] agent_down_time``. A conductor therefore remembers,
per agent, what it last wrote and when, and writes a heartbeat only when
it brings something new or the heartbeat it last stored is
``[conductor] heartbeat_write_interval`` old.

This stays correct with several conductors and after restarts: what a
conductor remembers is a write it made itself, and the stored heartbeat
can only be newer than that; a conductor that remembers nothing writes.

Those periodic writes of unchanged heartbeats are batched: they wait, at
most ``FLUSH_INTERVAL`` seconds, for one thread to write them all in one
transaction (``db.agents.record_heartbeats``), which costs the conductor
a small share of the transaction each instead of a whole one. A
conductor killed before a flush loses only those heartbeats' times: the
next heartbeat of each agent, which it no longer remembers, is written.
Registrations and heartbeats that change anything are written at once.
"""

import threading
import time

from oslo_log import log as logging
from oslo_utils import timeutils

from trove_upgrade import conf
from trove_upgrade.db import agents as db_agents

CONF = conf.CONF
LOG = logging.getLogger(__name__)

# Seconds an unchanged heartbeat due for a write waits for the batch.
FLUSH_INTERVAL = 1.0


def write_interval():
    """Seconds between two writes of an unchanged agent's heartbeat."""
    return min(CONF.conductor.heartbeat_write_interval,
               CONF.conductor.agent_down_time / 2.0)


def _key(values):
    labels = values['labels']
    return (values['agent_version'], values['guest_version'],
            values['rpc_api_version'], values['state'], values['host'],
            tuple(sorted(labels.items())) if isinstance(labels, dict)
            else repr(labels))


class HeartbeatWrites:
    """Remembers the last write of each agent's heartbeat in this process."""

    def __init__(self, clock=time.monotonic):
        self._clock = clock
        self._written = {}  # instance id -> (values key, time written)
        self._due = {}  # instance id -> (values, time heard), to flush
        self._lock = threading.Lock()
        self._pruned = clock()

    def needs_write(self, instance_id, values):
        """Whether this heartbeat must be written to the database."""
        interval = write_interval()
        if interval <= 0 or not isinstance(instance_id, str):
            return True  # a malformed id is refused by the write path
        last = self._written.get(instance_id)
        return (last is None or last[0] != _key(values)
                or self._clock() - last[1] >= interval)

    def written(self, instance_id, values):
        """Record that ``values`` of ``instance_id`` were just written."""
        now = self._clock()
        with self._lock:
            self._written[instance_id] = (_key(values), now)
            if now - self._pruned >= write_interval():
                self._prune(now)

    def is_unchanged(self, instance_id, values):
        """Whether ``values`` are the ones this conductor last wrote."""
        last = self._written.get(instance_id)
        return last is not None and last[0] == _key(values)

    def queue(self, instance_id, values):
        """Leave an unchanged heartbeat's write to the next flush."""
        heard_at = timeutils.utcnow()
        with self._lock:
            self._due[instance_id] = (values, heard_at)
        self.written(instance_id, values)

    def forget(self, instance_id):
        """The next heartbeat of ``instance_id`` is written, whatever it is.

        A heartbeat of it waiting for the flush is dropped: a write of the
        instance is about to replace it.
        """
        with self._lock:
            self._written.pop(instance_id, None)
            self._due.pop(instance_id, None)

    def flush(self, context):
        """Write the heartbeats queued since the last flush; how many.

        Those that fail to be written are forgotten, so that the next
        heartbeat of each agent is written again.
        """
        with self._lock:
            due, self._due = self._due, {}
        if not due:
            return 0
        try:
            db_agents.record_heartbeats(context, due)
        except Exception:
            with self._lock:
                for instance_id in due:
                    self._written.pop(instance_id, None)
            raise
        return len(due)

    def _prune(self, now):
        """Drop agents not written for two intervals: departed ones.

        Two, not one: an agent just due keeps its place in the batch
        rather than having its next heartbeat written alone.
        """
        interval = write_interval()
        self._written = {i: w for i, w in self._written.items()
                         if now - w[1] < 2 * interval}
        self._pruned = now
