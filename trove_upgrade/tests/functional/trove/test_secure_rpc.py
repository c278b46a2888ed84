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

"""Trove's secure RPC against Trove itself, for each release the tests use.

The real ``trove-guestagent`` of the release, from its cached virtualenv
(``trove_release``), runs as its own process with Trove's defaults: secure
RPC on, the instance's key in ``guest_info.conf`` where Trove writes it,
on real RabbitMQ. The agent's ping, built from that configuration directory
as the agent builds it, gets ``pong``; a plain ping and one with another
key are refused, each with a reason of one short line. Trove's own
``SecureSerializer`` runs in the release's virtualenv, as a process, to
read what this module writes and to write what it reads.
"""

import json
import os
import signal
import subprocess
import time
import uuid

import fixtures
import kombu
from oslo_messaging import conffixture
from oslo_utils import uuidutils

from tools.testbed import guest
from tools.testbed import trove_release
from trove_upgrade.agent import supervisor
from trove_upgrade.agent import trove_guest
from trove_upgrade.agent import trove_secure_rpc as srpc
from trove_upgrade.tests import base
from trove_upgrade.tests.functional import rabbit

# A cold start of Trove's guest agent on a loaded machine.
PING_WAIT = 180
MAX_REASON = 600

# Trove's SecureSerializer, over its TroveRequestContextSerializer, as
# trove/rpc.py builds it for a client and a server: reads our context and
# entity, and writes its own for us to read.
_TROVE_SIDE = '''
import json, sys
from trove.common.rpc import secure_serializer, serializer
request = json.load(sys.stdin)
key = request['key']
s = secure_serializer.SecureSerializer(
    serializer.TroveRequestContextSerializer(None), key)
ours = s.deserialize_context(request['context'])
print(json.dumps({
    'context': {'request_id': ours.request_id, 'limit': ours.limit},
    'entity': s.deserialize_entity(ours, request['entity']),
    'trove_context': s.serialize_context(ours),
    'trove_entity': s.serialize_entity(ours, request['value']),
}))
'''


