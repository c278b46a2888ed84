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

"""The conductor's CPU per heartbeat and per upgrade lifecycle.

Starts a real ``trove-upgrade-conductor`` on the real RabbitMQ and a
database (a temporary PostgreSQL one unless ``--connection`` says
otherwise), sends it agents' messages with ``ConductorAPI`` from a few
threads, sealed with each instance's key as ``[conductor] require_sealed``
(the default) wants, and reads the CPU the conductor used from /proc
(every process of it). Beside it, measured in the same run as in
``rollout_scale.py``: the CPU of one raw oslo.messaging cast to a bound
queue, and the CPU a bare oslo.messaging RPC server (a process of its own,
one endpoint that answers at once, the conductor's executor) spends on
each call it answers and on each cast it consumes: what any call or cast
costs before the conductor's own work. It prints:

* CPU per heartbeat that brings nothing new (not written, see
  ``[conductor] heartbeat_write_interval``), per such heartbeat once the
  stored one is old enough to be written again (authenticated and
  written with the next batch), and per heartbeat that changes the agent
  (written at once);
* agents one conductor core holds at the default heartbeat interval, the
  default write interval deciding how many of their heartbeats are
  written (the bench's conductor uses ``--write-interval`` only so that
  the run need not wait the default 60 s);
* CPU per upgrade lifecycle: what an agent sends for one upgrade, by
  agents registered with the conductor first as agents are: the claim,
  which records DOWNLOADING, then the three stage reports after it and
  the final SUCCESS through the agent's own outbox (``agent.outbox``).
  Twice: with each report flushed on its own, as when the stages are at
  least ``[agent] report_interval`` apart (the claim's call, each stage
  cast with the stages before it, the final report's call), and with
  the four waiting in one flush, as when the stages come faster or the
  reports waited out an outage (two calls). Half of ``--upgrades``
  each. The calls and casts are counted as they are sent; beside each
  lifecycle, as many raw calls answered and raw casts consumed. The raw
  server is measured before the conductor starts and again after it
  stopped, both printed, and their mean is the reference: the machine's
  speed drifts during the run.

    python tools/bench/conductor_cost.py [--agents 2000] [--upgrades 500]
        [--threads 8] [--connection URL]

Nothing is asserted: it prints figures. All traffic stays on loopback.
"""

# The threading backend of oslo.service, selected as the services select
# it: before oslo.messaging, which would otherwise pick eventlet.
from trove_upgrade.common import threading_backend  # noqa: F401

import argparse
import collections
import concurrent.futures
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import kombu
import oslo_messaging as messaging
from oslo_utils import uuidutils

import measure
from trove_upgrade.agent import journal as journal_mod
from trove_upgrade.agent import outbox as outbox_mod
from trove_upgrade.common import conductor_rpcapi as rpcapi
from trove_upgrade.common import context as tu_context
from trove_upgrade.common import rpc
from trove_upgrade.common import rpc_interface
from trove_upgrade.common import states
from trove_upgrade.conductor import heartbeats
from trove_upgrade import conf
from trove_upgrade.db import common as db_common
from trove_upgrade.db import transitions as db_transitions
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.services import sealing_keys

# What the benchmarks share with the functional tests (tools/testbed), from
# the repository's root.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
from tools.testbed import fleet as fleet_fixture  # noqa: E402

CONF = conf.CONF
RABBIT = measure.RABBIT
# The reports ``agent.pipeline`` makes after the claim, in order.
STAGES = (states.VERIFYING, states.INSTALLING, states.RESTARTING,
          states.SUCCESS)
AGENT = dict(agent_version='2026.2.0', guest_version='v1.0.0',
             rpc_api_version='1.1', labels={'group': 'bench'},
             host='bench-host')


def _queue_empty(topic):
    with kombu.Connection(RABBIT.replace('rabbit://', 'amqp://')) as conn:
        _, count, _ = conn.channel().queue_declare(topic, passive=True)
        return count == 0


def _settle(api, ctxt, topic, instance_id):
    """Wait until the server has taken every cast, then one call more.

    Then for a batch of heartbeats to be flushed, which is their cost too.
    """
    while not _queue_empty(topic):
        time.sleep(0.05)
    api.register_agent(ctxt, instance_id, state='RUNNING', **AGENT)
    time.sleep(heartbeats.FLUSH_INTERVAL + 0.3)


def _each(pool, function, items):
    for future in [pool.submit(function, item) for item in items]:
        future.result()


def _measure(pid, apis, ctxt, topic, pool, function, items):
    """CPU seconds of ``pid``'s processes while ``function`` ran on items."""
    first = next(iter(apis))
    _settle(apis[first], ctxt, topic, first)
    before = measure.cpu_seconds(pid)
    _each(pool, function, items)
    _settle(apis[first], ctxt, topic, first)
    return measure.cpu_seconds(pid) - before


