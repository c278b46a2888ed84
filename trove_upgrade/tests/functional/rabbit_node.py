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

"""A RabbitMQ node of the test's own, which the test may stop and restart.

Tests of broker restarts cannot restart the RabbitMQ on 5672 that every
other test shares. This fixture starts another node of the installed
``rabbitmq-server``: its own node name, AMQP port and distribution port
(both free ports on loopback), its own database and log directories and
its own ``HOME``, so its Erlang cookie is its own too (nodes of one
cluster share a ``home``, and with it their cookie). Restarting it keeps
its database, as restarting a real broker does: durable queues and their
persistent messages survive, the rest is lost.
"""

import os
import signal
import subprocess
import time
import uuid

import fixtures

from trove_upgrade.tests.functional import servers

RABBITMQ_SERVER = '/usr/lib/rabbitmq/bin/rabbitmq-server'
# Booting takes seconds alone and over a minute on a loaded machine.
START_TIMEOUT = 240
STARTED = 'Server startup complete'


class RabbitMQNode(fixtures.Fixture):
    """``url`` reaches the node; ``stop``, ``start`` and ``restart`` it.

    :param home: the ``HOME`` holding its Erlang cookie; a directory of
        its own when not given.
    :param start: False leaves the node to the caller's ``start`` (or
        ``launch`` then ``wait_started``).
    """

    def __init__(self, home=None, start=True):
        super().__init__()
        self.home = home
        self.start_now = start

    def _setUp(self):
        if not os.access(RABBITMQ_SERVER, os.X_OK):
            raise RuntimeError('%s is not installed' % RABBITMQ_SERVER)
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.port = servers.free_port()
        self.name = 'trove-upgrade-test-%s@localhost' % uuid.uuid4().hex[:8]
        self.url = 'rabbit://guest:guest@%s:%d/' % (servers.LOOPBACK,
                                                    self.port)
        home = self.home
        if home is None:
            home = os.path.join(self.dir, 'home')
            os.mkdir(home)
        config = os.path.join(self.dir, 'rabbitmq.conf')
        with open(config, 'w') as f:
            f.write('listeners.tcp.1 = %s:%d\n' % (servers.LOOPBACK,
                                                   self.port))
        plugins = os.path.join(self.dir, 'enabled_plugins')
        with open(plugins, 'w') as f:
            f.write('[].\n')
        self.log_dir = os.path.join(self.dir, 'log')
        self.env = dict(
            os.environ, HOME=home, RABBITMQ_NODENAME=self.name,
            RABBITMQ_DIST_PORT=str(servers.free_port()),
            RABBITMQ_MNESIA_BASE=os.path.join(self.dir, 'mnesia'),
            RABBITMQ_LOG_BASE=self.log_dir,
            RABBITMQ_CONFIG_FILE=config,
            RABBITMQ_ENABLED_PLUGINS_FILE=plugins,
            RABBITMQ_PID_FILE=os.path.join(self.dir, 'pid'))
        self.process = None
        self.starts = 0
        self.addCleanup(self.stop)
        if self.start_now:
            self.start()

    def _log(self):
        try:
            with open(os.path.join(self.log_dir, '%s.log' % self.name)) as f:
                return f.read()
        except FileNotFoundError:
            return ''

    def start(self):
        """Start the node; return once it accepts AMQP connections."""
        self.wait_started(self.launch())

    def launch(self):
        """Start the node; what ``wait_started`` waits for."""
        before = self._log().count(STARTED)
        self.starts += 1
        out = open(os.path.join(self.dir, 'server-%d.out' % self.starts),
                   'wb')
        self.addCleanup(out.close)
        self.process = subprocess.Popen(
            [RABBITMQ_SERVER], env=self.env, stdin=subprocess.DEVNULL,
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        return before

    def wait_started(self, before):
        """Return once the launched node accepts AMQP connections."""
        deadline = time.monotonic() + START_TIMEOUT
        while self._log().count(STARTED) <= before:
            if self.process.poll() is not None:
                raise RuntimeError('RabbitMQ node %s exited with %s: see %s'
                                   % (self.name, self.process.returncode,
                                      self.log_dir))
            if time.monotonic() > deadline:
                raise RuntimeError('RabbitMQ node %s did not start in %ds'
                                   % (self.name, START_TIMEOUT))
            time.sleep(0.2)
        servers.wait_for_port(self.port, process=self.process)

    def stop(self):
        """Stop the node as its service manager would: SIGTERM."""
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def kill(self):
        """SIGKILL the node, as a crash or the OOM killer would."""
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def restart(self):
        self.stop()
        self.start()
