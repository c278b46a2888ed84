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

"""The outage tests' relay does what they rely on, and leaves nothing behind.

The outage tests only show that the code under test survives; these show
that the relay really held, cut and cleaned up, with a loopback listener
as its target.
"""

import socket
import threading

from trove_upgrade.tests import base
from trove_upgrade.tests.fixtures import relay

# Long enough for a loaded machine to pass a few bytes on loopback.
WAIT = 5
# How long "nothing arrives" is watched for.
QUIET = 0.3


def _ended(sock):
    """True when ``sock`` sees its peer's end: EOF, or a reset."""
    try:
        return sock.recv(1) == b''
    except ConnectionResetError:
        return True


class TestRelay(base.TestCase):

    def setUp(self):
        super().setUp()
        self.target = socket.create_server((relay.LOOPBACK, 0))
        self.addCleanup(self.target.close)
        self.relay = relay.Relay(self.target.getsockname()[1])

    def connect(self):
        """A client of the relay and the target's side of it."""
        client = socket.create_connection((relay.LOOPBACK, self.relay.port),
                                          timeout=WAIT)
        self.addCleanup(client.close)
        self.target.settimeout(WAIT)
        server, _ = self.target.accept()
        server.settimeout(WAIT)
        self.addCleanup(server.close)
        return client, server

    def assertNoConnection(self):
        self.target.settimeout(QUIET)
        self.assertRaises(socket.timeout, self.target.accept)

    def test_freeze_holds_bytes_and_connections_until_thawed(self):
        self.useFixture(self.relay)
        client, server = self.connect()
        self.relay.freeze()
        client.sendall(b'held')
        server.settimeout(QUIET)
        self.assertRaises(socket.timeout, server.recv, 4)
        waiting = socket.create_connection(
            (relay.LOOPBACK, self.relay.port), timeout=WAIT)
        self.addCleanup(waiting.close)
        self.assertNoConnection()
        self.relay.thaw()
        server.settimeout(WAIT)
        self.assertEqual(b'held', server.recv(4))
        self.target.settimeout(WAIT)
        self.target.accept()[0].close()

    def test_cut_ends_connections_and_refuses_until_restored(self):
        self.useFixture(self.relay)
        client, server = self.connect()
        self.relay.cut()
        self.assertTrue(_ended(client))
        self.assertTrue(_ended(server))
        refused = socket.create_connection(
            (relay.LOOPBACK, self.relay.port), timeout=WAIT)
        self.addCleanup(refused.close)
        self.assertTrue(_ended(refused))
        self.assertNoConnection()
        self.relay.restore()
        client, server = self.connect()
        client.sendall(b'back')
        self.assertEqual(b'back', server.recv(4))

    def test_cleanup_closes_every_socket_and_joins_every_thread(self):
        before = set(threading.enumerate())
        with self.relay:
            client, server = self.connect()
            self.relay.freeze()
            client.sendall(b'held')
            waiting = socket.create_connection(
                (relay.LOOPBACK, self.relay.port), timeout=WAIT)
            self.addCleanup(waiting.close)
        self.assertEqual(before, set(threading.enumerate()))
        self.assertTrue(_ended(client))
        self.assertTrue(_ended(server))
        self.assertTrue(_ended(waiting))
        self.assertRaises(ConnectionRefusedError, socket.create_connection,
                          (relay.LOOPBACK, self.relay.port), timeout=WAIT)
