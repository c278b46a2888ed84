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

"""The rollout reconciler: one stateless pass over the active rollouts.

The same process sends, on every pass, the upgrades the control plane
held DEFERRED once nothing holds them (``held_upgrades.send_held_upgrades``),
and sends again those their agents have not claimed
(``resends.send_unclaimed_upgrades``).

Each pass reads everything it needs from the database and remembers
nothing between passes, so a conductor that was killed, or a second one
running at the same time, decides the same way. A conductor acts on a
rollout only while it holds the rollout's lease (``[conductor]
rollout_lease_time``); every dispatch is recorded, in one transaction with
its upgrade, under a unique (rollout, instance, attempt) and only while
the lease is still this conductor's and the rollout still RUNNING. The
upgrade is cast after that commit, and counts as sent from it: a conductor
killed in between leaves a PENDING upgrade its agent never got, which a
later pass casts again ``[conductor] resend_interval`` seconds on
(``resends.send_unclaimed_upgrades``).
"""

import datetime
import gc
import multiprocessing
import os
import signal
import time

from oslo_log import log as logging
from oslo_utils import timeutils

from trove_upgrade.common import context as tu_context
from trove_upgrade.common import rollout_states as rs
from trove_upgrade.common import rpc
from trove_upgrade.conductor import db_outage
from trove_upgrade.conductor import desired_reconciler
from trove_upgrade.conductor import parent_death
from trove_upgrade import conf
from trove_upgrade.db import common as db_common
from trove_upgrade.db import rollouts as db_rollouts
from trove_upgrade.services import agent_rpcapi
from trove_upgrade.services import held_upgrades
from trove_upgrade.services import notifications
from trove_upgrade.services import resends
from trove_upgrade.services import rollout_plan
from trove_upgrade.services import rollouts
from trove_upgrade.services import topology as trove_topology
from trove_upgrade.services import upgrades

CONF = conf.CONF
LOG = logging.getLogger(__name__)


class Reconciler:
    """Brings each active rollout one step closer to its desired state."""

    def __init__(self, host):
        # The process id tells apart two conductors on one host, and a
        # restarted conductor from the one it replaces.
        self.owner = '%s:%d' % (host, os.getpid())
        self.agent_api = agent_rpcapi.AgentAPI()

    def run(self, context):
        """One pass over the active rollouts, then the desired versions.

        Both lists are read in one transaction: a pass that finds nothing
        to do costs one less. Each rollout and desired version is leased
        and read again before anything is done with it. Trove's topology
        is read once per pass that has something to do, in one query, so
        a failover is seen by the next pass's dispatches.
        """
        with db_common.reading(context):
            active = db_rollouts.list_rollouts_in(context, rs.ACTIVE_STATES)
            desired = desired_reconciler.list_active(context)
        if not active and not desired:
            return
        topology = trove_topology.read()
        for rollout in active:
            # Each alone, in one line when the database went away since
            # the list was read.
            db_outage.attempt('Reconciling rollout %s' % rollout['id'],
                              self.reconcile, context, rollout, active,
                              topology)
        desired_reconciler.run(context, self.owner, self.agent_api, desired,
                               topology)

    def reconcile(self, context, rollout, active=None, topology=None):
        """One step of ``rollout``; ``active`` as ``rollouts.targets``.

        ``topology`` is Trove's (``topology.read``), read for this pass.
        """
        until = timeutils.utcnow() + datetime.timedelta(
            seconds=CONF.conductor.rollout_lease_time)
        rollout = db_rollouts.lease_rollout(context, rollout['id'],
                                            self.owner, until)
        if rollout is None:
            return
        self._time_out(context, rollout)
        if rollout['status'] == rs.PENDING:
            rollout = self._start(context, rollout)
        if rollout is None or rollout['status'] != rs.RUNNING:
            return
        started = time.monotonic()
        plan = (rollouts.quick_plan(context, rollout, active, topology)
                or rollouts.plan_for(context, rollout, active, topology))
        if (plan.action != rollout_plan.WAIT
                and rollout['status_detail'] == rollout_plan.NOTHING_SELECTED):
            db_rollouts.update_rollout(context, rollout['id'], {rs.RUNNING},
                                       {'status_detail': None})
        if plan.action == rollout_plan.PAUSE:
            if db_rollouts.update_rollout(
                    context, rollout['id'], {rs.RUNNING},
                    {'status': rs.PAUSED, 'status_detail': plan.reason}):
                LOG.warning('Rollout %(id)s paused: %(reason)s',
                            {'id': rollout['id'], 'reason': plan.reason})
        elif plan.action == rollout_plan.COMPLETE:
            if db_rollouts.update_rollout(
                    context, rollout['id'], {rs.RUNNING},
                    {'status': rs.COMPLETED, 'status_detail': plan.reason},
                    finished=True):
                LOG.info('Rollout %(id)s completed: %(reason)s',
                         {'id': rollout['id'], 'reason': plan.reason})
            db_rollouts.release_rollout_lease(context, rollout['id'],
                                              self.owner)
        elif plan.action == rollout_plan.WAIT:
            if rollout['status_detail'] != plan.reason:
                db_rollouts.update_rollout(
                    context, rollout['id'], {rs.RUNNING},
                    {'status_detail': plan.reason})
        elif plan.dispatch:
            self.dispatch(context, rollout, plan.dispatch,
                          planned=time.monotonic() - started)

    def _time_out(self, context, rollout):
        created_before = timeutils.utcnow() - datetime.timedelta(
            seconds=rollout['agent_deadline'])
        for upgrade in db_rollouts.timeout_rollout_upgrades(
                context, rollout['id'], created_before):
            LOG.warning('Upgrade %(id)s of rollout %(rollout)s timed out at '
                        'instance %(instance)s.',
                        {'id': upgrade['id'], 'rollout': rollout['id'],
                         'instance': upgrade['instance_id']})
            notifications.notify_final_state(context, upgrade)

    def _start(self, context, rollout):
        start_at = rollout['start_at']
        if start_at is not None and start_at > timeutils.utcnow():
            return None
        return db_rollouts.update_rollout(context, rollout['id'], {rs.PENDING},
                                          {'status': rs.RUNNING})

    def dispatch(self, context, rollout, targets, planned=0.0):
        """Record, cast and mark SENT the upgrades of ``targets``.

        ``planned`` is how long deciding on them took, for the log line
        that says how fast the pass dispatched.
        """
        started = time.monotonic(), time.process_time()
        created = db_rollouts.create_rollout_upgrades(
            context, rollout, targets, self.owner,
            resend_at=resends.resend_at(1))
        for upgrade in created:
            notifications.notify_upgrade(context, notifications.CREATE,
                                         upgrade)
        recorded = time.monotonic(), time.process_time()
        failed = self.agent_api.upgrade_many(
            context, created, threads=CONF.conductor.rollout_send_threads)
        cast = time.monotonic(), time.process_time()
        sent = upgrades.record_casts(context, created, failed, 'conductor')
        done = time.monotonic(), time.process_time()
        # The process's CPU too: the reconciler has its own process, and
        # tools/bench/rollout_scale.py splits its CPU per dispatch so.
        LOG.info('Rollout %(id)s dispatched %(count)d upgrade(s) in '
                 '%(seconds).3f s: planned in %(planned).3f s, recorded in '
                 '%(recorded).3f s, cast in %(cast).3f s, marked SENT in '
                 '%(marked).3f s; process CPU %(recorded_cpu).3f s '
                 'recording, %(cast_cpu).3f s casting, %(marked_cpu).3f s '
                 'marking.',
                 {'id': rollout['id'], 'count': len(sent),
                  'seconds': planned + done[0] - started[0],
                  'planned': planned,
                  'recorded': recorded[0] - started[0],
                  'cast': cast[0] - recorded[0],
                  'marked': done[0] - cast[0],
                  'recorded_cpu': recorded[1] - started[1],
                  'cast_cpu': cast[1] - recorded[1],
                  'marked_cpu': done[1] - cast[1]})
        return sent


