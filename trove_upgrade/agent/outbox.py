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
just the broker, has handled it. Reports are sent one at a time, in the
order they were made, each only after the previous one was answered, so the
conductor records every stage in order. It ignores duplicates and stale
reports, so a report resent after a crash between sending and removal is
harmless.
"""

import threading

from oslo_log import log as logging

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

        Stops at the first failure, leaving it and the ones after it for
        the next flush.
        """
        with self._flush_lock:
            sent = 0
            for report in self.pending():
                try:
                    self.conductor_api.report_upgrade_state(
                        self.context, self.instance_id,
                        report['upgrade_id'], report['to_state'],
                        report['detail'], report['from_version'],
                        report['to_version'])
                except Exception as e:
                    LOG.warning('Report %s of upgrade %s not delivered, '
                                'kept for later: %s', report['to_state'],
                                report['upgrade_id'], e)
                    break
                with self.journal.update() as data:
                    data['outbox'] = [r for r in data['outbox']
                                      if r['seq'] != report['seq']]
                sent += 1
            return sent