class _SecureRpcOfARelease:
    """The tests, for the Trove ``release`` of each class below."""

    release = None

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.venv = trove_release.trove_venv(cls.release)

    def setUp(self):
        super().setUp()
        rabbit.check_reachable()
        self.tmp = os.path.realpath(self.useFixture(fixtures.TempDir()).path)
        self.guest_id = uuidutils.generate_uuid()
        self.exchange = 'trove_test_%s' % uuid.uuid4().hex[:12]
        messaging_conf = self.useFixture(conffixture.ConfFixture(self.conf))
        messaging_conf.transport_url = rabbit.TRANSPORT_URL
        self.flags(rabbit_transient_queues_ttl=rabbit.TRANSIENT_QUEUES_TTL,
                   group='oslo_messaging_rabbit')
        self.layout = self.useFixture(guest.TroveGuestLayout(
            os.path.join(self.tmp, 'guest'), self.guest_id,
            rabbit.TRANSPORT_URL, self.exchange))

    def start_guest_agent(self):
        trove_guest.write_managed_config(self.layout.conf_dir)
        docker = self.useFixture(guest.DockerVersionAPI())
        self.addCleanup(self._delete_bus_names)
        self.log = os.path.join(self.tmp, 'guest-agent.log')
        with open(self.log, 'ab') as log:
            proc = subprocess.Popen(
                [os.path.join(self.venv, 'bin', guest.CONSOLE_SCRIPT),
                 '--config-dir=%s' % self.layout.conf_dir],
                stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
                env=dict(os.environ, DOCKER_HOST=docker.docker_host))
        self.addCleanup(self._kill, proc)
        return proc

    @staticmethod
    def _kill(proc):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()

    def _delete_bus_names(self):
        """The guest agent's queues are not auto-delete: delete them."""
        topic = trove_guest.TOPIC_PREFIX + self.guest_id
        url = rabbit.TRANSPORT_URL.replace('rabbit://', 'amqp://')
        with kombu.Connection(url) as connection:
            channel = connection.channel()
            for name in (topic, '%s.%s' % (topic, self.guest_id)):
                channel.queue_delete(name)
            channel.exchange_delete(self.exchange)

    def pinger(self, key):
        ping = trove_guest.RpcPing(rabbit.TRANSPORT_URL, self.exchange,
                                   self.guest_id, 5, key=key)
        self.addCleanup(ping.close)
        return ping

    def assertOneShortLine(self, reason):
        self.assertNotIn('\n', reason)
        self.assertNotIn('Traceback', reason)
        self.assertNotIn('site-packages', reason)
        self.assertNotIn(self.venv, reason)
        self.assertLess(len(reason), MAX_REASON)

    def test_keyed_ping_answers_plain_and_other_key_are_refused(self):
        proc = self.start_guest_agent()
        # As the agent builds it: from Trove's configuration directory.
        config = trove_guest.load(self.layout.conf_dir)
        self.assertEqual(self.layout.instance_key,
                         config.instance_rpc_encr_key)
        keyed = trove_guest.RpcPing.from_guest(config, 5)
        self.addCleanup(keyed.close)
        deadline = time.monotonic() + PING_WAIT
        reason = keyed.ping()
        while reason is not None:
            self.assertIsNone(proc.poll(), self._log_tail())
            self.assertNotIsInstance(reason, supervisor.Refused)
            self.assertLess(time.monotonic(), deadline,
                            '%s; %s' % (reason, self._log_tail()))
            time.sleep(0.5)
            reason = keyed.ping()

        plain = self.pinger(None).ping()
        self.assertIsInstance(plain, supervisor.Refused)
        self.assertIn('refused %s' % trove_guest.PING_METHOD, plain)
        self.assertIn('no instance_rpc_encr_key', plain)
        self.assertIn("KeyError: 'context'", plain)
        self.assertOneShortLine(plain)

        other = self.pinger(guest.new_instance_key()).ping()
        self.assertIsInstance(other, supervisor.Refused)
        self.assertIn('cannot read the reply', other)
        self.assertIn('another key', other)
        self.assertOneShortLine(other)

        # The guest agent still answers the key it has.
        self.assertIsNone(keyed.ping())

    def test_trove_reads_what_we_write_and_we_read_what_trove_writes(self):
        key = self.layout.instance_key
        ours = srpc.SecureSerializer(key)
        context = srpc.trove_context()
        value = {'name': 'pong', 'n': [1, 2.5, None], 'text': 'é'}
        request = {'key': key, 'context': ours.serialize_context(context),
                   'entity': ours.serialize_entity(context, value),
                   'value': value}
        done = subprocess.run(
            [os.path.join(self.venv, 'bin', 'python'), '-W', 'ignore', '-c',
             _TROVE_SIDE], input=json.dumps(request), capture_output=True,
            text=True, timeout=120)
        self.assertEqual(0, done.returncode, done.stderr)
        trove = json.loads(done.stdout)
        self.assertEqual({'request_id': context['request_id'],
                          'limit': None}, trove['context'])
        self.assertEqual(value, trove['entity'])
        self.assertEqual([srpc.CONTEXT_FIELD], list(trove['trove_context']))
        self.assertEqual(context['request_id'], ours.deserialize_context(
            trove['trove_context'])['request_id'])
        self.assertEqual(value, ours.deserialize_entity(
            context, trove['trove_entity']))

    def _log_tail(self):
        tails = []
        for path in (self.log, os.path.join(self.layout.log_dir,
                                            'trove-guestagent.log')):
            try:
                with open(path, 'rb') as f:
                    tails.append(f.read()[-2000:].decode('utf-8', 'replace'))
            except OSError as e:
                tails.append(str(e))
        return '\n'.join(tails)


class TestSecureRpcTrove25(_SecureRpcOfARelease, base.TestCase):
    release = '25.1.0'


class TestSecureRpcTrove26(_SecureRpcOfARelease, base.TestCase):
    release = '26.0.0'
