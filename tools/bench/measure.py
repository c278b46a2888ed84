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

"""What the conductor benchmarks measure their figures against.

The CPU of a process and its children from /proc, a temporary PostgreSQL
database for a run, and raw oslo.messaging casts of a dispatch's message
on the same RabbitMQ: ``rollout_scale.py`` and ``conductor_cost.py``
print their figures beside these.
"""

import collections
import contextlib
import os
import subprocess
import sys
import threading
import time
import uuid

import kombu
import oslo_messaging as messaging
import psycopg2

from trove_upgrade.common import context as tu_context
from trove_upgrade import conf

# What the benchmarks share with the functional tests (tools/testbed), from
# the repository's root.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
from tools.testbed import conffile  # noqa: E402

CONF = conf.CONF
BIN = os.path.dirname(sys.executable)
RABBIT = 'rabbit://guest:guest@127.0.0.1:5672/'


def _stat(pid):
    with open('/proc/%s/stat' % pid) as f:
        return f.read().rsplit(')', 1)[1].split()


def own_cpu_seconds(pid):
    """User and system CPU of ``pid`` alone."""
    fields = _stat(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def cpu_seconds(pid):
    """User and system CPU of ``pid`` and of every process it forked.

    The conductor's launcher forks its workers, and each worker its
    rollout reconciler: all of it is the conductor's work.
    """
    children = collections.defaultdict(set)
    for entry in os.listdir('/proc'):
        if entry.isdigit():
            try:
                children[int(_stat(entry)[1])].add(int(entry))
            except (FileNotFoundError, ProcessLookupError):
                continue
    pids, todo = set(), [pid]
    while todo:
        current = todo.pop()
        pids.add(current)
        todo.extend(children[current] - pids)
    total = 0.0
    for current in pids:
        try:
            total += own_cpu_seconds(current)
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


def temporary_database(suffix):
    """A PostgreSQL database for this run; returns (url, sessions, drop).

    ``sessions()`` is how many sessions were opened to it so far; the
    count of a session that is still open may not be in it yet.
    """
    name = 'trove_upgrade_bench_%s' % suffix
    server = psycopg2.connect(host='127.0.0.1', user='postgres',
                              dbname='postgres')
    server.autocommit = True
    with server.cursor() as cursor:
        cursor.execute('CREATE DATABASE %s' % name)

    def sessions():
        with server.cursor() as cursor:
            cursor.execute('SELECT pg_stat_clear_snapshot()')
            cursor.execute('SELECT sessions FROM pg_stat_database '
                           'WHERE datname = %s', (name,))
            return cursor.fetchone()[0]

    def drop():
        with server.cursor() as cursor:
            cursor.execute('DROP DATABASE %s' % name)
        server.close()
    return ('postgresql+psycopg2://postgres@127.0.0.1/%s' % name, sessions,
            drop)


@contextlib.contextmanager
def raw_caster(exchange, topic='guestagent_upgrade.bench-raw-casts'):
    """A function that casts the dispatch's message with oslo.messaging.

    To a queue bound as an agent's is, deleted afterwards, so that RabbitMQ
    routes and stores each message as it does a dispatch's. The connection
    is opened before it is handed out, outside any timing.
    """
    with kombu.Connection(RABBIT.replace('rabbit://', 'amqp://')) as conn:
        channel = conn.channel()
        queue = kombu.Queue(topic, kombu.Exchange(exchange, type='topic',
                                                  durable=False),
                            routing_key=topic, durable=False)
        queue(channel).declare()
        transport = messaging.get_rpc_transport(CONF, url=RABBIT)
        ctxt = tu_context.get_admin_context().to_dict()
        client = messaging.get_rpc_client(
            transport, messaging.Target(topic=topic, exchange=exchange,
                                        version='1.0'))

        def cast():
            client.cast(ctxt, 'upgrade', upgrade_id=str(uuid.uuid4()),
                        instance_id=str(uuid.uuid4()),
                        instance_version='v2.0.0', strategy='http',
                        location='https://127.0.0.1/trove-guestagent.tar',
                        metadata={}, allow_downgrade=False)

        cast()
        try:
            yield cast
        finally:
            transport.cleanup()
            channel.queue_delete(topic)


def bench_raw_casts(exchange, total):
    """Casts per second of one thread, same message, to a real queue.

    Returns (casts per second, CPU seconds per cast).
    """
    with raw_caster(exchange) as cast:
        started = time.perf_counter()
        cpu_started = time.process_time()
        for _ in range(total):
            cast()
        cpu = time.process_time() - cpu_started
        seconds = time.perf_counter() - started
    return total / seconds, cpu / total


class RawCastsMeanwhile(threading.Thread):
    """Raw casts in small bursts while something else runs.

    A cast's CPU grows with the load of the cores (RabbitMQ answering its
    confirm later, caches shared with the fleet): these are timed under
    the load the reconciler's own casts see, the thread's own CPU only, a
    burst of ``BURST`` every ``PERIOD`` seconds so that they add little to
    that load. Run with the fleet idle too, they show what the pacing
    alone costs.
    """

    BURST = 10
    PERIOD = 0.05

    def __init__(self, exchange):
        super().__init__(daemon=True)
        self.exchange = exchange
        self.stopping = threading.Event()
        self.ready = threading.Event()
        self.count = 0
        self.cpu = 0.0

    def run(self):
        with raw_caster(self.exchange,
                        'guestagent_upgrade.bench-raw-meanwhile') as cast:
            self.ready.set()
            while not self.stopping.wait(self.PERIOD):
                started = time.thread_time()
                for _ in range(self.BURST):
                    cast()
                self.cpu += time.thread_time() - started
                self.count += self.BURST

    def __enter__(self):
        self.start()
        self.ready.wait()
        return self

    def __exit__(self, *exc_info):
        self.stopping.set()
        self.join()

    def cpu_per_cast(self):
        return self.cpu / max(self.count, 1)


def migrate(workdir, connection):
    config = os.path.join(workdir, 'manage.conf')
    conffile.write_conf(config, {'database': {'connection':
                                              connection}})
    subprocess.run([os.path.join(BIN, 'trove-upgrade-manage'),
                    '--config-file', config, 'db', 'sync'],
                   check=True, capture_output=True)
