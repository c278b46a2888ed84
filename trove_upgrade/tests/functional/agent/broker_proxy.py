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

"""A TCP relay to the broker, so a test can cut an agent off RabbitMQ."""

import socket
import threading

import fixtures

from trove_upgrade.tests.fixtures import proxy
from trove_upgrade.tests.functional import servers


class BrokerProxy(fixtures.Fixture):
    """A TCP relay to RabbitMQ that the test can cut and restore.

    The agent reaches RabbitMQ only through it, so cutting it is, for the
    agent, a broker outage: established connections are reset and new ones
    are refused until :meth:`restore`. RabbitMQ itself, which other tests
    share, is never touched.
    """

    def __init__(self, target=('127.0.0.1', 5672)):
        super().__init__()
        self.target = target

    def _setUp(self):
        self._lock = threading.Lock()
        self._sockets = []
        self._up = True
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind((servers.LOOPBACK, 0))
        self._listener.listen(16)
        self.port = self._listener.getsockname()[1]
        self.url = 'rabbit://guest:guest@%s:%d/' % (servers.LOOPBACK,
                                                    self.port)
        thread = threading.Thread(target=self._accept, daemon=True)
        thread.start()
        self.addCleanup(self._close)

    def _accept(self):
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                if not self._up:
                    client.close()
                    continue
                try:
                    upstream = socket.create_connection(self.target)
                except OSError:
                    client.close()
                    continue
                self._sockets += [client, upstream]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst),
                                 daemon=True).start()

    @staticmethod
    def _pump(src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        for sock in (src, dst):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        with self._lock:
            self._up = False
            sockets, self._sockets = self._sockets, []
        proxy.close_all(sockets)

    def restore(self):
        with self._lock:
            self._up = True

    def _close(self):
        self.cut()
        self._listener.close()
