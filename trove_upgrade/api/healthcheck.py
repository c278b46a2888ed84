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

"""The health check's database backend: a node without its database is down.

Every call of the API but the public documents needs the database, so a
node that cannot reach it answers them 503; ``/healthcheck`` says so too,
and a load balancer stops sending it requests. The backend is registered
in setup.cfg as ``trove_upgrade_database`` under oslo.middleware's
``oslo.middleware.healthcheck`` namespace, and is on by default
(``trove_upgrade.conf.opts``).

The health check needs no token, so anyone can ask it as often as they
like: one outcome serves every request for ``CACHE_SECONDS``, and while a
query runs, the other requests get the last outcome rather than queue
behind it (or start a query of their own). The query has no retry of its
own: it fails as soon as the engine's connection timeouts say.
"""

import threading
import time

from oslo_log import log as logging
from oslo_middleware.healthcheck import pluginbase

from trove_upgrade.db import common as db_common
from trove_upgrade.db import errors as db_errors

LOG = logging.getLogger(__name__)

# How long one outcome answers: a load balancer asks every few seconds, so
# it still sees an outage (or a recovery) at its next check.
CACHE_SECONDS = 1.0

AVAILABLE = 'OK'
UNAVAILABLE = 'DATABASE UNAVAILABLE'


class DatabaseHealthcheck(pluginbase.HealthcheckBaseExtension):
    """Available while a trivial query on the API's database succeeds."""

    def __init__(self, oslo_conf, conf):
        super().__init__(oslo_conf, conf)
        self._lock = threading.Lock()
        # (outcome, monotonic time it expires), replaced as one.
        self._cached = (None, 0.0)

    def healthcheck(self, server_port):
        result, expires = self._cached
        if result is not None and time.monotonic() < expires:
            return result
        # Only one request queries; the others keep the last outcome, or
        # wait for the first one there is.
        if not self._lock.acquire(blocking=result is None):
            return result
        try:
            result, expires = self._cached
            if result is None or time.monotonic() >= expires:
                result = self._check(result)
                self._cached = (result, time.monotonic() + CACHE_SECONDS)
            return result
        finally:
            self._lock.release()

    @staticmethod
    def _check(last):
        was_available = last is None or last.available
        try:
            db_common.ping()
        except Exception as e:
            # Logged when the outcome changes, not at every check; with a
            # traceback only for an error that is no known outage.
            if was_available:
                LOG.warning(
                    'The health check answers unavailable: the database '
                    'failed a query: %s', db_errors.first_line(e),
                    exc_info=not isinstance(e, db_errors.UNAVAILABLE_ERRORS))
            # The reason and details are public (the details with
            # [healthcheck] detailed): the error's text stays in the log,
            # since it may name the server, its database or its user.
            return pluginbase.HealthcheckResult(
                available=False, reason=UNAVAILABLE,
                details=type(e).__name__)
        if not was_available:
            LOG.info('The health check answers available: the database '
                     'answers again')
        return pluginbase.HealthcheckResult(available=True,
                                            reason=AVAILABLE)
