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
report at once (a rollout's fleet does), one thread writes the chains
that arrived while it wrote the last batch in one transaction
(``db.upgrades.transition_chains_once``), which costs each a share of
that overhead instead of all of it. The writer keeps its connection
between batches that follow closely (``db.common.KeptConnection``), so
that its transactions, even of one chain each, skip the checkout and
its ping.

The thread that received a message waits for its chain to be written, as
it waited for its own transaction before: the answer of a call still
means the report is recorded, and the reports of one instance are still
recorded one message at a time. A chain that lost its race in the batch
is tried again on its own, as before; when the batch's transaction fails,
each of its chains is tried on its own, in a transaction of its own
checked out of the pool, so that one chain's failure fails no other and
a kept connection that broke (the database restarted) fails none. The
queue is bounded: when it is full, the receiving threads wait. Before
the writer runs and once it stopped, each chain is written by the
thread that received it.
"""

import queue
import threading

from oslo_log import log as logging

from trove_upgrade import context as tu_context
from trove_upgrade.db import common as db_common
from trove_upgrade.db import errors as db_errors
from trove_upgrade.db import upgrades as db_upgrades

LOG = logging.getLogger(__name__)

# Chains written in one transaction at most.
MAX_BATCH = 32
# Chains waiting for the writer at most; receivers wait beyond it.
MAX_QUEUED = 256

_STOP = object()


class _Waiting:
    """A chain and, once written, what became of it."""

    def __init__(self, chain):
        self.chain = chain
        self.result = None
        self.done = threading.Event()


class ReportWriter:
    """One thread that writes concurrent report chains together."""

    def __init__(self, max_batch=MAX_BATCH, max_queued=MAX_QUEUED):
        self._max_batch = max_batch
        self._queue = queue.Queue(max_queued)
        self._lock = threading.Lock()
        self._running = False
        # The writer thread's own.
        self._context = tu_context.get_admin_context()
        self._kept = db_common.KeptConnection()

    def transition(self, chain):
        """Write ``chain`` (a ``db.upgrades.Chain``) once; its result.

        As ``db.upgrades.transition_chain_once``: ``(outcomes, upgrade)``
        or None for a lost race; raises what that raises.
        """
        waiting = _Waiting(chain)
        with self._lock:
            if self._running:
                self._queue.put(waiting)
            else:
                waiting = None
        if waiting is None:
            return db_upgrades.transition_chain_once(chain)
        waiting.done.wait()
        if isinstance(waiting.result, BaseException):
            raise waiting.result
        return waiting.result

    def start(self):
        """Take chains from now on; ``run`` then writes them."""
        with self._lock:
            self._running = True

    def stop(self):
        """Write what is queued, then make ``run`` return.

        The chains that come after are written by their own threads.
        """
        with self._lock:
            if not self._running:
                return
            self._running = False
            self._queue.put(_STOP)

    def run(self):
        """The writer thread's loop, until ``stop``.

        Whatever goes wrong with a batch, its receivers get an answer and
        the loop goes on: a receiver must never wait for a writer that
        is gone.
        """
        while True:
            batch, stopping = self._take()
            try:
                self._write(batch)
            except Exception as e:
                LOG.exception('Recording a batch of %d report chains '
                              'failed.', len(batch))
                for waiting in batch:
                    if not waiting.done.is_set():
                        waiting.result = e
                        waiting.done.set()
            if stopping:
                self._kept.close()
                return

    def _take(self):
        """The chains queued, at least one unless stopping."""
        first = self._queue.get()
        if first is _STOP:
            return [], True
        batch = [first]
        while len(batch) < self._max_batch:
            try:
                waiting = self._queue.get_nowait()
            except queue.Empty:
                break
            if waiting is _STOP:
                return batch, True
            batch.append(waiting)
        return batch, False

    def _write(self, batch):
        results = None
        if batch:
            try:
                results = db_upgrades.transition_chains_once(
                    self._context, [waiting.chain for waiting in batch],
                    kept=self._kept)
            except Exception as e:
                # One chain alone is tried again quietly: an outage costs
                # its message one line of the log, the endpoint's.
                log = LOG.warning if len(batch) > 1 else LOG.debug
                log('Could not record %(count)d report chains in one '
                    'transaction, recording each alone: %(error)s',
                    {'count': len(batch), 'error': db_errors.first_line(e)})
        for index, waiting in enumerate(batch):
            if results is not None:
                waiting.result = results[index]
            else:
                try:
                    waiting.result = db_upgrades.transition_chain_once(
                        waiting.chain)
                except Exception as e:
                    waiting.result = e
            waiting.done.set()
