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

"""A fleet for rollout tests: real conductors and simulated agents.

:class:`Fleet` starts real ``trove-upgrade-conductor`` processes and
processes of simulated agents (``simulated_agents.py``) on one SQLite file
and on RabbitMQ names of the caller's own (``rabbit.RabbitMQ().options``).
Queues are declared durable for the length of the test rather than
auto-deleted: a conductor killed by SIGKILL must find on restart the
reports its agents sent meanwhile, as it would in production. So the
resource deletes, on clean-up, every queue and exchange it made.

Used by the rollout functional tests and by
``tools/bench/rollout_scale.py``.
"""

import collections
import glob
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid

import kombu

from tools.testbed import conffile
from tools.testbed import lifecycle
from trove_upgrade.common import rpc
from trove_upgrade.common import rpc_interface

CONDUCTOR = os.path.join(os.path.dirname(sys.executable),
                         'trove-upgrade-conductor')
API = os.path.join(os.path.dirname(sys.executable), 'trove-upgrade-api')
API_LISTENING = re.compile(r'trove-upgrade-api serving on (http://\S+:\d+)')
SIMULATOR = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                         'simulated_agents.py')
READY = 'listening on topic'
# Long enough for a loaded machine; only a broken run waits it out.
START_TIMEOUT = 120
# Seconds a simulated agent waits for the conductor's answer before it
# sends a claim or report again.
AGENT_CALL_TIMEOUT = 10


