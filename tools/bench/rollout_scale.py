"""How fast a rollout reaches a fleet, next to raw oslo.messaging casts.

Registers simulated agents (a few processes, each consuming its agents'
real topic queues on one AMQP connection, see
``trove_upgrade/tests/functional/rollouts/simulated_agents.py``), runs
one rollout over all of them with a real ``trove-upgrade-conductor`` on
the real RabbitMQ, and prints:

* the time from creating the rollout to COMPLETED;
* dispatches per second: upgrades the reconciler recorded, cast and
  marked SENT, over the time its dispatch steps took (from the
  conductor's log), and over the whole rollout;
* the conductor's CPU time (from /proc, its service process included);
* in the same run, the rate at which one thread (the reconciler dispatches
  from one) casts the same message with plain oslo.messaging on the same
  RabbitMQ: the ceiling of the dispatch path.

    python tools/bench/rollout_scale.py [--agents 2000]
        [--max-in-flight 200] [--processes 3] [--connection URL]

Nothing is asserted: it prints figures. All traffic stays on loopback.
"""

# Importing trove_upgrade.cmd selects the threading backend of oslo.service;
# it must come before oslo.messaging, which would otherwise pick eventlet.
import trove_upgrade.cmd  # noqa: F401

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid

import oslo_messaging as messaging
import psycopg2

from trove_upgrade import conf
from trove_upgrade import context as tu_context
from trove_upgrade.db import api as db_api
from trove_upgrade import rollout_states as rs
from trove_upgrade import rollouts
from trove_upgrade.tests.functional.rollouts import fleet as fleet_fixture

CONF = conf.CONF
BIN = os.path.dirname(sys.executable)
RABBIT = 'rabbit://guest:guest@127.0.0.1:5672/'
# Bounds every wait: a stuck run ends instead of looping.
COMPLETION_TIMEOUT = 1800
_DISPATCHED = re.compile(r'dispatched (\d+) upgrade\(s\) in ([\d.]+) s')


def _stat(pid):
    with open('/proc/%s/stat' % pid) as f:
        return f.read().rsplit(')', 1)[1].split()


def _cpu_seconds(pid):
    """User and system CPU of ``pid`` and of the processes it forked.

    The conductor's launcher forks the service process that does the
    work, so both count.
    """
    pids = {pid}
    for entry in os.listdir('/proc'):
        if entry.isdigit():
            try:
                if int(_stat(entry)[1]) == pid:
                    pids.add(int(entry))
            except (FileNotFoundError, ProcessLookupError):
                continue
    total = 0.0
    for current in pids:
        fields = _stat(current)
        total += (int(fields[11]) + int(fields[12])) / os.sysconf(
            'SC_CLK_TCK')
    return total


def _temporary_database(suffix):
    """A PostgreSQL database for this run; returns (url, drop)."""
    name = 'trove_upgrade_bench_%s' % suffix
    server = psycopg2.connect(host='127.0.0.1', user='postgres',
                              dbname='postgres')
    server.autocommit = True
    with server.cursor() as cursor:
        cursor.execute('CREATE DATABASE %s' % name)

    def drop():
        with server.cursor() as cursor:
            cursor.execute('DROP DATABASE %s' % name)
        server.close()
    return 'postgresql+psycopg2://postgres@127.0.0.1/%s' % name, drop


def bench_raw_casts(exchange, total):
    """Casts per second of one thread, same message, same RabbitMQ."""
    transport = messaging.get_rpc_transport(CONF, url=RABBIT)
    ctxt = tu_context.get_admin_context().to_dict()
    client = messaging.get_rpc_client(
        transport, messaging.Target(topic='guestagent_upgrade.bench',
                                    exchange=exchange, version='1.0'))

    def cast():
        client.cast(ctxt, 'upgrade', upgrade_id=str(uuid.uuid4()),
                    instance_id=str(uuid.uuid4()),
                    instance_version='v2.0.0', strategy='http',
                    location='https://127.0.0.1/trove-guestagent.tar',
                    metadata={}, allow_downgrade=False)

    cast()  # open the connection outside the timing
    started = time.perf_counter()
    for _ in range(total):
        cast()
    seconds = time.perf_counter() - started
    transport.cleanup()
    return total / seconds


