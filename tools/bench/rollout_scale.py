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

"""How fast a rollout reaches a fleet, next to raw oslo.messaging casts.

Registers simulated agents (a few processes, each consuming its agents'
real topic queues on one AMQP connection, see
``tools/testbed/simulated_agents.py``), runs
one rollout over all of them with a real ``trove-upgrade-conductor`` on
the real RabbitMQ and a real PostgreSQL, and prints first its main
figure: the CPU time of the conductor's rollout reconciler (its own
process, from /proc) per upgrade dispatched, every pass of the rollout
included, next to the CPU time of one raw
oslo.messaging cast of the same message on the same RabbitMQ in the same
run, with their ratio and issue 16's target (at most twice). It moves
far less than the rates with whatever else the machine's cores are
doing, but it moves between runs on a loaded machine: compare the two
figures of one run, never figures of two runs. Then, as context:

* the rate at which one thread casts the same message with plain
  oslo.messaging to a queue on the same RabbitMQ, measured while the
  fleet is registered and idle, just before the rollout starts: the
  ceiling of a dispatch path, which casts from one thread too;
* dispatches per second of the reconciler's passes, each from the start
  of its plan to its last upgrade marked SENT (recorded, cast, marked), as
  the conductor logs them: the first pass (a full ``max_in_flight``
  batch) and all passes that dispatched;
* the same first pass of a rollout during which the simulated agents are
  stopped (SIGSTOP) until it ends: the dispatch path alone, without the
  fleet answering on the same cores (claims to the conductor, RabbitMQ
  delivering them, PostgreSQL recording them, the agents themselves);
  that rollout runs first, to one version, then the measured one to the
  next;
* completions per second over the whole rollout, from its creation to
  COMPLETED, with the time it took;
* the conductor's CPU time (from /proc, every process of it), per upgrade;
* the database sessions opened during the whole run, on PostgreSQL.

The main figure is split, from the reconciler's log lines, into the CPU
of its casts, of recording the upgrades and of marking them SENT, and the
rest of its passes (plans, leases, time-outs, resends), each per dispatch
and as a share of a raw cast. The raw casts are timed again after the
rollout: the CPU of a cast grows with the load of the cores, and the two
show how far it moved during the run. A thread of the benchmark also
casts in small bursts while the rollout runs, timing its own CPU: a raw
cast's CPU under the load the reconciler's casts see, the fairer
reference; the same bursts with the fleet idle show what the pacing
alone costs.

Before anything is timed, a rollout over a few agents of their own opens
the reconciler's send connections, as the raw casts open theirs first.

With ``--topology`` the conductor reads Trove's database (``[trove]
connection``, a temporary PostgreSQL database holding the tables and
columns trove-upgrade reads of Trove's, ``db/trove.py``), where every
measured agent is in a set of three: replication sets (a primary and two
replicas) and three-member clusters in turn. The rollouts then follow the
topology (one member of a set in flight, replicas first), and each pass
reads it once.

    python tools/bench/rollout_scale.py [--agents 2000]
        [--max-in-flight 200] [--processes 3] [--send-threads 8]
        [--connection URL] [--topology]

Nothing is asserted: it prints figures. All traffic stays on loopback.
"""

# The threading backend of oslo.service, selected as the services select
# it: before oslo.messaging, which would otherwise pick eventlet.
from trove_upgrade.common import threading_backend  # noqa: F401

import argparse
import os
import re
import signal
import sys
import tempfile
import time
import uuid

import sqlalchemy as sa

import measure
from trove_upgrade.common import context as tu_context
from trove_upgrade.common import rollout_states as rs
from trove_upgrade import conf
from trove_upgrade.db import common as db_common
from trove_upgrade.db import rollouts as db_rollouts
from trove_upgrade.db import trove as trove_db
from trove_upgrade.services import rollouts

# What the benchmarks share with the functional tests (tools/testbed), from
# the repository's root.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
from tools.testbed import fleet as fleet_fixture  # noqa: E402