def _stop(process, sig=signal.SIGTERM):
    """Signal the process group; SIGKILL it when it does not stop."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, sig)
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


class Fleet(lifecycle.Resource):
    """Conductors and simulated agents sharing a database and RabbitMQ.

    :param rabbit_options: ``{section: {option: value}}`` from the RabbitMQ
        fixture (its exchange and conductor topic).
    :param database_url: the SQLite (or other) database they share.
    :param conductor_options: ``[conductor]`` settings, e.g. short
        intervals.
    :param delete_queues: False on a broker that goes with the test (a
        cluster of its own), where deleting quorum queues that had a
        member on a killed node takes seconds each.
    """

    def __init__(self, workdir, rabbit_options, database_url,
                 conductor_options=None, heartbeat_interval=0,
                 conductor_defaults=None, delete_queues=True):
        super().__init__()
        self.delete_queues = delete_queues
        self.conductor_defaults = conductor_defaults or {}
        self.heartbeat_interval = heartbeat_interval
        self.workdir = workdir
        self.rabbit_options = rabbit_options
        self.database_url = database_url
        self.conductor_options = conductor_options or {}

    def _setUp(self):
        self.conductors = []
        self.agent_processes = []
        self.instance_ids = []
        self._counter = 0
        if self.delete_queues:
            self.addCleanup(self._delete_queues)
        self.addCleanup(self._stop_all)

    def _next(self, prefix):
        self._counter += 1
        return os.path.join(self.workdir, '%s-%d' % (prefix, self._counter))

    def _options(self):
        options = {section: dict(values) for section, values
                   in self.rabbit_options.items()}
        options['oslo_messaging_rabbit'] = dict(
            options.get('oslo_messaging_rabbit', {}),
            amqp_auto_delete='false')
        options['DEFAULT'] = dict(options['DEFAULT'],
                                  state_path=self.workdir)
        options['database'] = {'connection': self.database_url}
        options['conductor'] = dict(options['conductor'],
                                    **self.conductor_options)
        return options

    def start_conductor(self):
        """Start one more conductor; return its process once it listens."""
        base = self._next('conductor')
        config = base + '.conf'
        options = self._options()
        options['DEFAULT'].update(self.conductor_defaults)
        conffile.write_conf(config, options)
        log_path = base + '.log'
        with open(log_path, 'wb') as log:
            process = subprocess.Popen(
                [CONDUCTOR, '--config-file', config],
                stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True)
        process.log_path = log_path
        self.conductors.append(process)
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            with open(log_path) as f:
                if READY in f.read():
                    return process
            if process.poll() is not None or time.monotonic() > deadline:
                with open(log_path) as f:
                    raise RuntimeError('the conductor did not start:\n%s'
                                       % f.read())
            time.sleep(0.1)

    def start_api(self):
        """Start one more API process (noauth2); it has ``url`` once up.

        It shares the conductors' database and bus and, like them, is
        stopped with the fleet.
        """
        base = self._next('api')
        config = base + '.conf'
        options = self._options()
        options['api'] = {'auth_strategy': 'noauth2',
                          'bind_host': '127.0.0.1', 'bind_port': '0'}
        conffile.write_conf(config, options)
        log_path = base + '.log'
        with open(log_path, 'wb') as log:
            process = subprocess.Popen(
                [API, '--config-file', config], stdout=log,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)
        process.log_path = log_path
        self.conductors.append(process)
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            with open(log_path) as f:
                found = API_LISTENING.search(f.read())
            if found:
                process.url = found.group(1)
                return process
            if process.poll() is not None or time.monotonic() > deadline:
                with open(log_path) as f:
                    raise RuntimeError('the API did not start:\n%s'
                                       % f.read())
            time.sleep(0.1)

    def kill_conductor(self, process):
        """SIGKILL a conductor or an API, and the processes it forked."""
        _stop(process, signal.SIGKILL)

    def start_agents(self, count, labels='group=blue',
                     guest_version='v1.0.0', fail_file=None,
                     multiplex=False, install_seconds=0):
        """Start ``count`` simulated agents in one process; their ids.

        Ids are sorted, so the first ones are the first in instance order.
        """
        ids = sorted(str(uuid.uuid4()) for _ in range(count))
        base = self._next('agents')
        with open(base + '.ids', 'w') as f:
            f.write('\n'.join(ids) + '\n')
        config = base + '.conf'
        options = self._options()
        # A call lost with a killed conductor is sent again this soon.
        options['DEFAULT']['rpc_response_timeout'] = AGENT_CALL_TIMEOUT
        conffile.write_conf(config, options)
        command = [sys.executable, SIMULATOR, '--config-file', config,
                   '--instances', base + '.ids',
                   '--claims', base + '.claims', '--labels', labels,
                   '--guest-version', guest_version,
                   '--heartbeat-interval', str(self.heartbeat_interval),
                   '--install-seconds', str(install_seconds),
                   '--sends', base + '.sends']
        if fail_file:
            command += ['--fail-file', fail_file]
        if multiplex:
            command.append('--multiplex')
        log = open(base + '.log', 'wb')
        process = subprocess.Popen(command, stdout=subprocess.PIPE,
                                   stderr=log, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
        log.close()
        self.agent_processes.append(process)
        self.instance_ids.extend(ids)
        ready = []
        reader = threading.Thread(
            target=lambda: ready.append(process.stdout.readline()),
            daemon=True)
        reader.start()
        reader.join(START_TIMEOUT)
        if not ready or not ready[0].startswith(b'READY'):
            _stop(process, signal.SIGKILL)
            with open(base + '.log') as f:
                raise RuntimeError('simulated agents did not start:\n%s'
                                   % f.read())
        return ids

    def claims(self):
        """Granted claims per instance, from every simulator's log."""
        granted = collections.Counter()
        for path in glob.glob(os.path.join(self.workdir, '*.claims')):
            with open(path) as f:
                for line in f:
                    instance_id, _upgrade_id, proceed = line.split()
                    if proceed == 'True':
                        granted[instance_id] += 1
        return granted

    def sends(self):
        """``(unix time, instance id, upgrade id, what)`` of every agent.

        ``what`` is ``received`` for an ``upgrade`` message, else the claim
        (``start_upgrade``) or the state reported, first sent then.
        """
        found = []
        for path in glob.glob(os.path.join(self.workdir, '*.sends')):
            with open(path) as f:
                for line in f:
                    when, instance_id, upgrade_id, what = line.split()
                    found.append((float(when), instance_id, upgrade_id,
                                  what))
        return sorted(found)

    def claim_lines(self):
        """Every simulator's claim log, for a failing test's details."""
        lines = []
        for path in sorted(glob.glob(os.path.join(self.workdir,
                                                  '*.claims'))):
            with open(path) as f:
                lines.append(f.read())
        return ''.join(lines)

    def logs(self):
        """Every conductor's and simulator's log, for a test's details."""
        texts = []
        for process in self.conductors:
            with open(process.log_path) as f:
                texts.append(f.read())
        for path in sorted(glob.glob(os.path.join(self.workdir,
                                                  'agents-*.log'))):
            with open(path) as f:
                texts.append(f.read())
        return '\n'.join(texts)

    def _stop_all(self):
        processes = self.agent_processes + self.conductors
        for process in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in processes:
            _stop(process)
        for process in self.agent_processes:
            process.stdout.close()

    def _delete_queues(self):
        topic = self.rabbit_options['conductor']['topic']
        names = [topic, '%s.%s' % (topic, socket.gethostname())]
        # The agents' topics are scoped by the exchange, as the services
        # scope them (rpc.scoped_topic).
        exchange = self.rabbit_options['DEFAULT']['control_exchange']
        prefix = '' if exchange == rpc.DEFAULT_EXCHANGE else exchange + '.'
        for instance_id in self.instance_ids:
            agent_topic = '%s%s.%s' % (
                prefix, rpc_interface.AGENT_TOPIC_PREFIX, instance_id)
            names += [agent_topic, '%s.simulated' % agent_topic]
        url = self.rabbit_options['DEFAULT']['transport_url']
        with kombu.Connection(conffile.kombu_url(url)) as conn:
            channel = conn.channel()
            for name in names:
                channel.queue_delete(name)
            channel.exchange_delete(
                self.rabbit_options['DEFAULT']['control_exchange'])
