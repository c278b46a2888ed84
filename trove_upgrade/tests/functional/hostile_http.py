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

"""A loopback HTTP server that answers whatever bytes a test scripts.

Unlike :class:`~.https_server.HttpsFileServer`, which serves files and
breaks them in a few named ways, each connection here runs a test's
function ``answer(conn, request, number)`` on the raw socket: it may drip
a status line a byte at a time, send headers no server would, lie in
Content-Range, or reset the connection mid-body. ``number`` counts the
requests from 1 (a resume is request 2). :func:`swift_v1` plays Swift's v1
auth in front of such a function, for the swift strategy.
"""

import socket
import struct
import threading
import time

import fixtures

from trove_upgrade.tests.functional import servers


def response(status='200 OK', headers=(), body=b''):
    """The bytes of a response with these headers, verbatim."""
    head = ''.join('%s\r\n' % h for h in ('HTTP/1.1 ' + status,) +
                   tuple(headers))
    return head.encode('latin-1') + b'\r\n' + body


def drip(conn, data, interval):
    """Send ``data`` a byte every ``interval`` seconds, until it is read."""
    for i in range(len(data)):
        conn.sendall(data[i:i + 1])
        time.sleep(interval)


def drip_status_line(conn, request, number):
    """An answer whose status line and headers would take 50 s."""
    drip(conn, b'HTTP/1.1 200 OK\r\nX-Slow: ' + b'x' * 1000, 0.05)


def drip_body(conn, request, number):
    """An answer whose 1000-byte body would take 50 s."""
    conn.sendall(response(headers=['Content-Length: 1000']))
    drip(conn, b'x' * 1000, 0.05)


def reset_mid_body(conn, request, number):
    """An answer reset (RST) after 500 of its 1000 bytes."""
    conn.sendall(response(headers=['Content-Length: 1000'], body=b'x' * 500))
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                    struct.pack('ii', 1, 0))


SWIFT_AUTH_PATH = '/auth/v1.0'
SWIFT_ACCOUNT_PATH = '/v1/AUTH_test'


def swift_v1(object_answer):
    """Answer Swift v1 auth, then ``object_answer`` for the object requests.

    The storage URL handed out is this server's own
    :data:`SWIFT_ACCOUNT_PATH`.
    """
    def answer(conn, request, number):
        if not request.startswith(b'GET %s ' % SWIFT_AUTH_PATH.encode()):
            return object_answer(conn, request, number)
        conn.sendall(response(headers=[
            'X-Storage-Url: http://%s:%d%s' % (conn.getsockname() +
                                               (SWIFT_ACCOUNT_PATH,)),
            'X-Auth-Token: AUTH_tk-hostile', 'Content-Length: 0']))
    return answer


class HostileHttpServer(fixtures.Fixture):
    """Run ``answer`` on every connection to 127.0.0.1:``port``."""

    def __init__(self, answer):
        super().__init__()
        self.answer = answer

    def _setUp(self):
        self.requests = []
        self._stopping = threading.Event()
        self._sock = socket.socket()
        self._sock.bind((servers.LOOPBACK, 0))
        self._sock.listen(8)
        self._sock.settimeout(0.2)
        self.port = self._sock.getsockname()[1]
        thread = threading.Thread(target=self._accept, daemon=True,
                                  name='hostile-http-server')
        thread.start()
        self.addCleanup(self._sock.close)
        self.addCleanup(thread.join, 10)
        self.addCleanup(self._stopping.set)

    def url(self, name):
        return 'http://%s:%d/%s' % (servers.LOOPBACK, self.port, name)

    def _accept(self):
        while not self._stopping.is_set():
            try:
                conn, _ = self._sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,),
                             daemon=True).start()

    def _serve(self, conn):
        with conn:
            request = b''
            while b'\r\n\r\n' not in request:
                data = conn.recv(4096)
                if not data:
                    return
                request += data
            self.requests.append(request)
            try:
                self.answer(conn, request, len(self.requests))
            except OSError:
                # The client hung up: what the hostile answers are for.
                pass
