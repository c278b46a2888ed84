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

"""The built-in HTTP/1.1 server of ``trove-upgrade-api``.

A threaded stdlib WSGI server, enough for an admin API and for the demo;
production deployments serve ``trove_upgrade.wsgi.api:application`` with
uWSGI or gunicorn. It keeps a client's connection open between requests,
one thread per connection: a new connection and thread for every request
cost the API a fifth of its CPU per upgrade.

A connection is closed, rather than kept, after a response that has no
Content-Length, after a request whose body the API did not read to its
end (a 413, say), after an error, for a client that asks for it or speaks
HTTP/1.0, and once the server is stopping. A request with a
Transfer-Encoding is answered 411: its body has no length to bound it.
A header section that is not plain ``name: value`` lines (a space before
the colon, a line without one, a line folded onto the next, a control
character), a Content-Length that is not one number of ASCII digits, an
HTTP/1.1 request without exactly one Host and an HTTP/0.9 request line
are answered 400 (505 for HTTP/0.9) and the connection closed: the
standard library would let them through, and a proxy in front reading
them otherwise than this server could smuggle a request in a body.
A request target in absolute form (``GET http://host/path``) is served,
its host taken for Host (RFC 9112).
A client that stays silent for ``client_timeout`` seconds, between
requests or in the middle of one, is disconnected; one silent in the
middle of its body is answered 408 first. A client that sends
``Expect: 100-continue`` gets its 100 Continue only once the API reads
the body; a request refused before (413, 401, 404) is answered at once.
The server's own errors (400, 411, 413, 414, 431, 505) have the API's
JSON error body, and a status line even for a request line that did not
parse. Closing the server
closes the idle connections and waits for the requests in flight.

At most ``max_connections`` connections are open at once, idle or not: a
client opening thousands would otherwise get thousands of threads. One
more is answered 503 as it is accepted, by the thread that accepts, and
closed; the ones open are unaffected, and each frees its place when its
thread ends, however it ends.
"""

import http
import re
import socket
import socketserver
import threading
from wsgiref import simple_server

from oslo_context import context
from oslo_log import log as logging
from oslo_middleware import request_id
import webob.exc

from trove_upgrade.api import requestlog
from trove_upgrade.api import util


LOG = logging.getLogger(__name__)

# How the standard library bounds a request line (it answers 414 above).
_MAX_REQUEST_LINE = 65536
# The largest Content-Length taken: a signed 64-bit count, as most servers.
_MAX_CONTENT_LENGTH = 2 ** 63 - 1

# RFC 9110: a field name is a token; a value holds no control character
# but horizontal tab (a CR or LF in one is a line folded onto the next).
# Matched against all names, joined by spaces, and all values at once.
_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_FIELD_NAMES = re.compile(r'(%s( %s)*)?\Z' % (_TOKEN, _TOKEN))
_FIELD_VALUE_CONTROL = re.compile(r'[\x00-\x08\x0a-\x1f\x7f]')
# RFC 9112 section 3.2: uri-host [ ":" port ], a reg-name or an IP literal.
_HOST = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~%!$&'()*+,;=-]*)"
                   r"(:[0-9]*)?\Z")


def _header_error(headers):
    """Why the header section ``headers`` is malformed, or None.

    http.client's parser, made for e-mail, ends the section at the first
    line that is no field (``Content-Length : 5``, ``Host x``) and drops
    the rest, and joins a folded line to the one before: a Content-Length
    or Transfer-Encoding written so would be missed and its body read as
    the next request.
    """
    if headers.defects or headers.get_payload():
        return ('A header line is not a field name, a colon and a value '
                '(RFC 9112, section 5).')
    items = headers.items()
    if not _FIELD_NAMES.match(' '.join(name for name, _value in items)):
        name = next(name for name, _value in items
                    if not _FIELD_NAMES.match(name) or ' ' in name)
        return 'The header name %r is not a token (RFC 9110).' % name
    if _FIELD_VALUE_CONTROL.search(''.join(value for _name, value in items)):
        name = next(name for name, value in items
                    if _FIELD_VALUE_CONTROL.search(value))
        return ('The value of header %s holds a control character or is '
                'folded onto another line.' % name)
    return None


