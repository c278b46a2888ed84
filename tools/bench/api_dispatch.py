"""How fast the API accepts upgrades, next to raw oslo.messaging casts.

An accepted POST /upgrades validates the body, records the upgrade and its
first event, casts the upgrade to the instance's topic and records SENT.
This benchmark measures that rate with a few concurrent HTTP clients against
a real ``trove-upgrade-api`` process (noauth2) on the real RabbitMQ, and in
the same run the rate at which the same number of client threads cast the
same message with plain oslo.messaging on the same RabbitMQ: the ceiling the
dispatch path could reach.

    python tools/bench/api_dispatch.py [--requests 600] [--clients 4]
        [--connection sqlite|mysql+pymysql://...]

Nothing is asserted: it prints figures. Every request goes to loopback.
"""

# Importing trove_upgrade.cmd selects the threading backend of oslo.service;
# it must come before oslo.messaging, which would otherwise pick eventlet.
import trove_upgrade.cmd  # noqa: F401

import argparse
import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import uuid

from oslo_config import cfg
import oslo_messaging as messaging
import requests

from trove_upgrade import context as tu_context

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
    with open('/proc/%d/stat' % pid) as f:
        fields = f.read().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


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
    seconds = _run_concurrently(clients, total, cast)
    transport.cleanup()
    return total, seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--requests', type=int, default=600)
    parser.add_argument('--clients', type=int, default=4)
    parser.add_argument('--connection', default=None,
                        help='database URL; default SQLite in a temp dir')
    args = parser.parse_args()

    exchange = 'trove_upgrade_bench_%s' % uuid.uuid4().hex[:8]
    with tempfile.TemporaryDirectory() as workdir:
        api, url = _start_api(workdir, exchange, args.connection)
        try:
            # Warm up: the first requests open database and AMQP connections.
            bench_api(url, 1, 10)
            cpu_before = _cpu_seconds(api.pid)
            posts, api_seconds = bench_api(url, args.clients, args.requests)
            api_cpu = _cpu_seconds(api.pid) - cpu_before
        finally:
            api.terminate()
            api.wait(timeout=30)
        casts, cast_seconds = bench_raw_casts(exchange, args.clients,
                                              args.requests)

    database = args.connection.split(':')[0] if args.connection else 'sqlite'
    api_rate = posts / api_seconds
    cast_rate = casts / cast_seconds
    print('api_dispatch: %d requests from %d concurrent clients, database '
          '%s, RabbitMQ 127.0.0.1:5672'
          % (args.requests, args.clients, database))
    print('%-44s %10s %10s %12s' % ('', 'count', 'seconds', 'per second'))
    print('%-44s %10d %10.2f %12.1f' % (
        'accepted POST /upgrades (recorded and cast)', posts, api_seconds,
        api_rate))
    print('%-44s %10d %10.2f %12.1f' % (
        'raw oslo.messaging casts, same message', casts, cast_seconds,
        cast_rate))
    print('API rate / raw cast rate: %.0f%%; API process CPU: %.2f s '
          '(%.1f ms per accepted POST)'
          % (100.0 * api_rate / cast_rate, api_cpu, 1000.0 * api_cpu / posts))


if __name__ == '__main__':
    main()