class _Counted:
    """Counts the calls and casts ``ConductorAPI`` objects send."""

    def __init__(self):
        self.sent = collections.Counter()
        self._lock = threading.Lock()

    def watch(self, api):
        send = api._send

        def counted(context, method, values, version=None, kind=None):
            with self._lock:
                self.sent[kind or rpc_interface.CONDUCTOR.kind(method)] += 1
            return send(context, method, values, version=version, kind=kind)
        api._send = counted
        return api


def _lifecycle(apis, ctxt, workdir, together, counted):
    """One upgrade's messages: the claim, then the reports by outbox.

    ``together``: the reports wait in the outbox for one flush, rather
    than each being flushed as soon as it is made.
    """
    def lifecycle(pair):
        instance_id, upgrade_id = pair
        api = counted.watch(apis[instance_id])
        api.start_upgrade(ctxt, instance_id, upgrade_id, 'v1.0.0')
        journal = journal_mod.UpgradeJournal(
            os.path.join(workdir, 'agent-%s' % upgrade_id))
        outbox = outbox_mod.Outbox(journal, api, ctxt, instance_id,
                                   CONF.agent.report_confirm_interval)
        for state in STAGES:
            with journal.update() as data:
                journal.add_report(data, upgrade_id, state, None, 'v1.0.0',
                                   'v2.0.0')
            if not together:
                outbox.flush()
        outbox.flush()
        # Restored: the registration and heartbeats are not counted.
        del api._send
    return lifecycle


def _run_conductor(pid, topic, args, ctxt, apis, upgrade_ids,
                   keys_settled, workdir):
    """Per-heartbeat and per-lifecycle CPU of the conductor at ``pid``."""
    instances = [i for i in apis if i not in dict(upgrade_ids)]
    result = {}
    # Keys older than the conductor's look back for changed keys stay
    # cached once read, as a fleet's do: registering reads them.
    time.sleep(max(0, keys_settled - time.monotonic()))
    with concurrent.futures.ThreadPoolExecutor(args.threads) as pool:
        _each(pool, lambda i: apis[i].register_agent(
            ctxt, i, state='RUNNING', **AGENT), list(apis))
        # Once the stored heartbeats are old enough, each is written.
        time.sleep(args.write_interval)
        result['due'] = _measure(
            pid, apis, ctxt, topic, pool,
            lambda i: apis[i].heartbeat(ctxt, i, state='RUNNING', **AGENT),
            instances) / len(instances)
        # Just written: these are not.
        result['unchanged'] = _measure(
            pid, apis, ctxt, topic, pool,
            lambda i: apis[i].heartbeat(ctxt, i, state='RUNNING', **AGENT),
            instances) / len(instances)
        result['changed'] = _measure(
            pid, apis, ctxt, topic, pool,
            lambda i: apis[i].heartbeat(ctxt, i, state='BACKUP', **AGENT),
            instances) / len(instances)

        half = len(upgrade_ids) // 2
        for name, together, pairs in (
                ('lifecycle', False, upgrade_ids[:half]),
                ('lifecycle_together', True, upgrade_ids[half:])):
            counted = _Counted()
            result[name] = _measure(
                pid, apis, ctxt, topic, pool,
                _lifecycle(apis, ctxt, workdir, together, counted),
                pairs) / len(pairs)
            result[name + '_sent'] = {
                kind: sent / len(pairs)
                for kind, sent in counted.sent.items()}
    return result


class _Answer(object):
    """The bare RPC server's endpoint: answers a report at once.

    A cast of it is consumed and its answer dropped.
    """

    target = messaging.Target(version='1.0')

    def report(self, ctxt, **kwargs):
        return {'recorded': True}


def _serve_raw(exchange, topic):
    """Run the bare RPC server until standard input closes."""
    transport = messaging.get_rpc_transport(CONF, url=RABBIT)
    server = messaging.get_rpc_server(
        transport, messaging.Target(topic=topic, exchange=exchange,
                                    server='bench'), [_Answer()],
        access_policy=messaging.DefaultRPCAccessPolicy)
    server.start()
    sys.stdin.read()
    server.stop()
    server.wait()
    transport.cleanup()


