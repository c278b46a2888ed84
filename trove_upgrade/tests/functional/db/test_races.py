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

"""Concurrent writers on real databases never record one change twice.

Threads with their own contexts (so their own connections) write at the same
time to MariaDB, PostgreSQL and a SQLite file. Where a test must be sure
that both writers decided from the same state before either writes, a
barrier holds each thread at its first ``states.is_legal`` check, which
comes after the read and before the compare-and-swap. On SQLite a
transition takes the database's single write lock before it reads, so
there the threads run at once without the barrier.
"""

import datetime
import threading
from unittest import mock

from oslo_utils import timeutils
import sqlalchemy as sa

from trove_upgrade.common import context
from trove_upgrade.common import exception
from trove_upgrade.common import states
from trove_upgrade.conductor import report_writer
from trove_upgrade.db import agents as db_agents
from trove_upgrade.db import common as db_common
from trove_upgrade.db import migration
from trove_upgrade.db import models
from trove_upgrade.db import resends as db_resends
from trove_upgrade.db import transitions as db_transitions
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.services import upgrade_memory
from trove_upgrade.tests import base
from trove_upgrade.tests.fixtures import database
from trove_upgrade.tests.fixtures import report_batches

# Seconds a test waits for a call that must not block; only a broken run
# waits it out.
HANG_GUARD = 30
_STAGES = (states.SENT, states.DOWNLOADING, states.VERIFYING,
           states.INSTALLING, states.RESTARTING, states.SUCCESS)


