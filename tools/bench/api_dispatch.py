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

"""The API's CPU per accepted upgrade, next to a raw oslo.messaging cast's.

An accepted POST /upgrades validates the body, records the upgrade and its
first event, casts the upgrade to the instance's topic and records SENT.
This benchmark sends those POSTs from a few concurrent HTTP clients to a
real ``trove-upgrade-api`` process (noauth2) on the real RabbitMQ, once per
database: SQLite in a temp dir and a temporary database on the MariaDB of
127.0.0.1. Its main figure is the CPU time of the API's processes (the
launcher and the worker it forks, from /proc) per accepted POST, next to
the CPU time per cast of the same message cast with plain oslo.messaging
from as many threads on the same RabbitMQ in the same run, with issue
16's target (at most 5 ms). The rates follow the cores' load and the
database's commit latency; they are printed as context.
A shared machine's speed drifts by a third within minutes, so the
measures run in ``--rounds`` rounds, interleaved (each database, then the
raw casts), and each figure is the median of its rounds, every round
printed beside it.

Every POST names a new instance. One queue of the benchmark's own, bound
to every topic of its exchange, stands for their agents' queues, so that
RabbitMQ takes each cast as an agent's queue would rather than return it
(the path of an agent that is down); the queue and the exchange are
deleted at the end.

    python tools/bench/api_dispatch.py [--requests 600] [--clients 4]
        [--rounds 3] [--databases sqlite,mariadb] [--connection URL]

Nothing is asserted: it prints figures. Every request goes to loopback.
"""

# The threading backend of oslo.service, selected as the services select
# it: before oslo.messaging, which would otherwise pick eventlet.
from trove_upgrade.common import threading_backend  # noqa: F401

import argparse
import collections
import concurrent.futures
import contextlib
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import kombu
from oslo_config import cfg
import oslo_messaging as messaging
import pymysql
import requests

from trove_upgrade.common import context as tu_context

BIN = os.path.dirname(sys.executable)
RABBIT = 'rabbit://guest:guest@127.0.0.1:5672/'
PROJECT = 'bench'
HEADERS = {'X-User-Id': 'bench', 'X-Project-Id': PROJECT, 'X-Roles': 'admin'}


def _body():
    return {'instance_id': str(uuid.uuid4()), 'instance_version': 'v1.0.1',
            'strategy': 'http',
            'location': 'https://127.0.0.1/trove-guestagent-v1.0.1.tar'}


