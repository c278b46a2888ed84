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

"""Light simulated upgrade agents: real RPC consumers with a fake install.

One process runs many of them. Each registers through the real
ConductorAPI, serves its instance's ``guestagent_upgrade.<instance id>``
topic with a real oslo.messaging RPC server, and answers an ``upgrade``
cast as the real agent does on the wire: it claims the upgrade
(``start_upgrade``), reports INSTALLING, then SUCCESS or FAILED, and on
success heartbeats its new version; a claim or report that fails (no
answer, the conductor's database or the broker away) is sent again, as
the real agent's runner and outbox do. Installing takes no time, or
``--install-seconds``.

The rollout functional tests and ``tools/bench/rollout_scale.py`` start it
as a subprocess::

    python tools/testbed/simulated_agents.py \\
        --config-file rabbit.conf --instances ids.txt --claims claims.log \\
        [--fail-file failing.txt] [--labels group=blue,az=az1] \\
        [--guest-version v1.0.0] [--heartbeat-interval 2] [--multiplex] \\
        [--install-seconds 1] [--sends sends.log]

With ``--multiplex`` the process instead consumes every agent's topic
queue (declared as oslo.messaging declares it) on one AMQP connection and
hands each ``upgrade`` message to the same endpoint through a small thread
pool: RabbitMQ here accepts fewer than a thousand connections, so the
2,000 agents of ``tools/bench/rollout_scale.py`` cannot each have one.
The messages, their envelope and everything the agents send back are the
same.

``--instances`` lists one instance id a line; ``--fail-file`` lists those
whose install fails, read again at every upgrade so a test can change it;
every claim answer is appended to ``--claims`` as ``<instance id>
<upgrade id> <proceed>`` so that a test counts them. With ``--sends``,
every ``upgrade`` message received and every claim or report first sent
is appended there as ``<unix time> <instance id> <upgrade id> <what>``
(``received``, ``start_upgrade`` or the reported state), so that a test
compares them with what the database recorded and when. "READY <n>" on stdout
says every agent registered and listens. SIGTERM ends the process.
"""

import argparse
import concurrent.futures
import json
import os
import signal
import socket
import sys
import threading
import time

# Selects oslo.service's threading backend before oslo.messaging loads.
from trove_upgrade.common import threading_backend  # noqa: F401

import kombu
import oslo_messaging as messaging

# Declares the agent's endpoint, whose signature the RPC server checks
# every message against (rpc.RefusingDispatcher).
from trove_upgrade.agent import manager as agent_manager  # noqa: F401
from trove_upgrade.common import conductor_rpcapi as conductor_rpcapi
from trove_upgrade.common import context as tu_context
from trove_upgrade.common import rpc
from trove_upgrade.common import rpc_interface
from trove_upgrade.common import states
from trove_upgrade import conf

CONF = conf.CONF
AGENT_VERSION = 'simulated-1.0'
# Seconds a simulated agent keeps sending one claim or report before it
# gives up: each send waits [DEFAULT] rpc_response_timeout for the answer,
# or fails at once (the conductor's database or the broker is away).
CALL_PATIENCE = 300