def bench_raw_calls(exchange, total, threads):
    """CPU seconds a bare RPC server spends per call and per cast.

    Per call it answers, then per cast it consumes (the casts taken by
    its executor threads, then one call that follows them through the
    queue, whose CPU is shared by the casts).
    """
    topic = 'trove_upgrade_bench_raw_calls'
    server = subprocess.Popen(
        [sys.executable, __file__, '--serve-raw', exchange, topic],
        stdin=subprocess.PIPE)
    transport = messaging.get_rpc_transport(CONF, url=RABBIT)
    try:
        client = messaging.get_rpc_client(
            transport, messaging.Target(topic=topic, exchange=exchange,
                                        version='1.0'))
        ctxt = tu_context.get_admin_context().to_dict()

        def call(_index=None, kind='call', timeout=None):
            getattr(client.prepare(timeout=timeout), kind)(
                ctxt, 'report', instance_id=str(uuid.uuid4()),
                upgrade_id=str(uuid.uuid4()), state='INSTALLING',
                detail=None, from_version='v1.0.0', to_version='v2.0.0')

        # Short waits until the server listens; then long ones, as a
        # loaded machine may answer slowly.
        for _ in range(60):
            try:
                call(timeout=1)
                break
            except (messaging.MessagingTimeout,
                    messaging.MessageDeliveryFailure):
                time.sleep(0.5)
        with concurrent.futures.ThreadPoolExecutor(threads) as pool:
            before = measure.cpu_seconds(server.pid)
            _each(pool, call, range(total))
            cpu = measure.cpu_seconds(server.pid) - before
            before = measure.cpu_seconds(server.pid)
            _each(pool, lambda _i: call(kind='cast'), range(total))
            while not _queue_empty(topic):
                time.sleep(0.05)
            call()
            time.sleep(0.3)
            cast_cpu = measure.cpu_seconds(server.pid) - before
    finally:
        server.stdin.close()
        server.wait(30)
        with kombu.Connection(RABBIT.replace('rabbit://', 'amqp://')) as conn:
            for queue in (topic, '%s.bench' % topic):
                conn.channel().queue_delete(queue)
        transport.cleanup()
    return cpu / total, cast_cpu / total


def _agents(admin, count):
    """``count`` instances with a sealing key each, as production has."""
    return {instance_id: sealing_keys.add_key(admin, instance_id) and
            sealing_keys.keyring(admin, instance_id)
            for instance_id in (uuidutils.generate_uuid()
                                for _ in range(count))}


def _upgrades(admin, instance_ids):
    """One SENT upgrade for each of ``instance_ids``."""
    pairs = []
    for instance_id in instance_ids:
        upgrade = db_upgrades.create_upgrade(admin, {
            'instance_id': instance_id, 'instance_version': 'v2.0.0',
            'strategy': 'http',
            'location': 'https://127.0.0.1/guest-v2.0.0.tar'})
        db_transitions.transition_upgrade(admin, upgrade['id'], states.SENT,
                                          'api')
        pairs.append((instance_id, upgrade['id']))
    return pairs


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--agents', type=int, default=2000)
    parser.add_argument('--upgrades', type=int, default=500)
    parser.add_argument('--threads', type=int, default=8,
                        help='client threads sending')
    parser.add_argument('--raw-casts', type=int, default=2000,
                        help='raw casts timed for the reference')
    parser.add_argument('--raw-calls', type=int, default=2000,
                        help='raw calls timed for the reference')
    parser.add_argument('--serve-raw', nargs=2, metavar=('EXCHANGE', 'TOPIC'),
                        help=argparse.SUPPRESS)
    parser.add_argument('--write-interval', type=int, default=20,
                        help='[conductor] heartbeat_write_interval of the '
                             'bench\'s conductor, seconds; longer than a '
                             'phase of heartbeats takes')
    parser.add_argument('--connection', default=None,
                        help='database URL; default a temporary database '
                             'on the PostgreSQL of 127.0.0.1')
    args = parser.parse_args()
    # Stopped by SIGTERM, it still stops the processes it started and
    # deletes its queues: the finally blocks run.
    signal.signal(signal.SIGTERM,
                  lambda signum, frame: sys.exit(128 + signum))
    CONF([], project='trove-upgrade', default_config_files=[],
         default_config_dirs=[])
    if args.serve_raw:
        return _serve_raw(*args.serve_raw)
    suffix = uuid.uuid4().hex[:8]
    exchange = 'trove_upgrade_bench_%s' % suffix
    topic = 'trove_upgrade_conductor_bench_%s' % suffix
    messaging.get_rpc_transport(CONF, url=RABBIT).cleanup()  # its options
    CONF.set_override('transport_url', RABBIT)
    CONF.set_override('control_exchange', exchange)
    connection, drop = args.connection, None
    if connection is None:
        connection, _sessions, drop = measure.temporary_database(
            suffix)
    ctxt = tu_context.get_admin_context()
    try:
        with tempfile.TemporaryDirectory() as workdir:
            measure.migrate(workdir, connection)
            CONF.set_override('connection', connection, group='database')
            keyrings = _agents(ctxt, args.agents + args.upgrades)
            keys_settled = (time.monotonic() + sealing_keys.CLOCK_SKEW
                            + CONF.conductor.instance_key_cache_time + 1)
            upgrade_ids = _upgrades(ctxt, list(keyrings)[args.agents:])
            fleet = fleet_fixture.Fleet(
                workdir, {'DEFAULT': {'transport_url': RABBIT,
                                      'control_exchange': exchange},
                          'conductor': {
                              'topic': topic,
                              'heartbeat_write_interval':
                                  str(args.write_interval)}},
                connection, {'periodic_interval': '600',
                             'rollout_interval': '600'})
            fleet.setUp()
            try:
                _rate, raw_cast = measure.bench_raw_casts(
                    exchange, args.raw_casts)
                raw_call, raw_consumed = bench_raw_calls(
                    exchange, args.raw_calls, args.threads)
                conductor = fleet.start_conductor()
                CONF.set_override('topic', topic, group='conductor')
                rpc.cleanup()
                apis = {i: rpcapi.ConductorAPI(k)
                        for i, k in keyrings.items()}
                ours = _run_conductor(conductor.pid, topic, args, ctxt,
                                      apis, upgrade_ids, keys_settled,
                                      workdir)
                rpc.cleanup()
            finally:
                fleet.cleanUp()
            raw_after = bench_raw_calls(exchange, args.raw_calls,
                                        args.threads)
            # Declared again by the raw server after the fleet deleted it.
            with kombu.Connection(RABBIT.replace('rabbit://',
                                                 'amqp://')) as conn:
                conn.channel().exchange_delete(exchange)
    finally:
        db_common.get_engine().dispose()
        if drop is not None:
            drop()
    _report(args, connection, ours, raw_cast, (raw_call, raw_consumed),
            raw_after)


