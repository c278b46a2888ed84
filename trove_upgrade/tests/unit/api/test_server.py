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

"""trove-upgrade-api's HTTP/1.1 server, on a real socket on loopback.

Each test serves a small WSGI application with ``make_server`` in a
thread of its own and talks to it with raw sockets or http.client.
"""

import http.client
import json
import socket
import threading

import fixtures
import webob

from trove_upgrade.api import server as api_server
from trove_upgrade.api import util
from trove_upgrade.tests import base

# Generous bounds so that a server that hangs fails the test, not the run.
WAIT = 30


@util.wsgify
def _api_app(req):
    """Echo the body as the API's handlers read it (req.body)."""
    return webob.Response(body=req.body)


def _app(environ, start_response):
    """Echo the request body; /stream answers without Content-Length."""
    path = environ['PATH_INFO']
    if path == '/api':
        return _api_app(environ, start_response)
    if path == '/unread':
        body = b'not read'
    else:
        length = int(environ.get('CONTENT_LENGTH') or 0)
        body = environ['wsgi.input'].read(length)
    if path == '/fail':
        raise RuntimeError('the application failed')
    elif path == '/stream':
        start_response('200 OK', [('Content-Type', 'text/plain')])
        return iter([b'one ', b'two'])
    elif path == '/block':
        environ['test.entered'].set()
        environ['test.release'].wait(WAIT)
        body = b'finished'
    start_response('200 OK', [('Content-Type', 'text/plain'),
                              ('Content-Length', str(len(body)))])
    return [body]