def _start_api(workdir, exchange, connection):
    config = os.path.join(workdir, 'trove-upgrade.conf')
    log_file = os.path.join(workdir, 'api.log')
    with open(config, 'w') as f:
        f.write('[DEFAULT]\nstate_path = %s\ntransport_url = %s\n'
                'control_exchange = %s\n'
                '[api]\nauth_strategy = noauth2\nbind_host = 127.0.0.1\n'
                'bind_port = 0\n'
                # No agent, no keys: the casts go out unsealed.
                '[conductor]\nrequire_sealed = false\n'
                % (workdir, RABBIT, exchange))
        if connection:
            f.write('[database]\nconnection = %s\n' % connection)
    subprocess.run([os.path.join(BIN, 'trove-upgrade-manage'),
                    '--config-file', config, 'db', 'sync'],
                   check=True, capture_output=True)
    process = subprocess.Popen(
        [os.path.join(BIN, 'trove-upgrade-api'), '--config-file', config,
         '--log-file', log_file],
        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if os.path.exists(log_file):
            with open(log_file) as f:
                found = re.search(r'serving on http://127\.0\.0\.1:(\d+)',
                                  f.read())
            if found:
                return process, 'http://127.0.0.1:%s' % found.group(1)
        if process.poll() is not None:
            break
        time.sleep(0.1)
    process.kill()
    raise SystemExit('trove-upgrade-api did not start; see %s' % log_file)


def _cpu_seconds(pid):
    """CPU seconds of ``pid`` and its children: the launcher's worker."""
    total = 0.0
    for entry in os.listdir('/proc'):
        try:
            with open('/proc/%s/stat' % entry) as f:
                fields = f.read().rsplit(')', 1)[1].split()
        except (OSError, IndexError):
            continue  # not a process, or one gone meanwhile
        if entry == str(pid) or fields[1] == str(pid):
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf('SC_CLK_TCK')


def _run_concurrently(clients, total, one):
    """Run ``one()`` ``total`` times from ``clients`` threads; return s."""
    counter = iter(range(total))
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                if next(counter, None) is None:
                    return
            one()

    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        for future in [pool.submit(worker) for _ in range(clients)]:
            future.result()
    return time.perf_counter() - started


def bench_api(url, clients, total):
    sessions = threading.local()
    accepted = []

    def post():
        if not hasattr(sessions, 's'):
            sessions.s = requests.Session()
        resp = sessions.s.post(
            '%s/v1.0/%s/mgmt/upgrades' % (url, PROJECT), json=_body(),
            headers=HEADERS, timeout=60)
        if resp.status_code != 202:
            raise RuntimeError(
                'POST answered %s: %s' % (resp.status_code, resp.text))
        accepted.append(1)

    seconds = _run_concurrently(clients, total, post)
    return len(accepted), seconds


def bench_raw_casts(exchange, clients, total):
    # oslo.messaging reads some of its options from the global CONF.
    cfg.CONF([], project='trove-upgrade-bench')
    messaging.set_transport_defaults(exchange)
    transport = messaging.get_rpc_transport(cfg.CONF, url=RABBIT)
    ctxt = tu_context.get_admin_context().to_dict()
    client = messaging.get_rpc_client(
        transport, messaging.Target(topic='guestagent_upgrade.bench',
                                    version='1.0'))

    def cast():
        body = _body()
        client.cast(ctxt, 'upgrade', upgrade_id=str(uuid.uuid4()),
                    metadata={}, allow_downgrade=False, **body)

    cast()  # open the connection outside the timing
    cpu_started = time.process_time()
    seconds = _run_concurrently(clients, total, cast)
    cpu = time.process_time() - cpu_started
    transport.cleanup()
    return total, seconds, cpu


@contextlib.contextmanager
def agents_queue(exchange):
    """A queue taking every cast to ``exchange``, as agents' queues would.

    The exchange is declared as oslo.messaging declares its topic
    exchanges; both are deleted on the way out.
    """
    with kombu.Connection(RABBIT.replace('rabbit:', 'amqp:', 1)) as connection:
        topics = kombu.Exchange(exchange, type='topic', durable=False,
                                auto_delete=False)
        queue = kombu.Queue(exchange + '_agents', topics, routing_key='#',
                            durable=False, auto_delete=False)
        channel = connection.channel()
        queue(channel).declare()
        try:
            yield
        finally:
            queue(channel).delete()
            topics(channel).delete()


# Issue 16's target for the API's CPU per accepted POST, in ms.
TARGET_MS = 5.0


def _temporary_mariadb(suffix):
    """A database on the MariaDB of 127.0.0.1; returns (url, drop)."""
    name = 'trove_upgrade_bench_%s' % suffix
    server = pymysql.connect(host='127.0.0.1', user='root')
    with server.cursor() as cursor:
        cursor.execute('CREATE DATABASE %s CHARACTER SET utf8mb4' % name)

    def drop():
        with server.cursor() as cursor:
            cursor.execute('DROP DATABASE %s' % name)
        server.close()
    return 'mysql+pymysql://root@127.0.0.1/%s' % name, drop


def bench_database(args, exchange, connection):
    """(accepted POSTs, seconds, API CPU seconds) on ``connection``."""
    with tempfile.TemporaryDirectory() as workdir:
        api, url = _start_api(workdir, exchange, connection)
        try:
            # Warm up: the first requests open database and AMQP connections.
            bench_api(url, 1, 10)
            cpu_before = _cpu_seconds(api.pid)
            posts, seconds = bench_api(url, args.clients, args.requests)
            cpu = _cpu_seconds(api.pid) - cpu_before
        finally:
            api.terminate()
            api.wait(timeout=30)
    return posts, seconds, cpu


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--requests', type=int, default=600)
    parser.add_argument('--clients', type=int, default=4)
    parser.add_argument('--rounds', type=int, default=3,
                        help='interleaved rounds of every measure; each '
                             'figure is the median of its rounds')
    parser.add_argument('--databases', default='sqlite,mariadb',
                        help='comma-separated: sqlite (a temp dir), mariadb '
                             '(a temporary database on 127.0.0.1)')
    parser.add_argument('--connection', default=None,
                        help='a database URL to measure instead')
    args = parser.parse_args()

    suffix = uuid.uuid4().hex[:8]
    exchange = 'trove_upgrade_bench_%s' % suffix
    results = collections.defaultdict(list)
    with agents_queue(exchange):
        for index in range(args.rounds):
            _bench_all(args, '%s_%d' % (suffix, index), exchange, results)
            results['raw'].append(bench_raw_casts(
                exchange, args.clients, args.requests))
    _report(args, results)


def _bench_all(args, suffix, exchange, results):
    if args.connection:
        results[args.connection.split(':')[0]].append(
            bench_database(args, exchange, args.connection))
    else:
        for database in args.databases.split(','):
            if database == 'sqlite':
                results[database].append(
                    bench_database(args, exchange, None))
            elif database == 'mariadb':
                connection, drop = _temporary_mariadb(suffix)
                try:
                    results[database].append(bench_database(
                        args, exchange, connection))
                finally:
                    drop()
            else:
                raise SystemExit('unknown database %r' % database)


def _median(rounds, value):
    """The median of ``value(count, seconds, cpu)`` over ``rounds``; all."""
    values = [value(*measured) for measured in rounds]
    return statistics.median(values), values


def _rounds(values, form):
    return '(%s)' % ', '.join(form % value for value in values)


def _report(args, results):
    databases = [name for name in results if name != 'raw']
    cast_ms, cast_rounds = _median(
        results['raw'], lambda count, _seconds, cpu: 1000.0 * cpu / count)
    print('api_dispatch: %d requests from %d concurrent clients per '
          'database and round, %d rounds, RabbitMQ 127.0.0.1:5672'
          % (args.requests, args.clients, args.rounds))
    print()
    print('CPU per accepted POST /upgrades (the main figure: the API\'s '
          'processes\', from /proc; medians, the rounds in brackets)')
    print('%-40s %8s %8s %14s' % ('', 'ms CPU', 'x raw', 'target'))
    print('%-40s %8.2f %27s %s' % ('raw oslo.messaging cast, same message',
                                   cast_ms, '', _rounds(cast_rounds, '%.2f')))
    for database in databases:
        ms, rounds = _median(results[database],
                             lambda count, _seconds, cpu: 1000.0 * cpu / count)
        print('%-40s %8.2f %7.1fx %9s %-6s %s' % (
            'API, %s' % database, ms, ms / cast_ms,
            '<= %.0f ms' % TARGET_MS, 'met' if ms <= TARGET_MS else 'missed',
            _rounds(rounds, '%.2f')))
    print()
    print('Wall clock, as context (clients, API, RabbitMQ and the database '
          'share the cores; medians per second)')
    cast_rate, cast_rates = _median(
        results['raw'], lambda count, seconds, _cpu: count / seconds)
    print('%-40s %12.1f  %s' % ('raw oslo.messaging casts, same message',
                                cast_rate, _rounds(cast_rates, '%.0f')))
    for database in databases:
        rate, rates = _median(results[database],
                              lambda count, seconds, _cpu: count / seconds)
        print('%-40s %12.1f  (%.0f%% of raw) %s' % (
            'accepted POSTs, %s' % database, rate, 100.0 * rate / cast_rate,
            _rounds(rates, '%.0f')))


if __name__ == '__main__':
    main()