CONF = conf.CONF
BIN = os.path.dirname(sys.executable)
RABBIT = measure.RABBIT
# Bounds every wait: a stuck run ends instead of looping.
COMPLETION_TIMEOUT = 1800
_RECONCILER = re.compile(r'Rollout reconciler [^:\s]+:(\d+) started')
_DISPATCHED = re.compile(
    r'Rollout (\S+) dispatched (\d+) upgrade\(s\) in ([\d.]+) s: '
    r'planned in ([\d.]+) s, '
    r'recorded in ([\d.]+) s, cast in ([\d.]+) s, marked SENT in '
    r'([\d.]+) s; process CPU ([\d.]+) s recording, ([\d.]+) s casting, '
    r'([\d.]+) s marking')
_SENT_AGAIN = re.compile(r'Upgrade \S+ sent to the agent of instance \S+ '
                         r'again')


# Members of each set the fleet is arranged in, with --topology.
SET_SIZE = 3


def _trove_tables(connection):
    """The tables and columns trove-upgrade reads of Trove's database.

    As ``db/trove.py`` declares them; the conductor reads them from the
    first agent's registration on.
    """
    engine = sa.create_engine(connection)
    try:
        trove_db.INSTANCES.metadata.create_all(engine)
    finally:
        engine.dispose()


