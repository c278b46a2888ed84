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

"""``trove-upgrade-api``'s HTTP server: waitress, as an oslo.service service.

waitress parses the requests: it refuses a header section a proxy could
read otherwise (a space before a colon, a line without one, a
Content-Length that is not digits, two of them, a Transfer-Encoding other
than a final ``chunked``), bounds the header section and the body, reads
a whole request before a worker thread runs it, so that a slow client
holds no thread, and closes a connection silent for ``channel_timeout``.
Its own refusals are its plain-text answers. An HTTP/1.1 request without
exactly one Host, which it lets through, is answered 400 here.
Production deployments may serve ``trove_upgrade.wsgi.api:application``
under uWSGI or mod_wsgi instead.

Stopping (SIGTERM, through oslo.service's launcher) lets the worker
threads finish the requests they run, then closes every connection.
"""

import functools
import http
import socket
import threading
import time

from oslo_context import context
from oslo_middleware import request_id
from oslo_service import service
import waitress.server

from trove_upgrade.api import util

# Worker threads: the requests run at once. Connections waiting for their
# next request, or sending one, hold none.
THREADS = 8
# The request line and headers, as the standard library bounded a line.
HEADER_SECTION_BYTES = 65536
# Connections the kernel queues while waitress takes no more.
BACKLOG = 1024
# Seconds a stopping server waits for the requests in flight, and how
# often it looks whether they are done.
STOP_TIMEOUT = 60
STOP_POLL = 0.05


class APIService(service.ServiceBase):
    """waitress serving ``application`` on ``host``:``port``.

    The socket is bound as the service is made, in the launcher's process,
    so that an address that cannot be had stops it at start; waitress and
    its threads start in the process that serves (``start``).
    ``address`` is ``(host, port)`` as bound (port 0 picks one).
    """

    def __init__(self, host, port, application, client_timeout,
                 max_connections, max_body_size):
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM)[0]
        self._socket = socket.socket(family, kind, proto)
        try:
            self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR,
                                    1)
            self._socket.bind(address)
            self._socket.listen(BACKLOG)
        except OSError:
            self._socket.close()
            raise
        self.address = self._socket.getsockname()[:2]
        self._application = _one_host(application)
        self._adjustments = dict(
            threads=THREADS,
            # waitress counts its listening socket and its trigger too.
            connection_limit=max_connections + 2,
            backlog=BACKLOG, channel_timeout=client_timeout,
            # How often silent connections are looked for.
            cleanup_interval=max(1, min(client_timeout, 30)),
            max_request_body_size=max_body_size,
            max_request_header_size=HEADER_SECTION_BYTES,
            expose_tracebacks=False, ident='trove-upgrade-api')
        self._server = None
        self._serving = None

    def start(self):
        self._server = waitress.server.create_server(
            self._application, sockets=[self._socket], **self._adjustments)
        self._serving = threading.Thread(target=self._server.run,
                                         name='trove-upgrade-api')
        self._serving.start()

    def stop(self, graceful=True):
        """Stop accepting, let the requests in flight finish, then close.

        waitress's socket map belongs to its loop's thread: what changes
        it runs there, handed over through the server's trigger.
        """
        server, self._server = self._server, None
        if server is None:
            self._socket.close()
            return
        close_idle = functools.partial(_close_idle_connections, server)
        if _hand_over(server, close_idle):
            deadline = time.monotonic() + STOP_TIMEOUT
            while server.active_channels and time.monotonic() < deadline:
                time.sleep(STOP_POLL)
                if not _hand_over(server, close_idle):
                    break
        server.task_dispatcher.shutdown()
        # Its listening socket and trigger: with them the loop ends.
        _hand_over(server, server.close)

    def wait(self):
        if self._serving is not None:
            self._serving.join()

    def reset(self):
        pass


def _hand_over(server, thunk):
    """Run ``thunk`` in the loop's thread; False once its trigger is closed.

    The trigger is closed when the loop has closed the server already (a
    stop that comes after the loop ended): nothing is left to hand over.
    """
    try:
        server.trigger.pull_trigger(thunk)
    except OSError:
        return False
    return True


def _close_idle_connections(server):
    server.accepting = False
    # Every connection with no request in flight, as if it had been
    # silent past any timeout.
    server.maintenance(float('inf'))


def _one_host(application):
    """``application``, refusing a request without exactly one Host.

    RFC 9112 has a server answer 400 to an HTTP/1.1 request with no Host
    or with several; waitress passes the first on and joins the second's
    values with a comma, which no host holds. (A WSGI application may
    not close the connection; the request's framing was unambiguous.)
    """
    def checked(environ, start_response):
        host = environ.get('HTTP_HOST')
        if (',' in host) if host is not None else (
                environ.get('SERVER_PROTOCOL') == 'HTTP/1.1'):
            req_id = context.generate_request_id()
            response = util.error_response(
                http.HTTPStatus.BAD_REQUEST,
                'An HTTP/1.1 request needs one Host header (RFC 9112).',
                {request_id.ENV_REQUEST_ID: req_id},
                headers=[(request_id.HTTP_RESP_HEADER_REQUEST_ID, req_id)])
            return response(environ, start_response)
        return application(environ, start_response)
    return checked