def _report(args, connection, ours, raw_cast, raw_before, raw_after):
    raw_call, raw_consumed = ((before + after) / 2
                              for before, after in zip(raw_before, raw_after))
    interval = CONF.agent.heartbeat_interval
    write_every = max(1.0, heartbeats.write_interval() / interval)
    # Per agent and heartbeat interval: one heartbeat, written (with a
    # batch) once in ``write_every``.
    per_beat = (ours['unchanged'] * (write_every - 1)
                + ours['due']) / write_every
    ms = 1000.0
    print('conductor_cost: %d agents, %d upgrades, %d client threads, '
          'database %s' % (args.agents, args.upgrades, args.threads,
                           connection.split('://')[0]))
    print('  CPU of one raw oslo.messaging cast (reference):          '
          '%.3f ms' % (raw_cast * ms))
    print('  conductor CPU per heartbeat, nothing new (not written):  '
          '%.3f ms (%.1fx a raw cast)' % (ours['unchanged'] * ms,
                                          ours['unchanged'] / raw_cast))
    print('  conductor CPU per heartbeat due for a write (batched):   '
          '%.3f ms (%.1fx a raw cast)' % (ours['due'] * ms,
                                          ours['due'] / raw_cast))
    print('  conductor CPU per heartbeat that changes the agent:      '
          '%.3f ms (%.1fx a raw cast)' % (ours['changed'] * ms,
                                          ours['changed'] / raw_cast))
    print('  heartbeats written at the defaults: 1 in %.0f (interval %.0f '
          's, write interval %.0f s)' % (write_every, interval,
                                         heartbeats.write_interval()))
    print('  agents per conductor core at the default interval: %d '
          '(target >= 20,000)' % (interval / per_beat))
    print('  server CPU per raw oslo.messaging call answered '
          '(reference): %.3f ms (%.3f before the conductor, %.3f after)'
          % (raw_call * ms, raw_before[0] * ms, raw_after[0] * ms))
    print('  server CPU per raw oslo.messaging cast consumed '
          '(reference): %.3f ms (%.3f before the conductor, %.3f after)'
          % (raw_consumed * ms, raw_before[1] * ms, raw_after[1] * ms))
    for name, how in (('lifecycle', 'each report alone'),
                      ('lifecycle_together', 'its reports in one flush')):
        calls = ours[name + '_sent'].get('call', 0)
        casts = ours[name + '_sent'].get('cast', 0)
        raw = calls * raw_call + casts * raw_consumed
        print('  conductor CPU per upgrade lifecycle (claim, %d stages, '
              'final), %s: %.2f ms (target <= 8 ms); %.1f calls + %.1f '
              'casts, as many raw: %.2f ms, so %.2f ms per message beyond '
              'a raw one'
              % (len(STAGES) - 1, how, ours[name] * ms, calls, casts,
                 raw * ms, (ours[name] - raw) / (calls + casts) * ms))


if __name__ == '__main__':
    main()