def _content_length(headers):
    """The body's length, None for a malformed one, -1 for too large."""
    lengths = headers.get_all('Content-Length', ['0'])
    if len(lengths) > 1:
        return None
    value = util.content_length(lengths[0].strip(' \t') or '0',
                                _MAX_CONTENT_LENGTH)
    if value is None:
        return None
    return -1 if value > _MAX_CONTENT_LENGTH else value


def _host_error(headers, version):
    hosts = headers.get_all('Host', [])
    if len(hosts) > 1 or (not hosts and version == 'HTTP/1.1'):
        return 'An HTTP/1.1 request needs one Host header (RFC 9112).'
    if hosts and not _HOST.match(hosts[0].strip(' \t')):
        return 'The Host header %r is not a host and port.' % hosts[0]
    return None


class _ThreadingWSGIServer(socketserver.ThreadingMixIn,
                           simple_server.WSGIServer):
    """One thread per connection; closing the server waits for them."""

    daemon_threads = False
    block_on_close = True
    allow_reuse_address = True
    # Seconds a connection may stay silent (StreamRequestHandler.timeout).
    client_timeout = None
    # Connections open at once, each with its thread (None: no limit).
    max_connections = None

    def __init__(self, *args, **kwargs):
        self._lock = threading.Lock()
        self._idle = set()
        self._open = 0
        self._refusing = False
        self.stopping = False
        super().__init__(*args, **kwargs)

    def process_request(self, request, client_address):
        """A thread for the connection, or a 503 when all places are taken."""
        with self._lock:
            full = (self.max_connections is not None
                    and self._open >= self.max_connections)
            if not full:
                self._open += 1
            first_refusal = full and not self._refusing
            self._refusing = full
        if full:
            if first_refusal:
                LOG.warning('trove-upgrade-api has %d connections open, '
                            '[api] max_connections: refusing new ones '
                            'with 503 until one closes.',
                            self.max_connections)
            self._refuse(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._release()  # no thread started to release it
            raise

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._release()

    def _release(self):
        with self._lock:
            self._open -= 1
            self._refusing = False

    def _refuse(self, connection):
        """Answer 503 without waiting for the client, then close.

        The accepting thread must never block on a client: the answer,
        far smaller than a socket's send buffer, is sent without waiting,
        and whatever part of it cannot be sent is dropped.
        """
        # An id of its own, as every answer has, for the client to quote.
        req_id = context.generate_request_id()
        response = util.error_response(
            http.HTTPStatus.SERVICE_UNAVAILABLE,
            'The server has [api] max_connections connections open. Try '
            'again later.', {request_id.ENV_REQUEST_ID: req_id},
            headers=[('Connection', 'close'),
                     (request_id.HTTP_RESP_HEADER_REQUEST_ID, req_id)])
        head = ''.join('%s: %s\r\n' % header
                       for header in response.headerlist)
        try:
            connection.setblocking(False)
            connection.send(b'HTTP/1.1 %s\r\n%s\r\n%s' % (
                response.status.encode('ascii'), head.encode('latin-1'),
                response.body))
        except OSError:
            pass  # the client is gone, or cannot take it now: just close
        self.shutdown_request(connection)

    def await_request(self, connection, readline):
        """The next request line of ``connection``; b'' once stopping.

        A connection waiting here is idle: stopping the server shuts its
        reading side, which ends the wait. One whose request line has
        come in is no longer idle and gets its answer.
        """
        with self._lock:
            if self.stopping:
                return b''
            self._idle.add(connection)
        try:
            return readline()
        finally:
            with self._lock:
                self._idle.discard(connection)

    def server_close(self):
        with self._lock:
            self.stopping = True
            idle, self._idle = self._idle, set()
        for connection in idle:
            try:
                connection.shutdown(socket.SHUT_RD)
            except OSError:
                pass  # the client closed it meanwhile
        super().server_close()  # joins the connections' threads


class _RequestBody:
    """``wsgi.input``: at most Content-Length bytes of the connection.

    What the application leaves unread would be taken for the next
    request; ``remaining`` tells the server to close the connection
    instead.
    """

    def __init__(self, rfile, length, before_reading=None):
        self._rfile = rfile
        self.remaining = length
        # Called once, as the application first reads (100 Continue).
        self._before_reading = before_reading

    def _size(self, size):
        if size is None or size < 0 or size > self.remaining:
            return self.remaining
        return size

    def _take(self, read, size):
        size = self._size(size)
        if size and self._before_reading is not None:
            self._before_reading()
            self._before_reading = None
        try:
            data = read(size) if size else b''
        except TimeoutError:
            # The application's error, not a 500 with a traceback.
            raise webob.exc.HTTPRequestTimeout(
                'The client sent less of the body than its Content-Length '
                'says, then nothing for [api] client_socket_timeout '
                'seconds.')
        self.remaining -= len(data)
        return data

    def read(self, size=-1):
        return self._take(self._rfile.read, size)

    def readline(self, size=-1):
        return self._take(self._rfile.readline, size)

    def readlines(self, hint=-1):
        lines = []
        total = 0
        while True:
            line = self.readline()
            if not line:
                return lines
            lines.append(line)
            total += len(line)
            if 0 < hint <= total:
                return lines

    def __iter__(self):
        return iter(self.readline, b'')


class _ServerHandler(simple_server.ServerHandler):
    """One response; it tells the connection whether it can be kept."""

    http_version = '1.1'
    wsgi_multithread = True

    def cleanup_headers(self):
        super().cleanup_headers()
        connection = self.request_handler
        if ('Content-Length' not in self.headers
                or connection.body.remaining or connection.server.stopping):
            connection.close_connection = True
        if connection.close_connection:
            self.headers['Connection'] = 'close'

    def handle_error(self):
        # A response cut short must not be followed by another.
        self.request_handler.close_connection = True
        super().handle_error()

    def _flush(self):
        # The connection flushes once per response (_RequestHandler).
        pass


class _RequestHandler(simple_server.WSGIRequestHandler):
    """Requests of one connection, one after the other, until it closes."""

    protocol_version = 'HTTP/1.1'
    # Buffered: a response leaves in one send rather than one per header.
    wbufsize = -1

    def setup(self):
        self.timeout = self.server.client_timeout
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def handle(self):
        self.close_connection = True
        self.handle_one_request()
        while not self.close_connection:
            self.handle_one_request()

    def handle_one_request(self):
        try:
            self._handle_one_request()
        except TimeoutError:
            # Silent past [api] client_socket_timeout, mid-request.
            self.close_connection = True
        finally:
            try:
                self.wfile.flush()
            except OSError:
                self.close_connection = True

    def _handle_one_request(self):
        self.body = _RequestBody(self.rfile, 0)
        self.expects_continue = False
        try:
            self.raw_requestline = self.server.await_request(
                self.connection,
                lambda: self.rfile.readline(_MAX_REQUEST_LINE + 1))
        except (TimeoutError, OSError):
            self.raw_requestline = b''
        if not self.raw_requestline:
            # Closed, silent too long, or the server is stopping.
            self.close_connection = True
            return
        if len(self.raw_requestline) > _MAX_REQUEST_LINE:
            self.requestline = self.request_version = self.command = ''
            self.send_error(http.HTTPStatus.REQUEST_URI_TOO_LONG)
            return
        if not self.parse_request():  # it has answered with the error
            return
        if self.request_version == 'HTTP/0.9':
            # Its answer would have no status line, headers or request id.
            self.send_error(http.HTTPStatus.HTTP_VERSION_NOT_SUPPORTED,
                            'The request line names no HTTP version; this '
                            'server speaks HTTP/1.0 and HTTP/1.1.')
            return
        malformed = _header_error(self.headers)
        if malformed:
            self.send_error(http.HTTPStatus.BAD_REQUEST, malformed)
            return
        if self.request_version != 'HTTP/1.1':
            self.close_connection = True
        if 'Transfer-Encoding' in self.headers:
            self.send_error(http.HTTPStatus.LENGTH_REQUIRED,
                            'A request body needs a Content-Length.')
            return
        length = _content_length(self.headers)
        if length is None:
            self.send_error(http.HTTPStatus.BAD_REQUEST,
                            'A request needs one Content-Length, a '
                            'number of bytes.')
            return
        if length < 0:
            self.send_error(http.HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                            'The Content-Length is larger than this '
                            'server takes.')
            return
        self._take_absolute_form()
        malformed = _host_error(self.headers, self.request_version)
        if malformed:
            self.send_error(http.HTTPStatus.BAD_REQUEST, malformed)
            return
        self.body = _RequestBody(
            self.rfile, length,
            self._send_continue if self.expects_continue else None)
        handler = _ServerHandler(
            self.body, self.wfile, self.get_stderr(), self.get_environ(),
            multithread=True)
        handler.request_handler = self  # logs the request, keeps or closes
        handler.run(self.server.get_app())
        if self.body.remaining or handler.status is not None:
            # Left unread, or not finished (finishing clears status).
            self.close_connection = True

    def _take_absolute_form(self):
        """``GET http://host/path``: the path, and its host for Host.

        A server must accept a request target in absolute form, and then
        ignore the Host header for the target's host (RFC 9112, 3.2.2);
        wsgiref took the whole URL for the path (404).
        """
        scheme, _, rest = self.path.partition('://')
        if not rest or scheme.lower() not in ('http', 'https'):
            return
        host, slash, path = rest.partition('/')
        self.path = slash + path if slash else '/' + path
        if '?' in host:
            host, query = host.split('?', 1)
            self.path = '/?' + query
        del self.headers['Host']
        self.headers['Host'] = host

    def get_environ(self):
        """The WSGI environ, with the headers as the client sent them.

        wsgiref gives a request without Content-Type one of text/plain,
        which the 415 answering it then named; and it passes the
        Content-Length as sent, spaces and leading zeros included.
        """
        environ = super().get_environ()
        if 'Content-Type' not in self.headers:
            environ.pop('CONTENT_TYPE', None)
        if 'CONTENT_LENGTH' in environ:
            environ['CONTENT_LENGTH'] = str(self.body.remaining)
        return environ

    def send_error(self, code, message=None, explain=None):
        """The server's own error, in the API's JSON error format.

        With a request id of its own, as every answer has, and one line
        in the log, as the request log writes for the application's.
        """
        req_id = context.generate_request_id()
        LOG.info('%(request_id)s %(remote)s "%(request)s" status: %(status)d',
                 {'request_id': req_id, 'remote': self.client_address[0],
                  'request': requestlog.quoted(self.requestline),
                  'status': code})
        self.close_connection = True
        if self.request_version == 'HTTP/0.9':
            # A request line that did not parse (garbage, HTTP/9.9) is
            # taken for HTTP/0.9, whose answers have no status line and
            # no headers: only the JSON body would be sent.
            self.request_version = self.protocol_version
        response = util.error_response(
            code, message or http.HTTPStatus(code).description,
            {request_id.ENV_REQUEST_ID: req_id},
            headers=[(request_id.HTTP_RESP_HEADER_REQUEST_ID, req_id)])
        self.send_response(code)
        self.send_header('Connection', 'close')
        for name, value in response.headerlist:
            self.send_header(name, value)
        self.end_headers()
        if self.command != 'HEAD':
            self.wfile.write(response.body)

    def handle_expect_100(self):
        """Leave 100 Continue until the application reads the body.

        A request refused before that (413, 401, 415, 404) is answered
        without it, so the client never sends the body it waits to send.
        """
        self.expects_continue = True
        return True

    def _send_continue(self):
        self.send_response_only(http.HTTPStatus.CONTINUE)
        self.end_headers()
        self.wfile.flush()

    def log_message(self, format, *args):
        # The API's request log records each request; stay quiet on stderr.
        LOG.debug('%s %s', self.address_string(), format % args)


def make_server(host, port, application, client_timeout=None,
                max_connections=None):
    """A server bound to host:port (IPv4 or IPv6); port 0 picks one.

    ``client_timeout``: seconds a connection may stay silent (None: no
    limit). ``max_connections``: connections open at once (None: no
    limit).
    """
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    server_class = type('WSGIServer', (_ThreadingWSGIServer,),
                        {'address_family': family,
                         'client_timeout': client_timeout,
                         'max_connections': max_connections})
    return simple_server.make_server(host, port, application,
                                     server_class=server_class,
                                     handler_class=_RequestHandler)