class TestServer(base.TestCase):

    def setUp(self):
        super().setUp()
        self.entered = threading.Event()
        self.release = threading.Event()
        self.addCleanup(self.release.set)

    def serve(self, client_timeout=None, max_connections=None):
        def application(environ, start_response):
            environ['test.entered'] = self.entered
            environ['test.release'] = self.release
            return _app(environ, start_response)

        self.threads_before = set(threading.enumerate())
        self.server = api_server.make_server(
            '127.0.0.1', 0, application, client_timeout=client_timeout,
            max_connections=max_connections)
        self.port = self.server.server_address[1]
        self.serving = threading.Thread(target=self.server.serve_forever,
                                        kwargs={'poll_interval': 0.05})
        self.serving.start()
        self.addCleanup(self.stop)

    def stop(self):
        if self.serving.is_alive():
            self.server.shutdown()
            self.server.server_close()
            self.serving.join(WAIT)

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

    def receive_all(self, sock):
        """Everything the server sends until it closes the connection."""
        data = b''
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return data
            data += chunk

    def test_requests_share_one_connection(self):
        self.serve()
        conn = self.http()
        sockets = []
        for body in (b'first', b'second'):
            conn.request('POST', '/', body=body)
            resp = conn.getresponse()
            self.assertEqual(200, resp.status)
            self.assertEqual(body, resp.read())
            self.assertIsNone(resp.getheader('Connection'))
            sockets.append(conn.sock)
        self.assertIs(sockets[0], sockets[1])

    def test_unread_body_closes_the_connection(self):
        self.serve()
        sock = self.connect()
        # The body looks like a request: it must not be taken for one.
        smuggled = b'GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n'
        sock.sendall(b'POST /unread HTTP/1.1\r\nHost: x\r\n'
                     b'Content-Length: %d\r\n\r\n' % len(smuggled)
                     + smuggled)
        reply = self.receive_all(sock)
        self.assertEqual(1, reply.count(b'HTTP/1.1 '), reply)
        self.assertIn(b'\r\nConnection: close\r\n', reply)
        self.assertTrue(reply.endswith(b'not read'), reply)

    def test_chunked_request_is_refused(self):
        self.serve()
        sock = self.connect()
        sock.sendall(b'POST / HTTP/1.1\r\nHost: x\r\n'
                     b'Transfer-Encoding: chunked\r\n\r\n'
                     b'5\r\nhello\r\n0\r\n\r\n')
        reply = self.receive_all(sock)
        self.assertTrue(reply.startswith(b'HTTP/1.1 411 '), reply)
        self.assertEqual(1, reply.count(b'HTTP/1.1 '), reply)

    def assertJSONError(self, reply, status, detail):
        head, body = reply.split(b'\r\n\r\n', 1)
        self.assertTrue(head.startswith(b'HTTP/1.1 %d ' % status), reply)
        self.assertIn(b'\r\nContent-Type: application/json\r\n', head)
        error = json.loads(body)['errors'][0]
        self.assertEqual(status, error['status'])
        self.assertIn(detail, error['detail'])

    def test_server_errors_have_the_json_error_body(self):
        # They were the standard library's HTML page.
        self.serve()
        for request, status, detail in (
                (b'POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n',
                 411, 'A request body needs a Content-Length.'),
                (b'POST / HTTP/1.1\r\nContent-Length: "1"\r\n\r\n', 400,
                 'A request needs one Content-Length, a number of bytes.'),
                (b'GET /' + b'x' * 70000 + b' HTTP/1.1\r\n\r\n', 414,
                 'URI is too long'),
                (b'GET / HTTP/1.1\r\nX-Long: ' + b'x' * 70000
                 + b'\r\n\r\n', 431, 'Line too long'),
                # Once answered with the JSON body alone, as HTTP/0.9.
                (b'GET / HTTP/9.9\r\n\r\n', 505, 'Invalid HTTP version'),
                (b'\x00\x01\x02\r\n\r\n', 400, 'Bad request syntax'),
                (b'POST /\r\n\r\n', 400, 'Bad HTTP/0.9 request type')):
            sock = self.connect()
            sock.sendall(request)
            self.assertJSONError(self.receive_all(sock), status, detail)

    def test_a_body_cut_short_is_answered_408(self):
        # The silent client's read timed out inside the application: 500.
        self.serve(client_timeout=0.2)
        self.quiet_tracebacks()
        sock = self.connect()
        sock.sendall(b'POST /api HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n'
                     b'\r\n{"a"')
        self.assertJSONError(self.receive_all(sock), 408,
                             'sent less of the body than its Content-Length')

    def test_bad_content_length_is_refused(self):
        self.serve()
        for lengths in ([b'-1'], [b'x'], [b'2', b'3']):
            sock = self.connect()
            sock.sendall(b'POST / HTTP/1.1\r\nHost: x\r\n'
                         + b''.join(b'Content-Length: %s\r\n' % n
                                    for n in lengths)
                         + b'\r\nabc')
            reply = self.receive_all(sock)
            self.assertTrue(reply.startswith(b'HTTP/1.1 400 '), reply)

    def test_request_line_and_headers_are_bounded(self):
        self.serve()
        sock = self.connect()
        sock.sendall(b'GET /' + b'x' * 70000 + b' HTTP/1.1\r\n\r\n')
        self.assertTrue(
            self.receive_all(sock).startswith(b'HTTP/1.1 414 '))
        # The standard library's bound, which python-swiftclient raises.
        too_many = http.client._MAXHEADERS + 1
        for headers in (b'X-Long: ' + b'x' * 70000 + b'\r\n',
                        b''.join(b'X-H%d: v\r\n' % i
                                 for i in range(too_many))):
            sock = self.connect()
            sock.sendall(b'GET / HTTP/1.1\r\n' + headers + b'\r\n')
            self.assertTrue(
                self.receive_all(sock).startswith(b'HTTP/1.1 431 '))

    def test_response_without_length_closes(self):
        self.serve()
        sock = self.connect()
        sock.sendall(b'GET /stream HTTP/1.1\r\nHost: x\r\n\r\n')
        reply = self.receive_all(sock)
        self.assertIn(b'\r\nConnection: close\r\n', reply)
        self.assertTrue(reply.endswith(b'\r\n\r\none two'), reply)

    def quiet_tracebacks(self):
        self.useFixture(fixtures.MonkeyPatch(
            'wsgiref.handlers.BaseHandler.log_exception',
            lambda self, exc_info: None))

    def test_application_error_answers_500_and_closes(self):
        self.serve()
        self.quiet_tracebacks()
        sock = self.connect()
        sock.sendall(b'GET /fail HTTP/1.1\r\nHost: x\r\n\r\n'
                     b'GET / HTTP/1.1\r\nHost: x\r\n\r\n')
        reply = self.receive_all(sock)
        self.assertTrue(reply.startswith(b'HTTP/1.1 500 '), reply)
        self.assertEqual(1, reply.count(b'HTTP/1.1 '), reply)

    def test_http_1_0_and_connection_close_are_not_kept(self):
        self.serve()
        for request in (b'GET / HTTP/1.0\r\n\r\n',
                        b'GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n',
                        b'GET / HTTP/1.1\r\nHost: x\r\nConnection: close'
                        b'\r\n\r\n'):
            sock = self.connect()
            sock.sendall(request)
            reply = self.receive_all(sock)
            self.assertIn(b' 200 OK\r\n', reply)
            self.assertIn(b'\r\nConnection: close\r\n', reply)

    def test_expect_100_continue(self):
        self.serve()
        sock = self.connect()
        sock.sendall(b'POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n'
                     b'Expect: 100-continue\r\n\r\n')
        self.assertEqual(b'HTTP/1.1 100 Continue\r\n\r\n',
                         sock.recv(len(b'HTTP/1.1 100 Continue\r\n\r\n')))
        sock.sendall(b'body')
        sock.shutdown(socket.SHUT_WR)
        self.assertTrue(self.receive_all(sock).endswith(b'\r\n\r\nbody'))

    def test_silent_client_is_disconnected(self):
        self.serve(client_timeout=0.2)
        self.quiet_tracebacks()
        idle = self.connect()
        # Half a request, then nothing.
        partial = self.connect()
        partial.sendall(b'POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n'
                        b'\r\nabc')
        # Kept alive after one request, then nothing.
        kept = self.connect()
        kept.sendall(b'GET / HTTP/1.1\r\nHost: x\r\n\r\n')
        self.assertEqual(b'', self.receive_all(idle))
        self.assertTrue(self.receive_all(kept).startswith(b'HTTP/1.1 200 '))
        # The application got a short body and failed; the server closed.
        self.assertNotIn(b' 200 OK', self.receive_all(partial))

    def test_half_closed_client_gets_its_answer(self):
        self.serve()
        sock = self.connect()
        sock.sendall(b'POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n'
                     b'\r\nhi')
        sock.shutdown(socket.SHUT_WR)
        reply = self.receive_all(sock)
        self.assertTrue(reply.startswith(b'HTTP/1.1 200 '), reply)
        self.assertTrue(reply.endswith(b'\r\n\r\nhi'), reply)

    def test_stopping_closes_idle_connections_and_finishes_requests(self):
        # No client timeout: only stopping can end the idle connection.
        self.serve()
        idle = self.http()
        idle.request('GET', '/')
        self.assertEqual(200, idle.getresponse().status)
        busy = self.connect()
        busy.sendall(b'GET /block HTTP/1.1\r\nHost: x\r\n\r\n')
        self.assertTrue(self.entered.wait(WAIT))
        stopping = threading.Thread(target=self.stop)
        stopping.start()
        self.assertEqual(b'', idle.sock.recv(1))
        self.release.set()
        reply = self.receive_all(busy)
        stopping.join(WAIT)
        self.assertFalse(stopping.is_alive())
        self.assertTrue(reply.startswith(b'HTTP/1.1 200 '), reply)
        self.assertIn(b'\r\nConnection: close\r\n', reply)
        self.assertTrue(reply.endswith(b'finished'), reply)

    def test_no_thread_outlives_the_server(self):
        self.serve(client_timeout=5)
        for _ in range(5):
            conn = http.client.HTTPConnection('127.0.0.1', self.port,
                                              timeout=WAIT)
            conn.request('GET', '/')
            conn.getresponse().read()
            conn.close()
        kept = self.http()
        kept.request('GET', '/')
        kept.getresponse().read()
        self.stop()
        self.assertEqual(self.threads_before, set(threading.enumerate()))

    def connection_threads(self):
        """The threads of the server's open connections."""
        return set(threading.enumerate()) - self.threads_before - {
            self.serving}

    def wait_for_connection_threads(self, count):
        """Until ``count`` connection threads are left (bounded by WAIT)."""
        done = threading.Event()
        for _ in range(int(WAIT / 0.01)):
            if len(self.connection_threads()) == count:
                return
            done.wait(0.01)
        self.fail('%d connection threads, not %d'
                  % (len(self.connection_threads()), count))

    def test_connections_beyond_the_cap_are_refused_503(self):
        self.serve(max_connections=2)
        kept = [self.http(), self.http()]
        for conn in kept:  # open and idle, kept alive
            conn.request('GET', '/')
            resp = conn.getresponse()
            self.assertEqual((200, b''), (resp.status, resp.read()))
        self.wait_for_connection_threads(2)

        # The third is answered before it sends anything, and closed.
        refused = self.connect()
        reply = self.receive_all(refused)
        head, _, body = reply.partition(b'\r\n\r\n')
        self.assertTrue(head.startswith(b'HTTP/1.1 503 '), reply)
        self.assertIn(b'\r\nConnection: close', head)
        self.assertIn(b'\r\nContent-Type: application/json', head)
        error, = json.loads(body)['errors']
        self.assertEqual((503, 'Service Unavailable'),
                         (error['status'], error['title']))
        # Its own request id, in the body and the header, as any answer.
        self.assertRegex(error['request_id'], '^req-[0-9a-f-]{36}$')
        self.assertIn(b'\r\nx-openstack-request-id: %s'
                      % error['request_id'].encode(), head)
        self.assertIn('[api] max_connections', error['detail'])
        # No thread was started for it.
        self.assertEqual(2, len(self.connection_threads()))
        # Those open are unaffected.
        for conn in kept:
            conn.request('POST', '/', body=b'still here')
            resp = conn.getresponse()
            self.assertEqual((200, b'still here'),
                             (resp.status, resp.read()))

        # One closes: its place is free for a new connection.
        kept.pop().close()
        self.wait_for_connection_threads(1)
        conn = self.http()
        conn.request('POST', '/', body=b'served')
        resp = conn.getresponse()
        self.assertEqual((200, b'served'), (resp.status, resp.read()))

        # Every place is released, whatever ended the connection.
        conn.close()
        for conn in kept:
            conn.close()
        self.wait_for_connection_threads(0)
        self.stop()
        self.assertEqual(self.threads_before, set(threading.enumerate()))

    def test_a_place_is_released_when_a_connection_fails(self):
        self.serve(max_connections=1)
        self.quiet_tracebacks()
        for request, status in (
                (b'GET /fail HTTP/1.1\r\nHost: x\r\n\r\n', b'500'),
                (b'POST /unread HTTP/1.1\r\nHost: x\r\n'
                 b'Content-Length: 4\r\n\r\nbody', b'200'),
                (b'GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n',
                 b'411'),
                (b'GET / HTTP/1.0\r\n\r\n', b'200')):
            # Each ends its connection: the next one is served.
            sock = self.connect()
            sock.sendall(request)
            reply = self.receive_all(sock)
            self.assertTrue(reply.startswith(b'HTTP/1.1 %s ' % status),
                            reply)
            sock.close()
            self.wait_for_connection_threads(0)
        # The client goes, silent or in the middle of its request.
        for request in (b'', b'GET / HTTP/1.1\r\nHost'):
            sock = self.connect()
            sock.sendall(request)
            self.wait_for_connection_threads(1)
            sock.close()
            self.wait_for_connection_threads(0)
        conn = self.http()
        conn.request('GET', '/')
        self.assertEqual(200, conn.getresponse().status)
