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

"""A RabbitMQ cluster of the test's own: three nodes on loopback.

As RabbitMQ's clustering guide runs several nodes on one host: each node
(``rabbit_node.RabbitMQNode``) has its own node name, AMQP port,
distribution port, database, log directory and configuration file, the
three share one ``HOME`` and with it an Erlang cookie of their own, and
the second and third join the first with ``rabbitmqctl join_cluster``.
The RabbitMQ on 5672 that the other tests share is never touched.
Clean-up stops every node and removes every file the cluster wrote.

``url`` lists the three nodes as oslo.messaging takes several hosts
(``rabbit://guest:guest@127.0.0.1:p1,guest:guest@127.0.0.1:p2,...``);
``kill`` ends a node with SIGKILL and ``leader_of`` says which node holds
the leader of a quorum queue.
"""

import json
import os
import random
import string
import subprocess

import fixtures

from trove_upgrade.tests.functional import rabbit_node
from trove_upgrade.tests.functional import servers

RABBITMQCTL = '/usr/lib/rabbitmq/bin/rabbitmqctl'
CTL_TIMEOUT = 120


class RabbitMQCluster(fixtures.Fixture):
    """Three clustered RabbitMQ nodes; ``nodes``, ``url``, ``kill``."""

    size = 3

    def _setUp(self):
        self.home = self.useFixture(fixtures.TempDir()).path
        cookie = os.path.join(self.home, '.erlang.cookie')
        with open(os.open(cookie, os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                          0o400), 'w') as f:
            f.write(''.join(random.SystemRandom().choice(
                string.ascii_uppercase) for _ in range(32)))
        self.nodes = [self.useFixture(rabbit_node.RabbitMQNode(
            home=self.home, start=False)) for _ in range(self.size)]
        # Booting is slow: the three boot at once.
        launched = [node.launch() for node in self.nodes]
        for node, before in zip(self.nodes, launched):
            node.wait_started(before)
        first = self.nodes[0]
        for node in self.nodes[1:]:
            self.ctl(node, 'stop_app')
            self.ctl(node, 'join_cluster', first.name)
            self.ctl(node, 'start_app')
            self.ctl(node, 'await_startup')
        running = json.loads(self.ctl(first, 'cluster_status',
                                      '--formatter', 'json'))
        if sorted(running['running_nodes']) != sorted(self.names()):
            raise RuntimeError('the RabbitMQ cluster did not form: %s'
                               % running)
        self.url = 'rabbit://%s/' % ','.join(
            'guest:guest@%s:%d' % (servers.LOOPBACK, node.port)
            for node in self.nodes)

    def names(self):
        return [node.name for node in self.nodes]

    def ctl(self, node, *args):
        """Run ``rabbitmqctl`` against ``node``; its output."""
        env = dict(os.environ, HOME=self.home)
        done = subprocess.run(
            [RABBITMQCTL, '-n', node.name, '-q'] + list(args), env=env,
            stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=CTL_TIMEOUT)
        if done.returncode:
            raise RuntimeError('rabbitmqctl %s on %s failed: %s%s' % (
                ' '.join(args), node.name, done.stdout, done.stderr))
        return done.stdout

    def alive(self):
        return [node for node in self.nodes
                if node.process is not None and node.process.poll() is None]

    def quorum_leaders(self):
        """``{queue name: node}`` of every quorum queue's leader."""
        listed = json.loads(self.ctl(self.alive()[0], 'list_queues',
                                     '--formatter', 'json',
                                     'name', 'type', 'leader'))
        by_name = {node.name: node for node in self.nodes}
        return {queue['name']: by_name[queue['leader']] for queue in listed
                if queue['type'] == 'quorum' and queue['leader'] in by_name}

    def leader_of(self, queue):
        """The node holding the leader of quorum queue ``queue``."""
        leaders = self.quorum_leaders()
        if queue not in leaders:
            raise RuntimeError('%s is not a quorum queue of the cluster: %s'
                               % (queue, sorted(leaders)))
        return leaders[queue]

    def kill(self, node):
        """SIGKILL ``node``; the others elect new leaders."""
        node.kill()