def _trove_topology(connection, instance_ids):
    """Trove's records of ``instance_ids`` arranged in sets of three.

    Replication sets and clusters in turn; a remainder stays single.
    """
    engine = sa.create_engine(connection)
    try:
        rows = []
        for start in range(0, len(instance_ids), SET_SIZE):
            members = instance_ids[start:start + SET_SIZE]
            cluster = (start // SET_SIZE) % 2 and len(members) == SET_SIZE
            for n, instance_id in enumerate(members):
                rows.append({
                    'id': instance_id, 'name': 'bench-%s' % instance_id[:8],
                    'tenant_id': 'bench', 'task_id': 1,
                    'task_description': 'No tasks for the instance.',
                    'deleted': False,
                    'cluster_id': 'cluster-%d' % start if cluster else None,
                    'slave_of_id': (members[0] if n and not cluster
                                    and len(members) == SET_SIZE else None)})
        with engine.begin() as conn:
            conn.execute(trove_db.INSTANCES.insert(), rows)
    finally:
        engine.dispose()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--agents', type=int, default=2000)
    parser.add_argument('--max-in-flight', type=int, default=200)
    parser.add_argument('--processes', type=int, default=3)
    parser.add_argument('--rollout-interval', type=float, default=1.0,
                        help="the conductor's [conductor] rollout_interval")
    parser.add_argument('--send-threads', type=int, default=8,
                        help="the conductor's [conductor] "
                             "rollout_send_threads")
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
    parser.add_argument('--topology', action='store_true',
                        help='arrange the measured agents in Trove\'s '
                             'replication sets and clusters of three, in '
                             'a temporary Trove database on PostgreSQL')
    args = parser.parse_args()
    # Stopped by SIGTERM, it still stops the processes it started and
    # deletes its queues: the finally blocks run.
    signal.signal(signal.SIGTERM,
                  lambda signum, frame: sys.exit(128 + signum))
    CONF([], project='trove-upgrade', default_config_files=[],
         default_config_dirs=[])

    suffix = uuid.uuid4().hex[:8]
    exchange = 'trove_upgrade_bench_%s' % suffix
    rabbit_options = {
        'DEFAULT': {'transport_url': RABBIT, 'control_exchange': exchange},
        # The simulated agents hold no keys.
        'conductor': {'topic': 'trove_upgrade_conductor_bench_%s' % suffix,
                      'require_sealed': 'false'},
    }
    sessions = drop = None
    connection = args.connection
    if connection is None:
        connection, sessions, drop = measure.temporary_database(suffix)
    trove = drop_trove = None
    if args.topology:
        trove, _sessions, drop_trove = measure.temporary_database(
            'trove_' + suffix)
        _trove_tables(trove)
        rabbit_options['trove'] = {'connection': trove}
        CONF.set_override('connection', trove, group='trove')
    try:
        _bench(args, exchange, rabbit_options, connection, sessions, drop,
               trove)
    finally:
        if drop_trove is not None:
            trove_db.dispose()
            drop_trove()


def _bench(args, exchange, rabbit_options, connection, sessions, drop,
           trove):
    with tempfile.TemporaryDirectory() as workdir:
        measure.migrate(workdir, connection)
        CONF.set_override('connection', connection, group='database')
        fleet = fleet_fixture.Fleet(
            workdir, rabbit_options, connection,
            {'rollout_interval': args.rollout_interval,
             'periodic_interval': '60',
             'rollout_send_threads': args.send_threads},
            conductor_defaults={'executor_thread_pool_size':
                                args.conductor_threads})
        fleet.setUp()
        result = {}
        try:
            result.update(_run(args, fleet, exchange, trove))
        finally:
            fleet.cleanUp()
            db_common.get_engine().dispose()
            # Read once every process that opened one has ended: a
            # session is counted when its process reports it.
            if sessions is not None:
                result['sessions'] = sessions()
            if drop is not None:
                drop()
    _report(args, connection, result)


def _rollout(admin, version, group, max_in_flight):
    """Create a rollout of ``group`` to ``version``; return its id."""
    return rollouts.create_rollout(admin, {
        'name': 'bench-%s-%s' % (group, version),
        'instance_version': version, 'strategy': 'http',
        'location': 'https://127.0.0.1/trove-guestagent.tar',
        'selector': {'group': group}, 'canary': 0,
        'max_in_flight': max_in_flight, 'max_in_flight_kind': 'count',
        'max_failures': 0, 'max_failures_kind': 'count',
        'per_agent_retries': 0, 'agent_deadline': 600})['id']


def _passes(fleet, rollout_id):
    """Each pass's (count, seconds, planned, recorded, cast, marked).

    Then its CPU seconds recording, casting and marking SENT.
    """
    return [(int(m.group(2)),) + tuple(float(g) for g in m.groups()[2:])
            for m in _DISPATCHED.finditer(fleet.logs())
            if m.group(1) == rollout_id]


def _wait_for(admin, rollout_id, started):
    while True:
        status = db_rollouts.get_rollout(admin, rollout_id)['status']
        if status != rs.RUNNING:
            return status
        if time.monotonic() - started > COMPLETION_TIMEOUT:
            raise SystemExit('the rollout did not complete in %d s'
                             % COMPLETION_TIMEOUT)
        time.sleep(0.2)


def _warm_up(admin, fleet, args):
    """Open the reconciler's send connections before anything is timed.

    As the raw casts open theirs first: a rollout over twice as many
    agents of their own as there are send threads, all at once.
    """
    count = 2 * args.send_threads
    fleet.start_agents(count, labels='group=warmup', multiplex=True)
    rollout_id = _rollout(admin, 'v2.0.0', 'warmup', count)
    status = _wait_for(admin, rollout_id, time.monotonic())
    if status != rs.COMPLETED:
        raise SystemExit('the warm-up rollout ended %s' % status)


def _first_pass_alone(admin, fleet, args):
    """The first pass of a rollout to v2.0.0 with the agents stopped."""
    started = time.monotonic()
    for process in fleet.agent_processes:
        os.killpg(process.pid, signal.SIGSTOP)
    try:
        rollout_id = _rollout(admin, 'v2.0.0', 'bench', args.max_in_flight)
        while not _passes(fleet, rollout_id):
            if time.monotonic() - started > COMPLETION_TIMEOUT:
                raise SystemExit('the rollout dispatched nothing in %d s'
                                 % COMPLETION_TIMEOUT)
            time.sleep(0.05)
    finally:
        for process in fleet.agent_processes:
            os.killpg(process.pid, signal.SIGCONT)
    status = _wait_for(admin, rollout_id, started)
    if status != rs.COMPLETED:
        raise SystemExit('the first rollout ended %s' % status)
    return _passes(fleet, rollout_id)[0]


def _run(args, fleet, exchange, trove=None):
    conductor = fleet.start_conductor()
    started = time.monotonic()
    per_process = -(-args.agents // args.processes)
    remaining = args.agents
    measured = []
    while remaining > 0:
        measured += fleet.start_agents(min(per_process, remaining),
                                       labels='group=bench', multiplex=True)
        remaining -= per_process
    registration = time.monotonic() - started
    if trove is not None:
        _trove_topology(trove, sorted(measured))
    raw_rate, raw_cpu = measure.bench_raw_casts(
        exchange, max(args.agents, 1000))
    reconciler = int(_RECONCILER.search(fleet.logs()).group(1))

    admin = tu_context.get_admin_context()
    _warm_up(admin, fleet, args)
    alone = _first_pass_alone(admin, fleet, args)
    claims_before = fleet.claims()
    sent_again_before = len(_SENT_AGAIN.findall(fleet.logs()))
    cpu_before = measure.cpu_seconds(conductor.pid)
    reconciler_before = measure.own_cpu_seconds(reconciler)
    with measure.RawCastsMeanwhile(exchange) as meanwhile:
        started = time.monotonic()
        rollout_id = _rollout(admin, 'v3.0.0', 'bench', args.max_in_flight)
        status = _wait_for(admin, rollout_id, started)
        seconds = time.monotonic() - started
        cpu = measure.cpu_seconds(conductor.pid) - cpu_before
        reconciler_cpu = (measure.own_cpu_seconds(reconciler)
                          - reconciler_before)
    claims = fleet.claims() - claims_before
    sent_again = len(_SENT_AGAIN.findall(fleet.logs())) - sent_again_before
    _rate, raw_cpu_after = measure.bench_raw_casts(
        exchange, max(args.agents, 1000))
    with measure.RawCastsMeanwhile(exchange) as paced_idle:
        time.sleep(IDLE_PACED_SECONDS)
    return {'status': status, 'seconds': seconds, 'cpu': cpu,
            'passes': _passes(fleet, rollout_id), 'alone': alone,
            'registration': registration,
            'raw_rate': raw_rate, 'raw_cpu': raw_cpu,
            'raw_cpu_after': raw_cpu_after,
            'raw_cpu_meanwhile': meanwhile.cpu_per_cast(),
            'raw_cpu_paced_idle': paced_idle.cpu_per_cast(),
            'reconciler_cpu': reconciler_cpu,
            'claimed_twice': sum(1 for c in claims.values() if c > 1),
            'sent_again': sent_again}


# How long the paced raw casts run with the fleet idle, after the rollout.
IDLE_PACED_SECONDS = 5

# Issue 16's target: the reconciler's CPU per dispatch at most twice a
# raw cast's, both measured in the same run.
TARGET_RATIO = 2.0


def _report(args, connection, result):
    passes = result['passes']
    dispatched = sum(p[0] for p in passes)
    raw_rate = result['raw_rate']
    print('rollout_scale: %d simulated agents in %d processes, '
          'max_in_flight %d, %d send thread(s), database %s, '
          'RabbitMQ 127.0.0.1:5672'
          % (args.agents, args.processes, args.max_in_flight,
             args.send_threads,
             connection.split(':')[0].split('+')[0]))
    if args.topology:
        print('topology on: the agents in Trove\'s replication sets and '
              'clusters of %d (one member of a set in flight at once)'
              % SET_SIZE)
    print('rollout %s; %d upgrades dispatched, %d agents claimed twice, '
          '%d upgrades sent again (not claimed within [conductor] '
          'resend_interval)' % (result['status'], dispatched,
                                result['claimed_twice'],
                                result['sent_again']))
    per_dispatch = result['reconciler_cpu'] / max(dispatched, 1)
    ratio = per_dispatch / result['raw_cpu']
    print()
    print('CPU per dispatch (the main figure: it moves far less than the '
          'rates with the load)')
    print('%-58s %10s %10s' % ('', 'ms CPU', 'x raw'))
    print('%-58s %10.3f' % ('raw oslo.messaging cast, one thread',
                            1000.0 * result['raw_cpu']))
    print('%-58s %10.3f %9.2fx' % (
        'reconciler, per upgrade dispatched (every pass)',
        1000.0 * per_dispatch, ratio))
    print('target: reconciler <= %.1fx a raw cast: %s'
          % (TARGET_RATIO, 'met' if ratio <= TARGET_RATIO else 'missed'))
    print('%-58s %10.3f %9.2fx' % (
        'raw cast again, after the rollout (how far it drifts)',
        1000.0 * result['raw_cpu_after'],
        per_dispatch / result['raw_cpu_after']))
    paced = 'in bursts of %d every %.0f ms' % (
        measure.RawCastsMeanwhile.BURST,
        1000 * measure.RawCastsMeanwhile.PERIOD)
    for label, cpu in (
            ('raw cast %s, fleet idle' % paced, result['raw_cpu_paced_idle']),
            ('raw cast %s, during the rollout' % paced,
             result['raw_cpu_meanwhile'])):
        print('%-58s %10.3f %9.2fx' % (label, 1000.0 * cpu,
                                       per_dispatch / cpu))
    recording, casting, marking = (sum(p[i] for p in passes)
                                   for i in (6, 7, 8))
    rest = result['reconciler_cpu'] - recording - casting - marking
    for label, cpu in (('  of which casting (upgrade_many)', casting),
                       ('  of which recording the upgrades', recording),
                       ('  of which marking them SENT', marking),
                       ('  of which the rest of the passes (plans, leases, '
                        'resends)', rest)):
        share = cpu / max(dispatched, 1)
        print('%-58s %10.3f %9.2fx' % (label, 1000.0 * share,
                                       share / result['raw_cpu']))
    print()
    print('Wall clock, as context (the fleet, RabbitMQ and the database '
          'share the cores)')
    print('agents registered and listening in %.1f s'
          % result['registration'])
    print('rollout completed in %.2f s' % result['seconds'])
    print('%-58s %10s %8s' % ('', 'per second', 'of raw'))
    print('%-58s %10.1f' % ('raw oslo.messaging casts to a queue, one thread',
                            raw_rate))

    def line(label, rate):
        print('%-58s %10.1f %7.0f%%' % (label, rate, 100.0 * rate / raw_rate))

    first = passes[0]
    line('dispatches, first pass (%d upgrades)' % first[0],
         first[0] / first[1])
    alone = result['alone']
    line('dispatches, first pass, agents stopped (%d upgrades)' % alone[0],
         alone[0] / alone[1])
    line('dispatches, all %d passes that dispatched' % len(passes),
         dispatched / sum(p[1] for p in passes))
    line('completions, whole rollout', dispatched / result['seconds'])
    print('first pass: planned in %.3f s, recorded in %.3f s, cast in '
          '%.3f s, marked SENT in %.3f s' % first[2:6])
    print('agents stopped: planned in %.3f s, recorded in %.3f s, cast in '
          '%.3f s, marked SENT in %.3f s' % alone[2:6])
    print('conductor CPU: %.2f s (%.2f ms per upgrade, its agents\' '
          'claims and reports included)'
          % (result['cpu'], 1000.0 * result['cpu'] / max(dispatched, 1)))
    if 'sessions' in result:
        print('database sessions opened in the whole run (registration, '
              'both rollouts): %d' % result['sessions'])


if __name__ == '__main__':
    main()
