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

"""trove-upgrade-conductor: records what agents report, times out the rest.

Reads ``--config-file`` and ``--config-dir`` drop-in directories like every
service, logs through oslo.log and runs one conductor service under
oslo.service's launcher, which stops it cleanly on SIGTERM.
"""

# First, before oslo.service and oslo.messaging load: the threading backend.
from trove_upgrade.common import threading_backend  # noqa: F401

import gc
import sys

from oslo_config import cfg
from oslo_log import log as logging
from oslo_service import service

from trove_upgrade.common import exception
from trove_upgrade.common import rpc
from trove_upgrade.conductor import service as conductor_service
from trove_upgrade import conf
from trove_upgrade.db import common as db_common
from trove_upgrade.db import migration
from trove_upgrade import version

CONF = conf.CONF
LOG = logging.getLogger(__name__)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    with conf.readable_config('trove-upgrade-conductor', argv):
        CONF(argv,
             project='trove-upgrade',
             prog='trove-upgrade-conductor',
             version=version.version_info.version_string())
    logging.setup(CONF, 'trove-upgrade-conductor')
    try:
        # Reads every value now, so that one that cannot work stops the
        # service here, named, rather than with a traceback later. The
        # notifier first, which registers its options (``rpc``); forked
        # with the service, it holds no connection before a send.
        rpc.check_transport_url()
        rpc.init_notifier()
        CONF.log_opt_values(LOG, logging.DEBUG)
        db_common.check_connection_url(CONF.database.connection)
        migration.check_schema_at_start(CONF.database.connection)
    except (cfg.Error, exception.InvalidInputError) as e:
        reason = str(e)
    else:
        reason = None
    if reason is not None:
        # Out of the except: oslo.log would repeat the exception.
        LOG.error('trove-upgrade-conductor cannot start: %s', reason)
        return 2
    # What the process holds by now (its modules, the configuration) lives
    # as long as it and the processes it forks: out of the collector's
    # sight, a full collection no longer walks it: such a walk stops
    # every thread of the serving process while it runs.
    gc.freeze()
    launcher = service.launch(CONF, conductor_service.ConductorService())
    return launcher.wait()


if __name__ == '__main__':
    sys.exit(main())
