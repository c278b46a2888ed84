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

"""The real RabbitMQ for functional tests, isolated per test.

RabbitMQ names the queue of an RPC topic after the topic alone, whatever
the exchange: two tests listening on the same topic under different
exchanges would share one queue and take each other's messages. So besides
a control exchange of its own, each test gets a conductor topic of its own;
instance topics are unique because instance ids are. Queues and exchanges
are declared auto-delete, so RabbitMQ removes them once the test's last
consumer is gone, and the reply and fanout queues of processes a test
killed expire a minute after their last use. An auto-delete exchange goes
only once its last binding does, and one that was published to but never
bound stays: the fixture deletes the test's exchange at the end.

Given the URL of another broker (a cluster of the test's own, see
``rabbit_cluster``) and ``quorum_queues``, it points there instead and
declares every queue of the services as oslo.messaging's
``rabbit_quorum_queue`` does: durable quorum queues, which RabbitMQ
refuses to make auto-delete, so the test deletes them (``fleet.Fleet``
does, on the shared broker).
"""

import socket
import uuid

import fixtures
import kombu
from oslo_messaging import conffixture

from tools.testbed import conffile
from trove_upgrade.common import rpc
from trove_upgrade import conf

CONF = conf.CONF

HOST = '127.0.0.1'
PORT = 5672
TRANSPORT_URL = 'rabbit://guest:guest@%s:%d/' % (HOST, PORT)
TRANSIENT_QUEUES_TTL = conffile.TRANSIENT_QUEUES_TTL


def check_reachable():
    """Fail clearly, rather than hang in a retry loop, when it is down."""
    try:
        socket.create_connection((HOST, PORT), timeout=5).close()
    except OSError as e:
        raise RuntimeError(
            'RabbitMQ does not answer on %s:%d (%s); start it with '
            '"rabbitmq-server -detached" (see SERVICES.md).'
            % (HOST, PORT, e))


class RabbitMQ(fixtures.Fixture):
    """Point this process's RPC at RabbitMQ, on names only this test uses.

    ``exchange`` and ``conductor_topic`` are those names; ``options`` holds
    the same settings as ``{section: {option: value}}`` for the
    configuration file of a service the test starts.
    """

    def __init__(self, url=None, quorum_queues=False):
        super().__init__()
        self.url = url or TRANSPORT_URL
        self.quorum_queues = quorum_queues

    def _setUp(self):
        # A broker of the test's own goes with everything on it.
        self.shared = self.url == TRANSPORT_URL
        if self.shared:
            check_reachable()
        auto_delete = not self.quorum_queues
        suffix = uuid.uuid4().hex[:12]
        self.exchange = 'trove_upgrade_test_%s' % suffix
        self.conductor_topic = 'trove_upgrade_conductor_test_%s' % suffix
        messaging_conf = self.useFixture(conffixture.ConfFixture(CONF))
        messaging_conf.transport_url = self.url
        CONF.set_override('control_exchange', self.exchange)
        CONF.set_override('topic', self.conductor_topic, group='conductor')
        CONF.set_override('amqp_auto_delete', auto_delete,
                          group='oslo_messaging_rabbit')
        CONF.set_override('rabbit_quorum_queue', self.quorum_queues,
                          group='oslo_messaging_rabbit')
        CONF.set_override('rabbit_transient_queues_ttl',
                          TRANSIENT_QUEUES_TTL,
                          group='oslo_messaging_rabbit')
        # Runs after rpc.cleanup, once nothing of this process uses it.
        if self.shared:
            self.addCleanup(self._delete_exchange)
        rpc.cleanup()
        self.addCleanup(rpc.cleanup)
        self.options = {
            'DEFAULT': {'transport_url': self.url,
                        'control_exchange': self.exchange},
            # Tests of sealing start their services with keys and say so.
            'conductor': {'topic': self.conductor_topic,
                          'require_sealed': 'false'},
            'oslo_messaging_rabbit': {
                'amqp_auto_delete': str(auto_delete).lower(),
                'rabbit_quorum_queue': str(self.quorum_queues).lower(),
                'rabbit_transient_queues_ttl': TRANSIENT_QUEUES_TTL},
        }

    def _delete_exchange(self):
        with kombu.Connection(conffile.kombu_url(self.url)) as connection:
            connection.channel().exchange_delete(self.exchange)
