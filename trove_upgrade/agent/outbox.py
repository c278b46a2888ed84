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

"""Reports to the conductor that survive outages and crashes.

A report is written to the journal's outbox in the same transaction as the
state change it describes, so a crash cannot lose it, and is removed only
after the conductor answered a call that carries it: the conductor, not
just the broker, has handled it. It ignores duplicates and stale reports,
so a report resent after a crash between sending and removal is harmless.

A call costs the conductor about twice what a cast does, so the reports of
progress (the stages before the final state) go by cast, as Trove's guest
agent reports to its conductor, and stay in the outbox marked with the
time of that cast. Every message, cast or call, carries every report not
yet confirmed, in the order they were made: casts taken by several of the
conductor's threads at once may be recorded in any order, and the one
recorded first brings the stages before its own with it, so none is
skipped (a later stage recorded first would make an earlier one stale).
A final report goes by call, and so do reports last cast more than
``[agent] report_confirm_interval`` seconds ago: its answer confirms, and
removes, every report it carried, so a cast lost with a conductor that
died while handling it is made good by the next message or by that call.
A crash after a cast and before it is marked only casts it again.

More reports than one message carries
(``rpc_interface.MAX_REPORTS_PER_CALL``) go by calls, one after the other,
as does everything to a conductor capped below RPC API 1.2, one call per
report, each only after the previous one was answered.
"""

import threading
import time

from oslo_log import log as logging

from trove_upgrade.common import rpc_interface
from trove_upgrade.common import states

LOG = logging.getLogger(__name__)

# The journal's mark on a report sent by cast: when it was last cast.
CAST_AT = 'cast_at'


def _fields(reports):
    return [{name: report[name] for name in rpc_interface.REPORT_FIELDS}
            for report in reports]


class Outbox:
    """Sends the journal's pending reports through ``ConductorAPI``.

    ``confirm_interval``: ``[agent] report_confirm_interval``.
    """

    def __init__(self, journal, conductor_api, context, instance_id,
                 confirm_interval):
        self.journal = journal
        self.conductor_api = conductor_api
        self.context = context
        self.instance_id = instance_id
        self.confirm_interval = confirm_interval
        self._flush_lock = threading.Lock()

    def pending(self):
        """The reports the conductor has not confirmed, oldest first."""
        return self.journal.read()['outbox']

    def flush(self):
        """Send what the conductor has not confirmed; return how many it did.

        The count is of the reports the answers confirmed. Casts the
        pending reports when one of them was never cast and none needs a
        call (see the module's docstring); casts nothing when all were
        cast recently. Stops at the first message that fails, leaving its
        reports and the ones after them for the next flush.
        """
        with self._flush_lock:
            pending = self.pending()
            if not pending:
                return 0
            if self._needs_call(pending):
                return self._call(pending)
            if any(CAST_AT not in report for report in pending):
                self._cast(pending)
            return 0

    def _needs_call(self, pending):
        # One report a call: a conductor capped below 1.2, which takes
        # no cast of reports either.
        if (self.conductor_api.reports_per_call() == 1
                or len(pending) > rpc_interface.MAX_REPORTS_PER_CALL):
            return True
        now = time.time()
        for report in pending:
            if report['to_state'] in states.FINAL_STATES:
                return True
            cast_at = report.get(CAST_AT)
            # A clock set back counts as long enough.
            if cast_at is not None and not (
                    0 <= now - cast_at < self.confirm_interval):
                return True
        return False

    def _call(self, batch):
        confirmed = 0
        per_call = self.conductor_api.reports_per_call()
        while True:
            batch = batch[:per_call]
            try:
                self.conductor_api.report_upgrade_states(
                    self.context, self.instance_id, _fields(batch))
            except Exception as e:
                self._warn(batch, 'not delivered', e)
                return confirmed
            done = {report['seq'] for report in batch}
            with self.journal.update() as data:
                data['outbox'] = [r for r in data['outbox']
                                  if r['seq'] not in done]
                batch = data['outbox']
            confirmed += len(done)
            if not batch:
                return confirmed

    def _cast(self, pending):
        try:
            self.conductor_api.cast_upgrade_states(
                self.context, self.instance_id, _fields(pending))
        except Exception as e:
            self._warn(pending, 'not cast', e)
            return
        cast = {report['seq'] for report in pending}
        now = time.time()
        with self.journal.update() as data:
            for report in data['outbox']:
                if report['seq'] in cast:
                    report[CAST_AT] = now

    @staticmethod
    def _warn(batch, what, error):
        LOG.warning('Reports %s of upgrade %s %s, kept for later: %s',
                    ', '.join(r['to_state'] for r in batch),
                    batch[0]['upgrade_id'], what, error)
