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
"""

import threading
import time

from trove_upgrade import conf

CONF = conf.CONF


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

    def forget(self, instance_id):
        """The next heartbeat of ``instance_id`` is written, whatever it is."""
        self._written.pop(instance_id, None)

    def _prune(self, now):
        """Drop agents not written for an interval: they write next time."""
        interval = write_interval()
        self._written = {i: w for i, w in self._written.items()
                         if now - w[1] < interval}
        self._pruned = now
