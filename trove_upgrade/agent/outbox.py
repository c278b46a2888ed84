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
after the conductor answered the call that carries it: the conductor, not
just the broker, has handled it. Reports are sent in the order they were
made, the reports waiting together in one call (RPC API 1.2; one call
each to an older conductor), each call only after the previous one was
answered, so the conductor records every stage in order. It ignores
duplicates and stale reports, so a report resent after a crash between
sending and removal is harmless.
"""

import threading

from oslo_log import log as logging

from trove_upgrade import rpc_interface

LOG = logging.getLogger(__name__)


class Outbox:
    """Sends the journal's pending reports through ``ConductorAPI``."""

    def __init__(self, journal, conductor_api, context, instance_id):
        self.journal = journal
        self.conductor_api = conductor_api
        self.context = context
        self.instance_id = instance_id
        self._flush_lock = threading.Lock()

    def pending(self):
        return self.journal.read()['outbox']

    def flush(self):
        """Send pending reports in order; return how many were delivered.

        Stops at the first call that fails, leaving its reports and the
        ones after them for the next flush.
        """
        with self._flush_lock:
            sent = 0
            per_call = self.conductor_api.reports_per_call()
            while True:
                batch = self.pending()[:per_call]
                if not batch:
                    return sent
                try:
                    self.conductor_api.report_upgrade_states(
                        self.context, self.instance_id,
                        [{name: report[name]
                          for name in rpc_interface.REPORT_FIELDS}
                         for report in batch])
                except Exception as e:
                    LOG.warning('Reports %s of upgrade %s not delivered, '
                                'kept for later: %s',
                                ', '.join(r['to_state'] for r in batch),
                                batch[0]['upgrade_id'], e)
                    return sent
                done = {report['seq'] for report in batch}
                with self.journal.update() as data:
                    data['outbox'] = [r for r in data['outbox']
                                      if r['seq'] not in done]
                sent += len(batch)
