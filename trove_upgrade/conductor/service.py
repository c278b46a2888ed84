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

"""The conductor service: its RPC server and its periodic task.

The launcher may fork before it starts the service, so everything that
holds a connection (the RPC transport, the database engine) is first used
in ``start``, in the process that serves.
"""

import socket

from oslo_log import log as logging
import oslo_messaging as messaging
from oslo_service import service

from trove_upgrade.common import conductor_rpcapi as conductor_rpcapi
from trove_upgrade.common import context as tu_context
from trove_upgrade.common import rpc
from trove_upgrade.common import rpc_interface
from trove_upgrade.conductor import db_outage
from trove_upgrade.conductor import heartbeats
from trove_upgrade.conductor import manager
from trove_upgrade.conductor import reconciler
from trove_upgrade import conf
from trove_upgrade.services import upgrades

CONF = conf.CONF
LOG = logging.getLogger(__name__)


class ConductorService(service.Service):
    """Serves ``[conductor] topic`` and times out silent upgrades."""

    def __init__(self, host=None):
        super().__init__()
        self.host = host or socket.gethostname()
        self.manager = manager.ConductorManager()
        self.rpcserver = None
        self.reconciler = None

    def start(self):
        super().start()
        # Forked first, while this process holds no connection yet.
        self.reconciler = reconciler.start_process(self.host)
        target = messaging.Target(topic=conductor_rpcapi.topic(),
                                  server=self.host)
        self.manager.reports.start()
        self.rpcserver = rpc.get_rpc_server(target, [self.manager],
                                            rpc_interface.CONDUCTOR)
        self.rpcserver.start()
        self.tg.add_timer_args(CONF.conductor.periodic_interval,
                               db_outage.attempt,
                               args=('Timing out silent upgrades',
                                     self.time_out_upgrades),
                               stop_on_exception=False)
        self.tg.add_timer_args(heartbeats.FLUSH_INTERVAL,
                               db_outage.attempt,
                               args=('Writing the batched heartbeats',
                                     self.flush_heartbeats),
                               stop_on_exception=False)
        LOG.info('Conductor %(host)s listening on topic %(topic)s, '
                 'exchange %(exchange)s.',
                 {'host': self.host, 'topic': target.topic,
                  'exchange': CONF.control_exchange})
        if not CONF.conductor.instance_key_master_key_file:
            # Not refused: deployments that stored keys so keep working.
            LOG.warning('[conductor] instance_key_master_key_file is not '
                        'set: instance keys are stored unencrypted, and a '
                        'copy of the database lets its holder order '
                        'upgrades and forge reports.')

    def time_out_upgrades(self):
        """The periodic task; ``db_outage.attempt`` logs its failures."""
        upgrades.time_out_upgrades(tu_context.get_admin_context())

    def flush_heartbeats(self):
        """Write the batched heartbeats (``heartbeats``); a timer's task.

        Not the manager's: every public method of the manager is an RPC
        endpoint.
        """
        self.manager.heartbeats.flush(tu_context.get_admin_context())

    def stop(self, graceful=True):
        if self.reconciler is not None:
            reconciler.stop_process(self.reconciler)
            self.reconciler = None
        if self.rpcserver is not None:
            self.rpcserver.stop()
            self.rpcserver.wait()
            self.rpcserver = None
            # The heartbeats the server took last, not lost to the stop.
            try:
                self.flush_heartbeats()
            except Exception:
                LOG.exception('Could not write the last batch of '
                              'heartbeats.')
        # After the server's threads: none waits for the writer any more.
        self.manager.reports.stop()
        super().stop(graceful=graceful)
        rpc.cleanup()
        LOG.info('Conductor %s stopped.', self.host)