def _migrate(workdir, connection):
    config = os.path.join(workdir, 'manage.conf')
    fleet_fixture.write_conf(config, {'database': {'connection':
                                                   connection}})
    subprocess.run([os.path.join(BIN, 'trove-upgrade-manage'),
                    '--config-file', config, 'db', 'sync'],
                   check=True, capture_output=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--agents', type=int, default=2000)
    parser.add_argument('--max-in-flight', type=int, default=200)
    parser.add_argument('--processes', type=int, default=3)
    parser.add_argument('--conductor-threads', type=int, default=64,
                        help="the conductor's [DEFAULT] "
                             "executor_thread_pool_size")
    parser.add_argument('--connection', default=None,
                        help='database URL; default a temporary database '
                             'on the PostgreSQL of 127.0.0.1. (SQLite, one '
                             'writer at a time, refuses the conductor\'s '
                             'concurrent writes at this scale; MariaDB '
                             'through PyMySQL costs the conductor twice '
                             'the CPU.)')
    args = parser.parse_args()
    CONF([], project='trove-upgrade', default_config_files=[],
         default_config_dirs=[])

    suffix = uuid.uuid4().hex[:8]
    exchange = 'trove_upgrade_bench_%s' % suffix
    rabbit_options = {
        'DEFAULT': {'transport_url': RABBIT, 'control_exchange': exchange},
        'conductor': {'topic': 'trove_upgrade_conductor_bench_%s' % suffix},
    }
    drop = None
    connection = args.connection
    if connection is None:
        connection, drop = _temporary_database(suffix)
    with tempfile.TemporaryDirectory() as workdir:
        _migrate(workdir, connection)
        CONF.set_override('connection', connection, group='database')
        fleet = fleet_fixture.Fleet(
            workdir, rabbit_options, connection,
            {'rollout_interval': '0.2', 'periodic_interval': '60'},
            conductor_defaults={'executor_thread_pool_size':
                                args.conductor_threads})
        fleet.setUp()
        try:
            result = _run(args, fleet)
        finally:
            fleet.cleanUp()
            db_api.get_engine().dispose()
            if drop is not None:
                drop()
    raw_rate = bench_raw_casts(exchange, max(args.agents, 1000))
    _report(args, connection, result, raw_rate)


def _run(args, fleet):
    conductor = fleet.start_conductor()
    started = time.monotonic()
    per_process = -(-args.agents // args.processes)
    remaining = args.agents
    while remaining > 0:
        fleet.start_agents(min(per_process, remaining), labels='group=bench',
                           multiplex=True)
        remaining -= per_process
    registration = time.monotonic() - started

    admin = tu_context.get_admin_context()
    cpu_before = _cpu_seconds(conductor.pid)
    started = time.monotonic()
    rollout = rollouts.create_rollout(admin, {
        'name': 'bench', 'instance_version': 'v2.0.0', 'strategy': 'http',
        'location': 'https://127.0.0.1/trove-guestagent.tar',
        'selector': {'group': 'bench'}, 'canary': 0,
        'max_in_flight': args.max_in_flight, 'max_in_flight_kind': 'count',
        'max_failures': 0, 'max_failures_kind': 'count',
        'per_agent_retries': 0, 'agent_deadline': 600})
    while True:
        status = db_api.get_rollout(admin, rollout['id'])['status']
        if status != rs.RUNNING:
            break
        if time.monotonic() - started > COMPLETION_TIMEOUT:
            raise SystemExit('the rollout did not complete in %d s'
                             % COMPLETION_TIMEOUT)
        time.sleep(0.2)
    seconds = time.monotonic() - started
    cpu = _cpu_seconds(conductor.pid) - cpu_before
    dispatched = dispatch_seconds = 0
    batches = []
    for match in _DISPATCHED.finditer(fleet.logs()):
        batches.append((int(match.group(1)), float(match.group(2))))
        dispatched += batches[-1][0]
        dispatch_seconds += batches[-1][1]
    claims = fleet.claims()
    return {'status': status, 'seconds': seconds, 'cpu': cpu,
            'dispatched': dispatched, 'dispatch_seconds': dispatch_seconds,
            'first_batch': batches[0], 'batches': len(batches),
            'registration': registration,
            'claimed_twice': sum(1 for c in claims.values() if c > 1)}


def _report(args, connection, result, raw_rate):
    dispatch_rate = result['dispatched'] / result['dispatch_seconds']
    print('rollout_scale: %d simulated agents in %d processes, '
          'max_in_flight %d, database %s, RabbitMQ 127.0.0.1:5672'
          % (args.agents, args.processes, args.max_in_flight,
             connection.split(':')[0].split('+')[0]))
    print('agents registered and listening in %.1f s'
          % result['registration'])
    print('rollout %s in %.2f s; %d upgrades dispatched, %d agents '
          'claimed twice' % (result['status'], result['seconds'],
                             result['dispatched'], result['claimed_twice']))
    print('%-50s %12s' % ('', 'per second'))
    size, seconds = result['first_batch']
    print('%-50s %12.1f' % ('dispatches, first step (%d upgrades)' % size,
                            size / seconds))
    print('%-50s %12.1f' % ('dispatches, over all %d dispatch steps'
                            % result['batches'], dispatch_rate))
    print('%-50s %12.1f' % ('dispatches, over the whole rollout',
                            result['dispatched'] / result['seconds']))
    print('%-50s %12.1f' % ('raw oslo.messaging casts, one thread', raw_rate))
    print('first step / raw cast rate: %.0f%%; all steps / raw cast rate: '
          '%.0f%%' % (100.0 * size / seconds / raw_rate,
                      100.0 * dispatch_rate / raw_rate))
    print('conductor CPU: %.2f s (%.2f ms per upgrade, reports included)'
          % (result['cpu'],
             1000.0 * result['cpu'] / max(result['dispatched'], 1)))


if __name__ == '__main__':
    main()
