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

"""Group commit of agents' claims and reports: one transaction for several.

Each claim, and each agent report that is news, costs the conductor a
transaction, and most of that transaction's CPU is not its statements but
the connection checkout, its ping and the commit. When several agents
report at once (a rollout's fleet does), the chains that arrived while
the last batch was written are written together in one transaction
(``db.transitions.transition_chains_once``), which costs each a share of
that overhead instead of all of it. The batches are written on one kept
connection (``db.common.KeptConnection``) while they follow closely, so
that their transactions, even of one chain each, skip the checkout and
its ping.

No thread of its own writes them: the thread that received a chain and
finds nobody writing writes it, and with it whatever chains queued
meanwhile, until its own is written; then it hands the writing over to
the thread of the oldest chain still queued. A lone message is written
by the thread that received it, as with no writer at all, and each
hand-over wakes one thread, where a writer thread of its own would wake
two for every message.

The thread that received a message waits for its chain to be written, as
it waited for its own transaction before: the answer of a call still
means the report is recorded, and the reports of one instance are still
recorded one message at a time. A chain that lost its race in the batch
is tried again on its own, as before; when the batch's transaction fails,
each of its chains is tried on its own, in a transaction of its own
checked out of the pool, so that one chain's failure fails no other and
a kept connection that broke (the database restarted) fails none. The
queue holds at most a chain per receiving thread. Before ``start`` and
after ``stop``, each chain is written alone by the thread that received
it.
"""

import threading

from oslo_log import log as logging

from trove_upgrade.common import context as tu_context
from trove_upgrade.db import common as db_common
from trove_upgrade.db import exception as db_errors
from trove_upgrade.db import transitions as db_transitions

LOG = logging.getLogger(__name__)

# Chains written in one transaction at most.
MAX_BATCH = 32


class _Waiting:
    """A chain and, once written, what became of it.

    ``wake`` is set when it is written, or when its thread is to write.
    """

    def __init__(self, chain):
        self.chain = chain
        self.result = None
        self.written = False
        self.wake = threading.Event()


class ReportWriter:
    """Writes concurrent report chains together, one batch at a time."""

    def __init__(self, max_batch=MAX_BATCH):
        self._max_batch = max_batch
        self._lock = threading.Lock()
        self._running = False
        # Under the lock: the chains not yet taken, oldest first, and
        # whether a thread is writing.
        self._queued = []
        self._writing = False
        # The writing thread's, one at a time.
        self._context = tu_context.get_admin_context()
        self._kept = db_common.KeptConnection()

    def transition(self, chain):
        """Write ``chain`` (a ``db.transitions.Chain``) once; its result.

        As ``db.transitions.transition_chain_once``: ``(outcomes, upgrade)``
        or None for a lost race; raises what that raises.
        """
        waiting = _Waiting(chain)
        with self._lock:
            running = self._running
            if running:
                self._queued.append(waiting)
                writes, self._writing = not self._writing, True
        if not running:
            return db_transitions.transition_chain_once(chain)
        if not writes:
            waiting.wake.wait()
        if not waiting.written:
            self._write_until(waiting)
        if isinstance(waiting.result, BaseException):
            raise waiting.result
        return waiting.result

    def start(self):
        """Write concurrent chains together from now on."""
        with self._lock:
            self._running = True

    def stop(self):
        """Write each chain that comes from now on alone.

        Those queued already are written as before; the kept connection
        goes back to the pool once they are.
        """
        with self._lock:
            self._running = False
            if not self._writing:
                self._kept.close()

    def _write_until(self, own):
        """Write batches until ``own`` is, then hand the writing over.

        Whatever goes wrong with a batch, its threads get an answer: a
        thread must never wait for a writer that is gone.
        """
        try:
            while not own.written:
                with self._lock:
                    batch = self._queued[:self._max_batch]
                    del self._queued[:self._max_batch]
                try:
                    self._write(batch)
                except BaseException as e:
                    if isinstance(e, Exception):
                        LOG.exception('Recording a batch of %d report '
                                      'chains failed.', len(batch))
                    for waiting in batch:
                        if not waiting.written:
                            self._answer(waiting, e)
                    if not isinstance(e, Exception):
                        raise
        finally:
            self._hand_over()

    def _hand_over(self):
        """Wake the thread of the oldest chain queued, to write next."""
        with self._lock:
            if self._queued:
                self._queued[0].wake.set()
                return
            self._writing = False
            if not self._running:
                self._kept.close()

    @staticmethod
    def _answer(waiting, result):
        waiting.result = result
        waiting.written = True
        waiting.wake.set()

    def _write(self, batch):
        results = None
        try:
            results = db_transitions.transition_chains_once(
                self._context, [waiting.chain for waiting in batch],
                kept=self._kept)
        except Exception as e:
            # One chain alone is tried again quietly: an outage costs its
            # message one line of the log, the endpoint's.
            log = LOG.warning if len(batch) > 1 else LOG.debug
            log('Could not record %(count)d report chains in one '
                'transaction, recording each alone: %(error)s',
                {'count': len(batch), 'error': db_errors.first_line(e)})
        for index, waiting in enumerate(batch):
            if results is not None:
                result = results[index]
            else:
                try:
                    result = db_transitions.transition_chain_once(
                        waiting.chain)
                except Exception as e:
                    result = e
            self._answer(waiting, result)
