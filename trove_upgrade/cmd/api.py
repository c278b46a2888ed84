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

The server is waitress (``trove_upgrade.api.server``), run by
oslo.service's launcher: SIGTERM and SIGINT let the requests in flight
finish, close the connections and exit 0. A configuration that cannot
work (a file it cannot read, an option value, the policy file, the
database URL, an address it cannot bind) stops it at start with one line
and status 2.
"""

# First, before oslo.service and oslo.messaging load: the threading backend.
from trove_upgrade.common import threading_backend  # noqa: F401

import sys

from oslo_config import cfg
from oslo_log import log as logging
from oslo_service import service

from trove_upgrade.api import deploy
from trove_upgrade.api import server as api_server
from trove_upgrade.common import exception
from trove_upgrade import conf as tu_conf
from trove_upgrade.db import migration
from trove_upgrade import wsgi

LOG = logging.getLogger(__name__)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    with tu_conf.readable_config('trove-upgrade-api', argv):
        conf = wsgi.parse_config(argv)
    server = None
    try:
        server = api_server.APIService(
            conf.api.bind_host, conf.api.bind_port, deploy.loadapp(conf),
            client_timeout=conf.api.client_socket_timeout,
            max_connections=conf.api.max_connections,
            max_body_size=conf.api.max_request_body_size)
        migration.check_schema_at_start(conf.database.connection)
    except (cfg.Error, exception.TroveUpgradeError, OSError,
            ValueError) as e:
        # An option value, the policy file, the database URL, the
        # address, the schema: named in one line rather than a traceback.
        reason = str(e)
    else:
        return _serve(server, conf)
    if server is not None:
        server.stop()
    # Out of the except: oslo.log would repeat the exception.
    LOG.error('trove-upgrade-api cannot start: %s', reason)
    return 2


def _serve(server, conf):
    host, port = server.address
    LOG.info('trove-upgrade-api serving on http://%s:%s (auth: %s)',
             host, port, conf.api.auth_strategy)
    launcher = service.launch(conf, server, restart_method='mutate')
    launcher.wait()
    LOG.info('trove-upgrade-api stopping')
    return 0