class SimulatedAgent:
    """The RPC endpoint of one simulated agent."""

    target = messaging.Target(version='1.0')

    def __init__(self, fleet, instance_id):
        self.fleet = fleet
        self.instance_id = instance_id
        self.guest_version = fleet.guest_version

    def register(self):
        self.fleet.conductor.register_agent(
            self.fleet.context, self.instance_id, AGENT_VERSION,
            self.guest_version, '1.0', 'RUNNING', self.fleet.labels,
            'simulated')

    def _call(self, method, *args):
        """Call the conductor, again until it answers.

        As the real agent's runner and outbox do, whatever the failure: a
        conductor killed with the message in hand never answers (the next
        one records a resent claim or report once: a repeated claim is
        granted again, a repeated report ignored), a conductor whose
        database is away answers DatabaseUnavailableError, a broker that is
        away refuses the send, and one that restarts returns it (no
        conductor's queue yet). Giving up on the first of these left the
        upgrade unfinished, and the rollout sent the agent a second one.
        """
        self.fleet.record_send(self.instance_id, args[0],
                               args[1] if method == 'report_upgrade_state'
                               else method)
        deadline = time.monotonic() + CALL_PATIENCE
        while True:
            try:
                return getattr(self.fleet.conductor, method)(
                    self.fleet.context, self.instance_id, *args)
            except Exception as e:
                if time.monotonic() > deadline:
                    raise
                sys.stderr.write('%s: %s failed, sent again: %s: %s\n' % (
                    self.instance_id, method, type(e).__name__,
                    str(e).split('\n')[0]))
                time.sleep(1)

    def upgrade(self, context, upgrade_id, instance_id, instance_version,
                strategy, location, metadata=None, allow_downgrade=False):
        self.fleet.record_send(self.instance_id, upgrade_id, 'received')
        if self.guest_version == instance_version:
            # As the real agent: already there, SUCCESS without a claim.
            self._call('report_upgrade_state', upgrade_id, states.SUCCESS,
                       'already at %s' % instance_version,
                       self.guest_version, instance_version)
            return
        answer = self._call('start_upgrade', upgrade_id, self.guest_version)
        self.fleet.record_claim(self.instance_id, upgrade_id,
                                answer['proceed'])
        if not answer['proceed']:
            return
        self._call('report_upgrade_state', upgrade_id, states.INSTALLING,
                   None, self.guest_version, instance_version)
        time.sleep(self.fleet.install_seconds)
        if self.instance_id in self.fleet.failing():
            self._call('report_upgrade_state', upgrade_id, states.FAILED,
                       'simulated install failure', self.guest_version,
                       instance_version)
            return
        from_version = self.guest_version
        self.guest_version = instance_version
        self._call('report_upgrade_state', upgrade_id, states.SUCCESS, None,
                   from_version, instance_version)
        self.fleet.conductor.heartbeat(
            self.fleet.context, self.instance_id, AGENT_VERSION,
            self.guest_version, '1.0', 'RUNNING', self.fleet.labels,
            'simulated')


