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
like: one outcome serves every request for ``CACHE_SECONDS``, and only one
request queries at a time. While it does, the others answer the last
outcome rather than queue behind it (the very first outcome they wait
for), for ``QUERY_SECONDS`` at most: a database that takes longer to
answer ``SELECT 1`` (one that accepts connections and then says nothing,
where the driver has no connect timeout) makes the node unavailable, and
still costs one query only. The query has no retry of its own: it ends as
soon as the engine's connection and pool timeouts say.
"""

import threading
import time

from oslo_log import log as logging
from oslo_middleware.healthcheck import pluginbase

from trove_upgrade.db import common as db_common
from trove_upgrade.db import exception as db_errors

LOG = logging.getLogger(__name__)

# How long one outcome answers: a load balancer asks every few seconds, so
# it still sees an outage (or a recovery) at its next check.
CACHE_SECONDS = 1.0
# How long a query may run before the other requests answer unavailable:
# SELECT 1 takes milliseconds, and a load balancer gives up on a check
# after a few seconds.
QUERY_SECONDS = 5.0

AVAILABLE = 'OK'
UNAVAILABLE = 'DATABASE UNAVAILABLE'


class DatabaseHealthcheck(pluginbase.HealthcheckBaseExtension):
    """Available while a trivial query on the API's database succeeds."""

    def __init__(self, oslo_conf, conf):
        super().__init__(oslo_conf, conf)
        self._changed = threading.Condition()
        # The last outcome and the monotonic time it expires.
        self._cached = (None, 0.0)
        # When the query running began, None while none does.
        self._querying_since = None
        # What the log last said, so that it speaks when that changes.
        self._logged_available = True

    def healthcheck(self, server_port):
        with self._changed:
            last, expires = self._cached
            now = time.monotonic()
            if last is not None and now < expires:
                return last
            since = self._querying_since
            if since is not None:
                return self._while_querying(last, since, now)
            self._querying_since = now
        result = None
        try:
            result = self._check()
        finally:
            with self._changed:
                if result is not None:
                    self._cached = (
                        result, time.monotonic() + CACHE_SECONDS)
                self._querying_since = None
                self._changed.notify_all()
        return result

    def _while_querying(self, last, since, now):
        """The answer while another request queries, the lock held."""
        if last is None:
            if self._changed.wait_for(lambda: self._cached[0] is not None,
                                      timeout=since + QUERY_SECONDS - now):
                return self._cached[0]
            now = time.monotonic()
        elif now - since < QUERY_SECONDS:
            return last
        self._log_change(False, 'the database has not answered a query for '
                                '%d seconds' % (now - since))
        return pluginbase.HealthcheckResult(
            available=False, reason=UNAVAILABLE,
            details='no answer for %d seconds' % (now - since))

    def _check(self):
        try:
            db_common.ping()
        except Exception as e:
            # A traceback only for an error that is no known outage.
            self._log_change(
                False, 'the database failed a query: %s'
                % db_errors.first_line(e),
                exc_info=not isinstance(e, db_errors.UNAVAILABLE_ERRORS))
            # The reason and details are public (the details with
            # [healthcheck] detailed): the error's text stays in the log,
            # since it may name the server, its database or its user.
            return pluginbase.HealthcheckResult(
                available=False, reason=UNAVAILABLE,
                details=type(e).__name__)
        self._log_change(True, 'the database answers')
        return pluginbase.HealthcheckResult(available=True,
                                            reason=AVAILABLE)

    def _log_change(self, available, why, exc_info=False):
        """Log when the answer changes, not at every check."""
        if available == self._logged_available:
            return
        self._logged_available = available
        if available:
            LOG.info('The health check answers available: %s', why)
        else:
            LOG.warning('The health check answers unavailable: %s', why,
                        exc_info=exc_info)
