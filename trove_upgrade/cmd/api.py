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

"""trove-upgrade-api: serve the REST API on [api] bind_host:bind_port.

A threaded stdlib WSGI server, enough for an admin API and for the demo;
production deployments serve ``trove_upgrade.wsgi.api:application`` with
uWSGI or gunicorn. SIGTERM and SIGINT stop accepting connections, let the
requests in flight finish and exit 0.
"""

import signal
import socket
import socketserver
import sys
from wsgiref import simple_server

from oslo_log import log as logging

from trove_upgrade.api import deploy
from trove_upgrade import wsgi

LOG = logging.getLogger(__name__)


class _ThreadingWSGIServer(socketserver.ThreadingMixIn,
                           simple_server.WSGIServer):
    """One thread per request; closing the server waits for them."""

    daemon_threads = False
    block_on_close = True
    allow_reuse_address = True


class _RequestHandler(simple_server.WSGIRequestHandler):
    """The API's request log records each request; stay quiet on stderr."""

    def log_message(self, format, *args):
        LOG.debug('%s %s', self.address_string(), format % args)


def make_server(host, port, application):
    """A server bound to host:port (IPv4 or IPv6); port 0 picks one."""
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    server_class = type('WSGIServer', (_ThreadingWSGIServer,),
                        {'address_family': family})
    return simple_server.make_server(host, port, application,
                                     server_class=server_class,
                                     handler_class=_RequestHandler)


def _stop(signum, frame):
    raise SystemExit(0)


def main(argv=None):
    conf = wsgi.parse_config(sys.argv[1:] if argv is None else argv)
    server = make_server(conf.api.bind_host, conf.api.bind_port,
                         deploy.loadapp(conf))
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    host, port = server.server_address[:2]
    LOG.info('trove-upgrade-api serving on http://%s:%s (auth: %s)',
             host, port, conf.api.auth_strategy)
    try:
        server.serve_forever()
    except SystemExit:
        LOG.info('trove-upgrade-api stopping')
    finally:
        server.server_close()
