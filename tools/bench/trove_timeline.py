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

"""Where a restart of the Trove guest agent spends its time.

Used by ``downtime_trove.py``. A watcher thread samples, every few
milliseconds, how many consumers RabbitMQ counts on the guest agent's topic
queue (``guestagent.<guest_id>``, read with a passive ``queue.declare``) and
whether the old guest agent's pid still exists; the supervisor notes when it
sent SIGTERM, when its stop returned and when it issued the start; the new
process's start comes from ``/proc``. With the pinger's answers this gives
each moment between the old release's last answer and the new one's first.
"""

import os
import threading
import time

import kombu

from trove_upgrade.agent import supervisor
from trove_upgrade.agent import trove_guest

SAMPLE = 0.005


def proc_started_at(pid):
    """When ``pid`` started, on the ``time.monotonic`` clock (10 ms)."""
    ticks = supervisor._proc_start_time(pid)
    if ticks is None:
        return None
    since_boot = ticks / os.sysconf('SC_CLK_TCK')
    return since_boot - (time.clock_gettime(time.CLOCK_BOOTTIME)
                         - time.monotonic())


class TopicWatch:
    """Samples the topic queue's consumer count and one pid's life."""

    def __init__(self, transport_url, guest_id):
        self.queue = trove_guest.TOPIC_PREFIX + guest_id
        self.url = transport_url.replace('rabbit://', 'amqp://')
        self.pid = None
        self.samples = []
        self.pid_gone_at = None
        self._stop = threading.Event()
        self._thread = None

    def watch_pid(self, pid):
        self.pid, self.pid_gone_at = pid, None

    def start(self):
        self.samples = []
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self):
        self._stop.set()
        self._thread.join()

    def _run(self):
        with kombu.Connection(self.url) as conn:
            channel = conn.channel()
            while not self._stop.is_set():
                now = time.monotonic()
                if (self.pid and self.pid_gone_at is None
                        and not os.path.exists('/proc/%d' % self.pid)):
                    self.pid_gone_at = now
                try:
                    count = channel.queue_declare(
                        queue=self.queue, passive=True).consumer_count
                except Exception:
                    count = 0
                    channel = conn.channel()
                self.samples.append((now, count))
                time.sleep(SAMPLE)

    def last_consumed(self, after):
        """First sample after ``after`` with nobody consuming."""
        return next((t for t, n in self.samples if t >= after and n == 0),
                    None)

    def consuming(self, after):
        """First sample after ``after`` with a consumer."""
        return next((t for t, n in self.samples if t >= after and n > 0),
                    None)


def remove_topic(transport_url, exchange, guest_id):
    """Delete the guest agent's queues and exchange (Trove keeps them)."""
    topic = trove_guest.TOPIC_PREFIX + guest_id
    with kombu.Connection(transport_url.replace('rabbit://', 'amqp://')) as c:
        channel = c.channel()
        for queue in (topic, '%s.%s' % (topic, guest_id)):
            channel.queue_delete(queue)
        channel.exchange_delete(exchange)


class TimedSupervisorMixin:
    """Notes the moments of a stop and a start on a supervisor."""

    watch = None

    def reset_marks(self):
        self.marks = {}

    def stop(self):
        marks = getattr(self, 'marks', None)
        if marks is None or 'sigterm' in marks or not self.is_running():
            return super().stop()
        pid = self._record['pid']
        if self.watch is not None:
            self.watch.watch_pid(pid)
        marks['sigterm'] = time.monotonic()
        super().stop()
        marks['stop returned'] = time.monotonic()

    def start(self):
        marks = getattr(self, 'marks', None)
        if marks is None or 'start issued' in marks:
            return super().start()
        marks['start issued'] = time.monotonic()
        version = super().start()
        marks['new process started'] = proc_started_at(self._record['pid'])
        return version


def breakdown(marks, watch, last_old, first_new):
    """(label, seconds after the old release's last answer) in order."""
    sigterm = marks['sigterm']
    rows = [('SIGTERM sent to the old release', sigterm),
            ('old release stops consuming', watch.last_consumed(sigterm)),
            ('old process exits', watch.pid_gone_at),
            ('stop returns to the agent', marks['stop returned']),
            ('start of the new release issued', marks['start issued']),
            ('new process started', marks['new process started']),
            ('new release consumes its topic',
             watch.consuming(marks['start issued'])),
            ('first answer of the new release', first_new)]
    return [(label, None if t is None else t - last_old)
            for label, t in rows]
