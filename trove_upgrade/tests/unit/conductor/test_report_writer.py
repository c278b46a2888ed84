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

import threading
from unittest import mock

from oslo_db import exception as db_exc
from oslo_utils import uuidutils

from trove_upgrade.common import exception
from trove_upgrade.common import states
from trove_upgrade.conductor import report_writer
from trove_upgrade.db import transitions as db_transitions
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.services import upgrade_memory
from trove_upgrade.tests.fixtures import report_batches
from trove_upgrade.tests.unit.db import base as db_base

HANG_GUARD = report_batches.HANG_GUARD


class TestReportWriter(db_base.DbTestCase):
    """The writer on a real SQLite database, its threads real too."""

    def setUp(self):
        super().setUp()
        self.writer = report_writer.ReportWriter(max_batch=3)

    def _claimed(self):
        upgrade = self._create(instance_id=uuidutils.generate_uuid())
        _changed, upgrade = db_transitions.transition_upgrade(
            self.context, upgrade['id'], states.DOWNLOADING, 'agent')
        return upgrade

    def _chain(self, upgrade, *to_states, known=None, allowed_from=None):
        return db_transitions.Chain(
            self.context, upgrade['id'],
            [db_transitions.Move(state, None, {}) for state in to_states],
            'agent', allowed_from, upgrade['instance_id'], known)

    def _submit(self, chains):
        """Queue ``chains`` from a thread each; return their results.

        They are written once all are queued, so the batches are known:
        ``max_batch`` chains each, in the order queued.
        """
        results, hung = report_batches.write_together(
            self.writer, [lambda c=chain: self.writer.transition(c)
                          for chain in chains])
        self.assertEqual([], hung)
        return results

    def _status(self, upgrade):
        return db_upgrades.get_upgrade(self.context, upgrade['id'])['status']

    def _events(self, upgrade):
        return [(e['from_state'], e['to_state'])
                for e in db_upgrades.get_upgrade(
                    self.context, upgrade['id'], with_events=True)['events']]

    def test_concurrent_chains_share_a_transaction(self):
        upgrades = [self._claimed() for _ in range(4)]
        chains = [self._chain(u, states.VERIFYING, states.INSTALLING)
                  for u in upgrades]
        with mock.patch.object(
                db_transitions, 'transition_chains_once',
                wraps=db_transitions.transition_chains_once) as batch, \
                mock.patch.object(
                    db_transitions, 'transition_chain_once',
                    wraps=db_transitions.transition_chain_once) as alone:
            results = self._submit(chains)
        # Three in one transaction, the fourth in one of its own, both on
        # the writer's kept connection.
        self.assertEqual([3, 1],
                         [len(c.args[1]) for c in batch.call_args_list])
        self.assertEqual(0, alone.call_count)
        for call in batch.call_args_list:
            self.assertIs(self.writer._kept, call.kwargs['kept'])
        for upgrade, (outcomes, moved) in zip(upgrades, results):
            self.assertEqual([True, True], [o[0] for o in outcomes])
            self.assertEqual(states.INSTALLING, moved['status'])
            self.assertEqual(moved, db_upgrades.get_upgrade(
                self.context, upgrade['id']))
            self.assertEqual([(states.DOWNLOADING, states.VERIFYING),
                              (states.VERIFYING, states.INSTALLING)],
                             self._events(upgrade)[-2:])

    def test_a_lost_race_is_answered_none_and_the_others_recorded(self):
        first, second = self._claimed(), self._claimed()
        stale = dict(second, status=states.SENT)
        results = self._submit([
            self._chain(first, states.VERIFYING),
            self._chain(second, states.VERIFYING, known=stale)])
        self.assertEqual(states.VERIFYING, results[0][1]['status'])
        self.assertIsNone(results[1])
        self.assertEqual(states.DOWNLOADING, self._status(second))

    def test_an_unknown_upgrade_is_raised_to_its_sender_only(self):
        upgrade = self._claimed()
        results = self._submit([
            self._chain({'id': uuidutils.generate_uuid(),
                         'instance_id': upgrade['instance_id']},
                        states.VERIFYING),
            self._chain(upgrade, states.VERIFYING)])
        self.assertIsInstance(results[0], exception.UpgradeNotFoundError)
        self.assertEqual(states.VERIFYING, results[1][1]['status'])

    def test_a_failed_batch_is_written_chain_by_chain(self):
        upgrades = [self._claimed() for _ in range(3)]
        chains = [self._chain(u, states.VERIFYING) for u in upgrades]
        real = db_transitions.transition_chain_once

        def alone(chain):
            if chain is chains[1]:
                raise db_exc.DBError('this chain cannot be written')
            return real(chain)

        with mock.patch.object(db_transitions, 'transition_chains_once',
                               side_effect=db_exc.DBError('batch')), \
                mock.patch.object(db_transitions, 'transition_chain_once',
                                  side_effect=alone):
            results = self._submit(chains)
        self.assertIsInstance(results[1], db_exc.DBError)
        for index in (0, 2):
            self.assertEqual(states.VERIFYING, results[index][1]['status'])
            self.assertEqual(states.VERIFYING, self._status(upgrades[index]))
        self.assertEqual(states.DOWNLOADING, self._status(upgrades[1]))

    def test_a_writer_failing_answers_its_batch_and_carries_on(self):
        upgrades = [self._claimed() for _ in range(4)]
        chains = [self._chain(u, states.VERIFYING) for u in upgrades]
        real = db_transitions.transition_chains_once
        answers = [[]]

        def batch(*args, **kwargs):
            return answers.pop() if answers else real(*args, **kwargs)

        # A batch answered with fewer results than chains: the writer's
        # own fault, not the database's.
        with mock.patch.object(db_transitions, 'transition_chains_once',
                               side_effect=batch):
            results = self._submit(chains)
        for index in range(3):
            self.assertIsInstance(results[index], IndexError)
        self.assertEqual(states.VERIFYING, results[3][1]['status'])
        self.assertEqual(states.VERIFYING, self._status(upgrades[3]))

    def test_a_batch_interrupted_answers_every_chain_in_it(self):
        # Even by an exception that is no Exception: no thread is left
        # waiting for a chain nobody will write.
        class Interrupted(BaseException):
            pass
        upgrades = [self._claimed() for _ in range(2)]
        with mock.patch.object(db_transitions, 'transition_chains_once',
                               side_effect=Interrupted()):
            results = self._submit(
                [self._chain(u, states.VERIFYING) for u in upgrades])
        for result in results:
            self.assertIsInstance(result, Interrupted)
        self.assertFalse(self.writer._writing)
        self.assertEqual([], self.writer._queued)
        self.assertEqual([states.DOWNLOADING] * 2,
                         [self._status(u) for u in upgrades])

    def test_a_chain_whose_kept_connection_broke_is_written_alone(self):
        upgrade = self._claimed()
        real = db_transitions.transition_chains_once
        broken = iter([db_exc.DBConnectionError('server closed the '
                                                'connection')])

        def batch(*args, **kwargs):
            error = next(broken, None)
            if error is not None:
                raise error
            return real(*args, **kwargs)

        with mock.patch.object(db_transitions, 'transition_chains_once',
                               side_effect=batch), \
                mock.patch.object(
                    db_transitions, 'transition_chain_once',
                    wraps=db_transitions.transition_chain_once) as alone, \
                mock.patch.object(report_writer.LOG, 'warning') as warning:
            [result] = self._submit([self._chain(upgrade, states.VERIFYING)])
        self.assertEqual(states.VERIFYING, result[1]['status'])
        self.assertEqual(states.VERIFYING, self._status(upgrade))
        self.assertEqual(1, alone.call_count)
        # The endpoint logs what the message's failure costs, if any.
        warning.assert_not_called()

    def test_a_refused_claim_in_a_batch_refuses_only_itself(self):
        claimable = self._create(instance_id=uuidutils.generate_uuid())
        cancelled = self._create(instance_id=uuidutils.generate_uuid())
        db_transitions.transition_upgrade(self.context, cancelled['id'],
                                          states.CANCELLED, 'api')
        reported = self._claimed()
        results = self._submit([
            self._chain(claimable, states.DOWNLOADING,
                        allowed_from=states.CANCELLABLE_STATES),
            self._chain(cancelled, states.DOWNLOADING,
                        allowed_from=states.CANCELLABLE_STATES),
            self._chain(reported, states.VERIFYING)])
        self.assertEqual(states.DOWNLOADING, results[0][1]['status'])
        [refusal] = results[1][0]
        self.assertIsInstance(refusal, exception.InvalidStateTransitionError)
        self.assertEqual(states.CANCELLED, self._status(cancelled))
        self.assertEqual(states.DOWNLOADING, self._status(claimable))
        self.assertEqual(states.VERIFYING, self._status(reported))

    def test_before_start_and_after_stop_each_chain_is_written_alone(self):
        upgrade = self._claimed()
        outcomes, moved = self.writer.transition(
            self._chain(upgrade, states.VERIFYING))
        self.assertEqual(states.VERIFYING, moved['status'])
        self.writer.start()
        self.writer.stop()
        outcomes, moved = self.writer.transition(
            self._chain(moved, states.INSTALLING))
        self.assertEqual([True], [o[0] for o in outcomes])
        self.assertEqual(states.INSTALLING, self._status(upgrade))

    def test_stop_writes_what_is_queued_first(self):
        upgrades = [self._claimed() for _ in range(2)]
        results, hung = report_batches.write_together(
            self.writer, [lambda u=u: self.writer.transition(
                self._chain(u, states.VERIFYING)) for u in upgrades],
            stop_first=True)
        self.assertEqual([], hung)
        self.assertEqual([states.VERIFYING] * 2,
                         [moved['status'] for _outcomes, moved in results])
        self.assertEqual([states.VERIFYING] * 2,
                         [self._status(u) for u in upgrades])
        # After the stop, the last writer gave its connection back.
        self.assertIsNone(self.writer._kept._connection)

    def test_a_lone_chain_is_written_by_its_own_thread(self):
        # No hand-over to another thread, and the kept connection used.
        upgrade = self._claimed()
        self.writer.start()
        with mock.patch.object(
                db_transitions, 'transition_chains_once',
                wraps=db_transitions.transition_chains_once) as batch:
            outcomes, moved = self.writer.transition(
                self._chain(upgrade, states.VERIFYING))
        self.assertEqual(states.VERIFYING, moved['status'])
        self.assertEqual(1, batch.call_count)
        self.assertIs(self.writer._kept, batch.call_args.kwargs['kept'])
        self.assertFalse(self.writer._writing)
        self.assertEqual([], self.writer._queued)

    def test_chains_from_many_threads_are_each_written_once(self):
        # No thread waits for ever, whoever writes: each chain's thread
        # gets its own answer, every upgrade moved exactly once.
        upgrades = [self._claimed() for _ in range(24)]
        self.writer.start()
        results = [None] * len(upgrades)
        start = threading.Barrier(len(upgrades))

        def report(index):
            start.wait(HANG_GUARD)
            results[index] = self.writer.transition(
                self._chain(upgrades[index], states.VERIFYING))

        threads = [threading.Thread(target=report, args=(i,), daemon=True)
                   for i in range(len(upgrades))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(HANG_GUARD)
        self.assertFalse(any(thread.is_alive() for thread in threads))
        for upgrade, (outcomes, moved) in zip(upgrades, results):
            self.assertEqual([True], [o[0] for o in outcomes])
            self.assertEqual(upgrade['id'], moved['id'])
            self.assertEqual(states.VERIFYING, self._status(upgrade))
            self.assertEqual(1, self._events(upgrade).count(
                (states.DOWNLOADING, states.VERIFYING)))
        self.assertFalse(self.writer._writing)


class TestChainsThroughTheWriter(db_base.DbTestCase):
    """``transition_upgrade_chain`` with a writer keeps its answers."""

    def test_a_lost_race_in_the_batch_is_retried_alone(self):
        upgrade = self._create()
        db_transitions.transition_upgrade(self.context, upgrade['id'],
                                          states.DOWNLOADING, 'agent')
        memory = upgrade_memory.UpgradeMemory()
        memory.remember(db_upgrades.get_upgrade(self.context, upgrade['id']))
        # Another conductor records VERIFYING: what is remembered is old.
        db_transitions.transition_upgrade(self.context, upgrade['id'],
                                          states.VERIFYING, 'agent')
        writer = mock.Mock(wraps=report_writer.ReportWriter())
        outcomes = db_transitions.transition_upgrade_chain(
            self.context, upgrade['id'],
            [(states.VERIFYING, None, None), (states.INSTALLING, None, None)],
            'agent', instance_id=db_base.INSTANCE, memory=memory,
            writer=writer)
        self.assertEqual([False, True], [o[0] for o in outcomes])
        # The writer's try lost; the retry read the row on its own.
        self.assertEqual(1, writer.transition.call_count)
        self.assertEqual(states.INSTALLING,
                         memory.get(upgrade['id'])['status'])
