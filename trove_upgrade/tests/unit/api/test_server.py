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

"""trove-upgrade-api's server (waitress), on a real socket on loopback.

Each test serves a small WSGI application with ``APIService`` in this
process and talks to it with raw sockets or http.client.
"""

import http.client
import socket
import threading

from trove_upgrade.api import server as api_server
from trove_upgrade.tests import base

# Generous bounds so that a server that hangs fails the test, not the run.
WAIT = 30
BODY_LIMIT = 1024


class TestServer(base.TestCase):

    def setUp(self):
        super().setUp()
        self.called = False
        self.entered = threading.Event()
        self.release = threading.Event()
        self.addCleanup(self.release.set)

    def application(self, environ, start_response):
        """Echo the body; /block waits for the test to release it."""
        self.called = True
        body = environ['wsgi.input'].read()
        if environ['PATH_INFO'] == '/block':
            self.entered.set()
            self.release.wait(WAIT)
            body = b'finished'
        start_response('200 OK', [('Content-Type', 'text/plain'),
                                  ('Content-Length', str(len(body)))])
        return [body]

    def serve(self, client_timeout=60, max_connections=100):
        self.threads_before = set(threading.enumerate())
        self.server = api_server.APIService(
            '127.0.0.1', 0, self.application, client_timeout,
            max_connections, BODY_LIMIT)
        self.port = self.server.address[1]
        self.server.start()
        self.addCleanup(self.stop)

    def stop(self):
        self.server.stop()
        self.server.wait()

    def connect(self):
        sock = socket.create_connection(('127.0.0.1', self.port),
                                        timeout=WAIT)
        self.addCleanup(sock.close)
        return sock

    def http(self):
        conn = http.client.HTTPConnection('127.0.0.1', self.port,
                                          timeout=WAIT)
        self.addCleanup(conn.close)
        return conn

    def exchange(self, request):
        """Send ``request``, half-close, read until the server closes."""
        sock = self.connect()
        sock.sendall(request)
        sock.shutdown(socket.SHUT_WR)
        return self.receive_all(sock)

    def receive_all(self, sock):
        data = b''
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return data
            data += chunk

    def test_an_address_in_use_is_refused_at_once(self):
        self.serve()
        self.assertRaises(OSError, api_server.APIService, '127.0.0.1',
                          self.port, self.application, 60, 100, BODY_LIMIT)

    def test_requests_share_one_connection(self):
        self.serve()
        conn = self.http()
        sockets = []
        for body in (b'first', b'second'):
            conn.request('POST', '/', body=body)
            resp = conn.getresponse()
            self.assertEqual((200, body), (resp.status, resp.read()))
            sockets.append(conn.sock)
        self.assertIs(sockets[0], sockets[1])

    def test_header_sections_a_proxy_could_misread_are_refused(self):
        self.serve()
        smuggled = b'GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n'
        for headers in (b'Content-Length : %d\r\n' % len(smuggled),
                        b'Content-Length %d\r\n' % len(smuggled),
                        b'Transfer-Encoding : chunked\r\n',
                        b'Content-Length: 2\r\nContent-Length: 3\r\n',
                        b'Content-Length: -1\r\n',
                        b'Content-Length: +5\r\n',
                        b'Content-Length: \xb2\r\n'):
            reply = self.exchange(b'POST / HTTP/1.1\r\nHost: x\r\n'
                                  + headers + b'\r\n' + smuggled)
            self.assertRegex(reply, rb'^HTTP/1\.[01] 400 ')
            self.assertNotIn(b'200 OK', reply)

    def test_an_http_1_1_request_needs_one_host(self):
        self.serve()
        for headers in (b'', b'Host: x\r\nHost: y\r\n'):
            reply = self.exchange(b'POST / HTTP/1.1\r\n' + headers
                                  + b'Content-Length: 0\r\n\r\n')
            self.assertTrue(reply.startswith(b'HTTP/1.1 400 '), reply)
            self.assertIn(b'needs one Host header', reply)
        self.assertFalse(self.called)
        # HTTP/1.0 has no Host to require.
        self.assertIn(b' 200 OK\r\n',
                      self.exchange(b'GET / HTTP/1.0\r\n\r\n'))

    def test_request_line_and_headers_are_bounded(self):
        self.serve()
        for request in (b'GET /' + b'x' * 70000 + b' HTTP/1.1\r\n\r\n',
                        b'GET / HTTP/1.1\r\nX-Long: ' + b'x' * 70000
                        + b'\r\n\r\n',
                        b'GET / HTTP/1.1\r\n' + b''.join(
                            b'X-H%d: %s\r\n' % (i, b'v' * 100)
                            for i in range(1000)) + b'\r\n'):
            sock = self.connect()
            try:
                sock.sendall(request)
                reply = self.receive_all(sock)
            except ConnectionResetError:
                # Refused before all was sent: what was unread is reset.
                reply = b''
            self.assertNotIn(b'200 OK', reply)
        self.assertFalse(self.called)

    def test_bodies_are_bounded_whatever_their_framing(self):
        self.serve()
        over = BODY_LIMIT + 1
        reply = self.exchange(b'POST / HTTP/1.1\r\nHost: x\r\n'
                              b'Content-Length: %d\r\n\r\n' % over)
        self.assertTrue(reply.startswith(b'HTTP/1.1 413 '), reply)
        chunked = b'POST / HTTP/1.1\r\nHost: x\r\n' \
                  b'Transfer-Encoding: chunked\r\n\r\n'
        reply = self.exchange(chunked + b'%x\r\n%s\r\n0\r\n\r\n'
                              % (over, b'x' * over))
        self.assertTrue(reply.startswith(b'HTTP/1.1 413 '), reply)
        # Within the bound, a chunked body reaches the application whole.
        reply = self.exchange(chunked + b'5\r\nhello\r\n0\r\n\r\n')
        self.assertTrue(reply.startswith(b'HTTP/1.1 200 '), reply)
        self.assertTrue(reply.endswith(b'\r\n\r\nhello'), reply)

    def test_a_slow_client_holds_no_thread(self):
        # Half a body: the application is not called until it all came.
        self.serve(client_timeout=1)
        partial = self.connect()
        partial.sendall(b'POST /block HTTP/1.1\r\nHost: x\r\n'
                        b'Content-Length: 9\r\n\r\nabc')
        conn = self.http()
        conn.request('POST', '/', body=b'served')
        resp = conn.getresponse()
        self.assertEqual((200, b'served'), (resp.status, resp.read()))
        # Silent past the timeout: closed, never answered.
        self.assertEqual(b'', self.receive_all(partial))
        self.assertFalse(self.entered.is_set())

    def test_silent_client_is_disconnected(self):
        self.serve(client_timeout=1)
        idle = self.connect()
        kept = self.connect()
        kept.sendall(b'GET / HTTP/1.1\r\nHost: x\r\n\r\n')
        self.assertEqual(b'', self.receive_all(idle))
        self.assertTrue(self.receive_all(kept).startswith(b'HTTP/1.1 200 '))

    def test_http_1_0_and_connection_close_are_not_kept(self):
        self.serve()
        for request in (b'GET / HTTP/1.0\r\n\r\n',
                        b'GET / HTTP/1.1\r\nHost: x\r\nConnection: close'
                        b'\r\n\r\n'):
            sock = self.connect()
            sock.sendall(request)
            reply = self.receive_all(sock)
            self.assertIn(b' 200 OK\r\n', reply)

    def test_stopping_finishes_requests_and_closes_idle_connections(self):
        self.serve()
        idle = self.http()
        idle.request('GET', '/')
        self.assertEqual(200, idle.getresponse().status)
        busy = self.connect()
        busy.sendall(b'GET /block HTTP/1.1\r\nHost: x\r\n\r\n')
        self.assertTrue(self.entered.wait(WAIT))
        stopping = threading.Thread(target=self.stop)
        stopping.start()
        self.release.set()
        reply = self.receive_all(busy)
        stopping.join(WAIT)
        self.assertFalse(stopping.is_alive())
        self.assertTrue(reply.startswith(b'HTTP/1.1 200 '), reply)
        self.assertTrue(reply.endswith(b'finished'), reply)
        self.assertEqual(b'', idle.sock.recv(1))
        self.assertEqual(self.threads_before, set(threading.enumerate()))

    def test_connections_beyond_the_cap_wait(self):
        self.serve(max_connections=1)
        kept = self.http()
        kept.request('GET', '/')
        self.assertEqual(200, kept.getresponse().status)
        waiting = self.connect()
        waiting.sendall(b'GET / HTTP/1.1\r\nHost: x\r\n'
                        b'Connection: close\r\n\r\n')
        waiting.settimeout(1)
        self.assertRaises(TimeoutError, waiting.recv, 1)
        # One closes: the waiting connection is taken and served.
        kept.close()
        waiting.settimeout(WAIT)
        self.assertTrue(
            self.receive_all(waiting).startswith(b'HTTP/1.1 200 '))