class Fleet:
    """Every simulated agent of this process."""

    def __init__(self, instance_ids, labels, guest_version, fail_file,
                 claims_path, sends_path=None, install_seconds=0):
        self.context = tu_context.RequestContext(request_id='req-simulated')
        self.conductor = conductor_rpcapi.ConductorAPI()
        self.labels = labels
        self.guest_version = guest_version
        self.fail_file = fail_file
        self.claims = open(claims_path, 'a', buffering=1)
        self.sends = sends_path and open(sends_path, 'a', buffering=1)
        self.install_seconds = install_seconds
        self.lock = threading.Lock()
        self.agents = [SimulatedAgent(self, i) for i in instance_ids]
        self.servers = []

    def failing(self):
        if not self.fail_file or not os.path.exists(self.fail_file):
            return set()
        with open(self.fail_file) as f:
            return {line.strip() for line in f if line.strip()}

    def record_claim(self, instance_id, upgrade_id, proceed):
        with self.lock:
            self.claims.write('%s %s %s\n' % (instance_id, upgrade_id,
                                              proceed))

    def record_send(self, instance_id, upgrade_id, what):
        if not self.sends:
            return
        with self.lock:
            self.sends.write('%.6f %s %s %s\n' % (time.time(), instance_id,
                                                  upgrade_id, what))

    def heartbeat_forever(self, interval, stopping):
        """Every agent heartbeats its version, as real agents do.

        A conductor killed after it took a report from the queue loses
        it; the next heartbeat still tells the version the agent runs.
        """
        while not stopping.wait(interval):
            for agent in self.agents:
                self.conductor.heartbeat(
                    self.context, agent.instance_id, AGENT_VERSION,
                    agent.guest_version, '1.0', 'RUNNING', self.labels,
                    'simulated')

    def start(self):
        for agent in self.agents:
            target = messaging.Target(
                topic=rpc_interface.agent_topic(agent.instance_id),
                server='simulated')
            server = rpc.get_rpc_server(target, [agent], rpc_interface.AGENT)
            server.start()
            self.servers.append(server)
            agent.register()

    def start_multiplexed(self, stopping, workers=16):
        """Consume every agent's topic on one connection until stopping."""
        pool = concurrent.futures.ThreadPoolExecutor(workers)
        serializer = rpc.RequestContextSerializer()
        agents = {rpc_interface.agent_topic(a.instance_id): a
                  for a in self.agents}
        rabbit = CONF.oslo_messaging_rabbit
        exchange = kombu.Exchange(
            CONF.control_exchange, type='topic',
            durable=rabbit.amqp_durable_queues,
            auto_delete=rabbit.amqp_auto_delete)
        queues = [kombu.Queue(topic, exchange, routing_key=topic,
                              durable=rabbit.amqp_durable_queues,
                              auto_delete=rabbit.amqp_auto_delete)
                  for topic in agents]

        def handle(agent, message):
            try:
                ctxt = serializer.deserialize_context(
                    {k[len('_context_'):]: v for k, v in message.items()
                     if k.startswith('_context_')})
                if message.get('method') == 'upgrade':
                    agent.upgrade(ctxt, **message['args'])
            except Exception as e:
                sys.stderr.write('%s: %s\n' % (agent.instance_id, e))

        def on_message(body, amqp_message):
            amqp_message.ack()
            topic = amqp_message.delivery_info['routing_key']
            payload = json.loads(body['oslo.message'])
            pool.submit(handle, agents[topic], payload)

        url = CONF.transport_url.replace('rabbit://', 'amqp://', 1)
        connection = kombu.Connection(url)
        consumer = kombu.Consumer(connection.channel(), queues,
                                  callbacks=[on_message])
        consumer.consume()
        for agent in self.agents:
            agent.register()

        def drain():
            while not stopping.is_set():
                try:
                    connection.drain_events(timeout=1)
                except socket.timeout:
                    continue
        threading.Thread(target=drain, daemon=True).start()

    def stop(self):
        """Keep the claims; the queues are the starter's to delete.

        Stopping hundreds of RPC servers one by one takes a poll timeout
        each, so the process just ends once its log is safe.
        """
        with self.lock:
            self.claims.close()
            if self.sends:
                self.sends.close()


def _labels(text):
    return dict(pair.split('=', 1) for pair in text.split(',') if pair)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--instances', required=True)
    parser.add_argument('--claims', required=True)
    parser.add_argument('--fail-file')
    parser.add_argument('--labels', default='group=simulated')
    parser.add_argument('--guest-version', default='v1.0.0')
    parser.add_argument('--multiplex', action='store_true',
                        help='one AMQP connection for every agent')
    parser.add_argument('--heartbeat-interval', type=float, default=0,
                        help='seconds between heartbeats; 0: none')
    parser.add_argument('--install-seconds', type=float, default=0,
                        help='seconds each install takes')
    parser.add_argument('--sends',
                        help='log of messages received and sent, timed')
    args, rest = parser.parse_known_args()
    CONF(rest, project='trove-upgrade')
    with open(args.instances) as f:
        instance_ids = [line.strip() for line in f if line.strip()]
    fleet = Fleet(instance_ids, _labels(args.labels), args.guest_version,
                  args.fail_file, args.claims, args.sends,
                  args.install_seconds)
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    if args.multiplex:
        fleet.start_multiplexed(stopping)
    else:
        fleet.start()
    print('READY %d' % len(instance_ids), flush=True)
    if args.heartbeat_interval:
        threading.Thread(target=fleet.heartbeat_forever,
                         args=(args.heartbeat_interval, stopping),
                         daemon=True).start()
    stopping.wait()
    fleet.stop()
    sys.stdout.flush()
    os._exit(0)


if __name__ == '__main__':
    sys.exit(main())