def _run_forever(host, parent_pid):
    """The reconciler process: a pass every ``rollout_interval`` seconds.

    SIGTERM (sent by the conductor service when it stops, or by the kernel
    when the conductor's worker dies without stopping it) ends it after
    the pass in hand. It is blocked from the fork on (``start_process``)
    and taken by ``sigtimedwait`` between passes rather than by a handler:
    a handler that set an Event ran, once, while the loop's wait on that
    same Event held its lock, and waited for it for ever, leaving the
    reconciler orphaned.
    """
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent_death.die_with_parent(parent_pid)
    parent_death.set_title('trove-upgrade-conductor: rollout reconciler')
    reconciler = Reconciler(host)
    context = tu_context.get_admin_context()
    # What the process holds by now (modules, configuration, the RPC
    # client) lives as long as it does: out of the collector's sight, a
    # full collection no longer walks it, so none stalls a pass for
    # the size of the whole process.
    gc.freeze()
    LOG.info('Rollout reconciler %s started.', reconciler.owner)
    while signal.sigtimedwait({signal.SIGTERM},
                              CONF.conductor.rollout_interval) is None:
        db_outage.attempt('A reconcile pass', reconciler.run, context)
        db_outage.attempt('Sending the held upgrades',
                          held_upgrades.send_held_upgrades, context,
                          reconciler.agent_api)
        db_outage.attempt('Sending the unclaimed upgrades again',
                          resends.send_unclaimed_upgrades, context,
                          reconciler.agent_api)
    rpc.cleanup()
    LOG.info('Rollout reconciler %s stopped.', reconciler.owner)


def start_process(host):
    """Fork the reconciler process; call before opening any connection."""
    process = multiprocessing.get_context('fork').Process(
        target=_run_forever, args=(host, os.getpid()),
        name='rollout-reconciler',
        daemon=True)
    # Born with SIGTERM blocked: one sent before _run_forever runs waits
    # for its first sigtimedwait instead of killing it without its stop.
    unblocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        process.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, unblocked)
    return process


def stop_process(process, timeout=30):
    """SIGTERM the reconciler process; SIGKILL it if it does not end."""
    process.terminate()
    process.join(timeout)
    if process.is_alive():
        process.kill()
        process.join()