def _run_together(*calls):
    """Run each call in its own thread; return what each returned or raised.

    A failed call leaves its exception in place of a result.
    """
    outcomes = [None] * len(calls)

    def run(index, call):
        try:
            outcomes[index] = call()
        except Exception as exc:
            outcomes[index] = exc

    threads = [threading.Thread(target=run, args=(i, call))
               for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


class _RaceTests:

    # Whether two transitions can both have read the upgrade before
    # either writes: not on SQLite, where a transition takes the single
    # write lock first.
    DECIDE_TOGETHER = True

    def _hold_first_checks(self, parties):
        """Make the first ``parties`` legality checks wait for each other.

        Where writers cannot decide together, they still run at once,
        unheld.
        """
        if not self.DECIDE_TOGETHER:
            return
        barrier = threading.Barrier(parties)
        is_legal = states.is_legal
        lock = threading.Lock()
        waiting = [parties]

        def held(from_state, to_state):
            with lock:
                wait = waiting[0] > 0
                waiting[0] -= 1
            if wait:
                barrier.wait(timeout=30)
            return is_legal(from_state, to_state)

        patcher = mock.patch.object(states, 'is_legal', held)
        patcher.start()
        self.addCleanup(patcher.stop)

    def _context(self):
        return context.RequestContext(project_id='project', user_id='user')

    def _upgrade(self, instance_id='4b1e8d5c-0000-4000-8000-000000000001'):
        return db_upgrades.create_upgrade(self._context(), {
            'instance_id': instance_id, 'instance_version': '2.0.0',
            'strategy': 'swift', 'location': 'container/agent.tar'})

    def _events(self, upgrade_id):
        return db_upgrades.get_upgrade(self._context(), upgrade_id,
                                       with_events=True)['events']

    def test_same_report_twice_is_recorded_once(self):
        upgrade = self._upgrade()
        self._hold_first_checks(2)

        def report():
            return db_transitions.transition_upgrade(
                self._context(), upgrade['id'], states.SENT, 'conductor')

        outcomes = _run_together(report, report)

        self.assertEqual([False, True],
                         sorted(changed for changed, _ in outcomes))
        self.assertEqual([states.SENT, states.SENT],
                         [u['status'] for _, u in outcomes])
        self.assertEqual([(None, states.PENDING),
                          (states.PENDING, states.SENT)],
                         [(e['from_state'], e['to_state'])
                          for e in self._events(upgrade['id'])])

    def test_cancel_and_start_cannot_both_win(self):
        upgrade = self._upgrade()
        db_transitions.transition_upgrade(self._context(), upgrade['id'],
                                          states.SENT, 'conductor')
        self._hold_first_checks(2)

        def cancel():
            return db_transitions.transition_upgrade(
                self._context(), upgrade['id'], states.CANCELLED, 'api',
                allowed_from=states.CANCELLABLE_STATES)

        def start():
            return db_transitions.transition_upgrade(
                self._context(), upgrade['id'], states.DOWNLOADING, 'agent',
                allowed_from={states.SENT, states.DEFERRED})

        outcomes = _run_together(cancel, start)

        winners = [o for o in outcomes if isinstance(o, tuple)]
        losers = [o for o in outcomes if not isinstance(o, tuple)]
        self.assertEqual(1, len(winners), outcomes)
        self.assertTrue(winners[0][0])
        self.assertIsInstance(losers[0], exception.InvalidStateTransitionError)
        final = db_upgrades.get_upgrade(self._context(), upgrade['id'])
        self.assertEqual(winners[0][1]['status'], final['status'])
        events = self._events(upgrade['id'])
        self.assertEqual([states.PENDING, states.SENT, final['status']],
                         [e['to_state'] for e in events])

    def test_timeout_and_late_success_end_in_success(self):
        upgrade = self._upgrade()
        db_transitions.transition_upgrade(self._context(), upgrade['id'],
                                          states.RESTARTING, 'agent')
        self._hold_first_checks(2)

        def time_out():
            return db_transitions.timeout_upgrades(
                self._context(), timeutils.utcnow() + datetime.timedelta(
                    seconds=1))

        def succeed():
            return db_transitions.transition_upgrade(
                self._context(), upgrade['id'], states.SUCCESS, 'agent')

        timed_out, (succeeded, _) = _run_together(time_out, succeed)

        # Whichever wrote first, the agent's final word stands: TIMED_OUT
        # then SUCCESS, or SUCCESS and a timeout that finds nothing to do.
        self.assertTrue(succeeded)
        self.assertEqual(states.SUCCESS, db_upgrades.get_upgrade(
            self._context(), upgrade['id'])['status'])
        expected = [states.PENDING, states.RESTARTING]
        if timed_out:
            expected.append(states.TIMED_OUT)
        expected.append(states.SUCCESS)
        self.assertEqual(expected, [e['to_state']
                                    for e in self._events(upgrade['id'])])

    def test_many_reporters_keep_one_history(self):
        upgrades = [self._upgrade('4b1e8d5c-0000-4000-8000-00000000000%d' % i)
                    for i in range(3)]

        def reporter():
            changes = []
            for stage in _STAGES:
                for upgrade in upgrades:
                    changed, _ = db_transitions.transition_upgrade(
                        self._context(), upgrade['id'], stage, 'agent')
                    changes.append((upgrade['id'], stage, changed))
            return changes

        outcomes = _run_together(reporter, reporter, reporter, reporter)

        for outcome in outcomes:
            self.assertIsInstance(outcome, list, outcome)
        recorded = [(u, s) for changes in outcomes
                    for u, s, changed in changes if changed]
        self.assertEqual(sorted((u['id'], s) for u in upgrades
                                for s in _STAGES), sorted(recorded))
        for upgrade in upgrades:
            events = self._events(upgrade['id'])
            self.assertEqual((states.PENDING,) + _STAGES,
                             tuple(e['to_state'] for e in events))
            # Each event starts where the one before ended.
            self.assertEqual([e['to_state'] for e in events[:-1]],
                             [e['from_state'] for e in events[1:]])

    def test_conductors_take_each_due_upgrade_once(self):
        now = timeutils.utcnow()
        due = []
        for _ in range(20):
            upgrade = self._upgrade()
            db_transitions.transition_upgrade(
                self._context(), upgrade['id'], states.SENT, 'api',
                values={'resend_at': now, 'send_count': 1})
            due.append(upgrade['id'])
        later = now + datetime.timedelta(seconds=60)

        def take():
            return [u['id'] for u in db_resends.take_due_upgrades(
                self._context(), now, lambda count: later, 100,
                'conductor', lambda upgrade: 'Sent again.')]

        taken = _run_together(*[take] * 4)
        for outcome in taken:
            self.assertIsInstance(outcome, list)
        everything = [upgrade_id for ids in taken for upgrade_id in ids]
        self.assertEqual(sorted(due), sorted(everything))
        for upgrade_id in due:
            self.assertEqual(
                ['Sent again.'],
                [e['detail'] for e in self._events(upgrade_id)
                 if e['from_state'] == e['to_state'] == states.SENT])

    def test_simultaneous_first_registrations_make_one_agent(self):
        instance_id = '4b1e8d5c-0000-4000-8000-0000000000aa'
        barrier = threading.Barrier(2)
        insert = db_agents._insert_agent

        def held_insert(*args, **kwargs):
            barrier.wait(timeout=30)
            return insert(*args, **kwargs)

        def register(version):
            return lambda: db_agents.register_agent(
                self._context(), instance_id,
                {'agent_version': version, 'rpc_api_version': '1.0'})

        with mock.patch.object(db_agents, '_insert_agent', held_insert):
            outcomes = _run_together(register('1.0.0'), register('1.0.1'))

        self.assertEqual([None, None], outcomes)
        agents = db_agents.list_agents(self._context())
        self.assertEqual([instance_id], [a['instance_id'] for a in agents])
        self.assertIn(agents[0]['agent_version'], ('1.0.0', '1.0.1'))


class _RowLockTests:
    """Where the database locks rows, not itself: MySQL and PostgreSQL."""

    def test_mark_sent_skips_a_row_held_by_a_claim(self):
        free = self._upgrade('4b1e8d5c-0000-4000-8000-000000000001')
        held = self._upgrade('4b1e8d5c-0000-4000-8000-000000000002')
        claim = db_common.get_engine().connect()
        self.addCleanup(claim.close)
        transaction = claim.begin()
        # An agent's claim between its UPDATE and its commit.
        claim.execute(sa.update(models.Upgrade)
                      .where(models.Upgrade.id == held['id'])
                      .values(status=states.DOWNLOADING))

        marked = []
        marker = threading.Thread(target=lambda: marked.append(
            db_upgrades.mark_upgrades_sent(self._context(),
                                           [free['id'], held['id']],
                                           'conductor')))
        marker.start()
        marker.join(HANG_GUARD)
        finished = not marker.is_alive()
        transaction.commit()
        marker.join()

        self.assertTrue(finished, 'marking SENT waited for the claim')
        self.assertEqual([[free['id']]], marked)
        self.assertEqual([states.PENDING, states.SENT],
                         [e['to_state'] for e in self._events(free['id'])])
        self.assertEqual(states.DOWNLOADING, db_upgrades.get_upgrade(
            self._context(), held['id'])['status'])


class _GroupCommitTests:
    """The conductor's report writer: several chains in one transaction."""

    def _claimed(self, count):
        upgrades = []
        for index in range(count):
            upgrade = self._upgrade('4b1e8d5c-0000-4000-8000-%012d'
                                    % (index + 1))
            upgrades.append(db_transitions.transition_upgrade(
                self._context(), upgrade['id'], states.DOWNLOADING,
                'agent')[1])
        return upgrades

    def _write_together(self, writer, chains):
        """Report ``chains`` from a thread each, all in the writer's batch.

        They are written once every chain is queued; returns each chain's
        outcomes, or what it raised.
        """
        memory = upgrade_memory.UpgradeMemory()

        def report(upgrade, moves, known):
            if known is not None:
                memory.remember(known)
            return lambda: db_transitions.transition_upgrade_chain(
                self._context(), upgrade['id'], moves, 'agent',
                instance_id=upgrade['instance_id'], memory=memory,
                writer=writer)

        outcomes, hung = report_batches.write_together(
            writer, [report(*chain) for chain in chains])
        self.assertEqual([], hung)
        return outcomes, memory

    def test_chains_of_several_upgrades_commit_together(self):
        upgrades = self._claimed(3)
        moves = [(states.VERIFYING, 'verified', None),
                 (states.INSTALLING, None, {'from_version': '1.0.0'})]
        writer = report_writer.ReportWriter()
        with mock.patch.object(
                db_transitions, 'transition_chains_once',
                wraps=db_transitions.transition_chains_once) as batch:
            outcomes, memory = self._write_together(
                writer, [(u, moves, u) for u in upgrades])
        self.assertEqual([3], [len(c.args[1]) for c in batch.call_args_list])
        for upgrade, chain in zip(upgrades, outcomes):
            self.assertEqual([True, True], [o[0] for o in chain])
            stored = db_upgrades.get_upgrade(self._context(), upgrade['id'])
            self.assertEqual(chain[-1][1], stored)
            self.assertEqual(stored, memory.get(upgrade['id']))
            self.assertEqual('1.0.0', stored['from_version'])
            self.assertEqual(
                [(states.DOWNLOADING, states.VERIFYING, 'verified'),
                 (states.VERIFYING, states.INSTALLING, None)],
                [(e['from_state'], e['to_state'], e['detail'])
                 for e in self._events(upgrade['id'])[-2:]])

    def test_a_lost_race_in_a_batch_fails_no_other_chain(self):
        upgrades = self._claimed(3)
        # Another conductor moved the second on since it was remembered.
        db_transitions.transition_upgrade(self._context(), upgrades[1]['id'],
                                          states.VERIFYING, 'agent')
        moves = [(states.VERIFYING, None, None),
                 (states.INSTALLING, None, None)]
        outcomes, _memory = self._write_together(
            report_writer.ReportWriter(),
            [(u, moves, u) for u in upgrades])
        self.assertEqual([[True, True], [False, True], [True, True]],
                         [[o[0] for o in chain] for chain in outcomes])
        for upgrade in upgrades:
            self.assertEqual(
                [states.PENDING, states.DOWNLOADING, states.VERIFYING,
                 states.INSTALLING],
                [e['to_state'] for e in self._events(upgrade['id'])])


class _Opportunistic(database.OpportunisticDBTestMixin):

    def setUp(self):
        super().setUp()
        migration.upgrade('head', engine=db_common.get_engine())
        self.useFixture(database.ServiceFacade())


class TestRacesMySQL(_RaceTests, _RowLockTests, _GroupCommitTests,
                     _Opportunistic, base.TestCase):
    FIXTURE = database.MySQLOpportunisticFixture


class TestRacesPostgreSQL(_RaceTests, _RowLockTests, _GroupCommitTests,
                          _Opportunistic, base.TestCase):
    FIXTURE = database.PostgresqlOpportunisticFixture


class TestRacesSQLiteFile(_RaceTests, _GroupCommitTests, base.TestCase):
    DECIDE_TOGETHER = False

    def setUp(self):
        super().setUp()
        self.useFixture(database.Database())
