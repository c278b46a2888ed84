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

"""trove-upgrade-agent: the guest-side updater of one Trove instance.

Runs beside the guest agent it upgrades, like SSM's updater: it consumes
upgrades on the instance's topic, installs them side by side, restarts and
checks the guest agent, rolls back on failure, and reports to the
conductor. Reads ``--config-file`` and ``--config-dir`` like every service.
"""

# First, before oslo.service and oslo.messaging load: the threading backend.
from trove_upgrade.common import threading_backend  # noqa: F401

import sys

from oslo_config import cfg
from oslo_log import log as logging
from oslo_service import service

from trove_upgrade.agent import service as agent_service
from trove_upgrade.common import exception
from trove_upgrade.common import rpc
from trove_upgrade import conf
from trove_upgrade.conf import agent as agent_conf
from trove_upgrade import version

CONF = conf.CONF
LOG = logging.getLogger(__name__)


def parse_config(argv):
    """Parse the agent's configuration and set up its logging.

    With the agent's own defaults first: a log file rotated by size.
    """
    agent_conf.set_defaults(CONF)
    with conf.readable_config('trove-upgrade-agent', argv):
        CONF(argv,
             project='trove-upgrade',
             prog='trove-upgrade-agent',
             version=version.version_info.version_string())
    logging.setup(CONF, 'trove-upgrade-agent')


def main(argv=None):
    parse_config(sys.argv[1:] if argv is None else argv)
    try:
        # Reads every value now, so that one that cannot work stops the
        # service here, named, rather than with a traceback later.
        CONF.log_opt_values(LOG, logging.DEBUG)
    except cfg.Error as e:
        LOG.error('trove-upgrade-agent cannot start: %s', e)
        return 2
    try:
        rpc.check_transport_url()
        agent = agent_service.AgentService(CONF)
    except (exception.TroveUpgradeError, OSError) as e:
        reason = str(e)
    else:
        reason = None
    if reason is not None:
        # Out of the except: oslo.log would repeat the exception.
        LOG.error('trove-upgrade-agent cannot start: %s', reason)
        return 2
    launcher = service.launch(CONF, agent, restart_method='mutate')
    return launcher.wait()


if __name__ == '__main__':
    sys.exit(main())
