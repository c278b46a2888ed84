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

"""State changes of upgrades on SQLite: the compare-and-swap and its events."""

import datetime

from oslo_utils import uuidutils

from trove_upgrade.common import exception
from trove_upgrade.common import states
from trove_upgrade.db import common as db_common
from trove_upgrade.db import instance_keys as db_keys
from trove_upgrade.db import transitions as db_transitions
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.services import upgrade_memory
from trove_upgrade.tests.unit.db import base as db_base

T0 = db_base.T0
INSTANCE = db_base.INSTANCE
OTHER_INSTANCE = db_base.OTHER_INSTANCE


class TestTransitionUpgrade(db_base.DbTestCase):

    def _transition(self, upgrade, to_state, source='agent', **kw):
        return db_transitions.transition_upgrade(self.context, upgrade['id'],
                                                 to_state, source, **kw)

    def _events(self, upgrade):
        return [(e['from_state'], e['to_state'])
                for e in db_upgrades.get_upgrade(
                    self.context, upgrade['id'], with_events=True)['events']]

    def _drive(self, upgrade, state):
        """Bring a new upgrade to ``state`` by legal moves."""
        path = {
            states.PENDING: [],
            states.SUCCESS: [states.SENT, states.SUCCESS],
            states.ROLLED_BACK: [states.INSTALLING, states.ROLLED_BACK],
        }.get(state, [state])
        for step in path:
            self._transition(upgrade, step)

    def test_records_the_change_and_its_event(self):
        upgrade = self._create()
        self._advance(7)
        changed, moved = self._transition(
            upgrade, states.SENT, source='conductor', detail='cast to agent',
            values={'from_version': '1.9.0'})

        self.assertTrue(changed)
        self.assertEqual(states.SENT, moved['status'])
        self.assertEqual('cast to agent', moved['status_detail'])
        self.assertEqual('1.9.0', moved['from_version'])
        self.assertEqual(T0 + datetime.timedelta(seconds=7),
                         moved['updated_at'])
        self.assertEqual(T0, moved['created_at'])
        self.assertIsNone(moved['finished_at'])
        self.assertEqual(moved, db_upgrades.get_upgrade(self.context,
                                                        upgrade['id']))
        event = db_upgrades.get_upgrade(self.context, upgrade['id'],
                                        with_events=True)['events'][-1]
        self.assertEqual({'created_at': T0 + datetime.timedelta(seconds=7),
                          'source': 'conductor',
                          'from_state': states.PENDING,
                          'to_state': states.SENT,
                          'detail': 'cast to agent',
                          'request_id': self.context.request_id},
                         {k: v for k, v in event.items() if k != 'id'})

    def test_final_state_sets_finished_at(self):
        upgrade = self._create()
        self._transition(upgrade, states.SENT)
        self._advance(30)
        changed, moved = self._transition(upgrade, states.SUCCESS)
        self.assertTrue(changed)
        self.assertEqual(T0 + datetime.timedelta(seconds=30),
                         moved['finished_at'])

    def test_skipping_stages_forward_is_legal(self):
        upgrade = self._create()
        self._transition(upgrade, states.SENT)
        changed, moved = self._transition(upgrade, states.INSTALLING)
        self.assertTrue(changed)
        self.assertEqual([(None, states.PENDING),
                          (states.PENDING, states.SENT),
                          (states.SENT, states.INSTALLING)],
                         self._events(upgrade))

    def test_duplicate_changes_nothing(self):
        upgrade = self._create()
        self._transition(upgrade, states.SENT, detail='first')
        self._advance()
        changed, current = self._transition(upgrade, states.SENT,
                                            detail='again')
        self.assertFalse(changed)
        self.assertEqual('first', current['status_detail'])
        self.assertEqual(T0, current['updated_at'])
        self.assertEqual(2, len(self._events(upgrade)))

    def test_stale_report_changes_nothing(self):
        upgrade = self._create()
        self._transition(upgrade, states.VERIFYING)
        changed, current = self._transition(upgrade, states.DOWNLOADING)
        self.assertFalse(changed)
        self.assertEqual(states.VERIFYING, current['status'])
        self.assertEqual(2, len(self._events(upgrade)))

    def test_report_after_a_final_state_is_ignored(self):
        upgrade = self._create()
        self._transition(upgrade, states.FAILED)
        for late in (states.DOWNLOADING, states.SUCCESS, states.CANCELLED):
            changed, current = self._transition(upgrade, late)
            self.assertFalse(changed)
            self.assertEqual(states.FAILED, current['status'])
        self.assertEqual(2, len(self._events(upgrade)))

    def test_late_final_report_replaces_timed_out(self):
        upgrade = self._create()
        self._transition(upgrade, states.TIMED_OUT, source='conductor')
        self._advance(60)
        changed, current = self._transition(upgrade, states.SUCCESS)
        self.assertTrue(changed)
        self.assertEqual(states.SUCCESS, current['status'])
        self.assertEqual(T0 + datetime.timedelta(seconds=60),
                         current['finished_at'])
        self.assertEqual((states.TIMED_OUT, states.SUCCESS),
                         self._events(upgrade)[-1])

    def test_illegal_change_raises_and_records_nothing(self):
        upgrade = self._create()
        self._transition(upgrade, states.DOWNLOADING)
        error = self.assertRaises(exception.InvalidStateTransitionError,
                                  self._transition, upgrade,
                                  states.CANCELLED)
        self.assertEqual(409, error.code)
        self.assertEqual({'upgrade_id': upgrade['id'],
                          'from_state': states.DOWNLOADING,
                          'to_state': states.CANCELLED}, error.kwargs)
        self.assertEqual(states.DOWNLOADING, db_upgrades.get_upgrade(
            self.context, upgrade['id'])['status'])
        self.assertEqual(2, len(self._events(upgrade)))

    def test_every_legal_change_is_recorded(self):
        for from_state, to_state in states.transitions():
            upgrade = self._create()
            self._drive(upgrade, from_state)
            changed, moved = self._transition(upgrade, to_state)
            self.assertTrue(changed, (from_state, to_state))
            self.assertEqual(to_state, moved['status'])
            self.assertEqual((from_state, to_state), self._events(upgrade)[-1])

    def test_every_other_change_is_refused_or_ignored(self):
        legal = set(states.transitions())
        for from_state in sorted(states.ALL_STATES):
            for to_state in sorted(states.ALL_STATES):
                if (from_state, to_state) in legal:
                    continue
                upgrade = self._create()
                self._drive(upgrade, from_state)
                before = self._events(upgrade)
                if states.is_duplicate_or_stale(from_state, to_state):
                    changed, _ = self._transition(upgrade, to_state)
                    self.assertFalse(changed, (from_state, to_state))
                else:
                    self.assertRaises(exception.InvalidStateTransitionError,
                                      self._transition, upgrade, to_state)
                self.assertEqual(before, self._events(upgrade))

    def test_cancel_before_the_agent_starts(self):
        for state in states.CANCELLABLE_STATES:
            upgrade = self._create()
            self._drive(upgrade, state)
            changed, moved = self._transition(
                upgrade, states.CANCELLED, source='api',
                allowed_from=states.CANCELLABLE_STATES)
            self.assertTrue(changed)
            self.assertIsNotNone(moved['finished_at'])

    def test_cancel_twice_is_a_duplicate(self):
        upgrade = self._create()
        self._transition(upgrade, states.CANCELLED, source='api',
                         allowed_from=states.CANCELLABLE_STATES)
        changed, current = self._transition(
            upgrade, states.CANCELLED, source='api',
            allowed_from=states.CANCELLABLE_STATES)
        self.assertFalse(changed)
        self.assertEqual(states.CANCELLED, current['status'])

    def test_cancel_of_a_finished_upgrade_raises(self):
        upgrade = self._create()
        self._drive(upgrade, states.SUCCESS)
        self.assertRaises(
            exception.InvalidStateTransitionError, self._transition,
            upgrade, states.CANCELLED, source='api',
            allowed_from=states.CANCELLABLE_STATES)

    def test_agent_cannot_start_a_cancelled_upgrade(self):
        upgrade = self._create()
        self._transition(upgrade, states.SENT)
        self._transition(upgrade, states.CANCELLED, source='api')
        error = self.assertRaises(
            exception.InvalidStateTransitionError, self._transition, upgrade,
            states.DOWNLOADING, allowed_from={states.SENT, states.DEFERRED})
        self.assertEqual(states.CANCELLED, error.kwargs['from_state'])
        self.assertEqual(states.CANCELLED, db_upgrades.get_upgrade(
            self.context, upgrade['id'])['status'])

    def test_agent_start_from_deferred(self):
        upgrade = self._create()
        self._transition(upgrade, states.DEFERRED)
        changed, _ = self._transition(
            upgrade, states.DOWNLOADING,
            allowed_from={states.SENT, states.DEFERRED})
        self.assertTrue(changed)

    def test_allowed_from_narrows_legal_moves(self):
        upgrade = self._create()
        self.assertTrue(states.is_legal(states.PENDING, states.DOWNLOADING))
        self.assertRaises(
            exception.InvalidStateTransitionError, self._transition, upgrade,
            states.DOWNLOADING, allowed_from={states.SENT, states.DEFERRED})
        self.assertEqual(1, len(self._events(upgrade)))

    def test_unknown_upgrade(self):
        self.assertRaises(exception.UpgradeNotFoundError,
                          db_transitions.transition_upgrade, self.context,
                          uuidutils.generate_uuid(), states.SENT, 'agent')

    def test_unknown_state(self):
        upgrade = self._create()
        error = self.assertRaises(
            exception.InvalidInputError, self._transition,
            upgrade, 'DONE')
        self.assertIn("unknown upgrade state 'DONE'", str(error))

    def test_missing_or_bad_source(self):
        upgrade = self._create()
        for source in (None, '', 's' * 33, 7):
            self.assertRaises(
                exception.InvalidInputError, self._transition, upgrade,
                states.SENT, source=source)
        self.assertEqual(1, len(self._events(upgrade)))

    def test_values_outside_the_allowed_columns(self):
        upgrade = self._create()
        for values in ({'status': states.SUCCESS}, {'id': 'x'},
                       {'finished_at': T0}, {'project_id': 'p'}):
            error = self.assertRaises(
                exception.InvalidInputError, self._transition,
                upgrade, states.SENT, values=values)
            self.assertIn('unknown upgrade column', str(error))
        self.assertEqual(states.PENDING, db_upgrades.get_upgrade(
            self.context, upgrade['id'])['status'])

    def test_long_detail_is_cut_not_refused(self):
        upgrade = self._create()
        changed, moved = self._transition(
            upgrade, states.FAILED, detail='e' * (db_common.MAX_DETAIL + 10))
        self.assertTrue(changed)
        self.assertEqual(db_common.MAX_DETAIL, len(moved['status_detail']))
        self.assertTrue(moved['status_detail'].endswith(' [cut]'))
        event = db_upgrades.get_upgrade(self.context, upgrade['id'],
                                        with_events=True)['events'][-1]
        self.assertEqual(moved['status_detail'], event['detail'])

    def test_detail_of_the_longest_kept_length(self):
        upgrade = self._create()
        detail = 'd' * db_common.MAX_DETAIL
        _, moved = self._transition(upgrade, states.FAILED, detail=detail)
        self.assertEqual(detail, moved['status_detail'])

    def test_detail_not_a_string(self):
        upgrade = self._create()
        error = self.assertRaises(
            exception.InvalidInputError, self._transition,
            upgrade, states.FAILED,
            detail={'error': 'x'})
        self.assertIn('detail must be a string', str(error))
        self.assertEqual(1, len(self._events(upgrade)))

    def test_bad_values(self):
        upgrade = self._create()
        for values in ({'from_version': 'v' * 256},
                       {'instance_version': None}):
            self.assertRaises(
                exception.InvalidInputError, self._transition, upgrade,
                states.SENT, values=values)
        self.assertEqual(1, len(self._events(upgrade)))

    def test_nullable_value_may_be_cleared(self):
        upgrade = self._create(rollout_id=uuidutils.generate_uuid())
        _, moved = self._transition(upgrade, states.SENT,
                                    values={'rollout_id': None})
        self.assertIsNone(moved['rollout_id'])

    def test_returns_what_a_read_back_finds(self):
        upgrade = self._create()
        self._transition(upgrade, states.SENT)
        self._advance(3)
        _changed, moved = self._transition(upgrade, states.SUCCESS,
                                           detail='healthy',
                                           values={'from_version': '1.0'})
        self.assertEqual(db_upgrades.get_upgrade(self.context, upgrade['id']),
                         moved)

    def test_upgrade_of_another_instance_changes_nothing(self):
        upgrade = self._create()
        e = self.assertRaises(
            exception.UpgradeOfAnotherInstanceError, self._transition, upgrade,
            states.DOWNLOADING, instance_id=OTHER_INSTANCE)
        self.assertEqual(INSTANCE, e.kwargs['owner'])
        self.assertEqual([(None, states.PENDING)], self._events(upgrade))
        changed, _ = self._transition(upgrade, states.DOWNLOADING,
                                      instance_id=INSTANCE)
        self.assertTrue(changed)

    def test_detail_may_depend_on_the_upgrade(self):
        upgrade = self._create()
        _changed, moved = self._transition(
            upgrade, states.SENT,
            detail=lambda u: 'to %s' % u['instance_version'])
        self.assertEqual('to 2.0.0', moved['status_detail'])
        cut = self._transition(upgrade, states.SUCCESS,
                               detail=lambda u:
                               'x' * (db_common.MAX_DETAIL + 1))
        self.assertEqual(db_common.MAX_DETAIL, len(cut[1]['status_detail']))


class TestTransitionChain(TestTransitionUpgrade):
    """Several moves of one upgrade in one transaction."""

    def _chain(self, upgrade, *moves, **kw):
        return db_transitions.transition_upgrade_chain(
            self.context, upgrade['id'], moves, 'agent', **kw)

    def _details(self, upgrade):
        return [e['detail'] for e in db_upgrades.get_upgrade(
            self.context, upgrade['id'], with_events=True)['events']]

    def test_records_each_move_in_order_with_its_event(self):
        upgrade = self._create()
        self._transition(upgrade, states.DOWNLOADING)
        self._advance(2)
        outcomes = self._chain(
            upgrade, (states.VERIFYING, 'verified', None),
            (states.INSTALLING, None, {'from_version': '1.0'}),
            (states.SUCCESS, 'healthy', None))
        self.assertEqual([(True, states.VERIFYING), (True, states.INSTALLING),
                          (True, states.SUCCESS)],
                         [(c, u['status']) for c, u in outcomes])
        self.assertEqual('verified', outcomes[0][1]['status_detail'])
        self.assertIsNone(outcomes[0][1]['from_version'])
        self.assertEqual('1.0', outcomes[1][1]['from_version'])
        self.assertIsNone(outcomes[1][1]['finished_at'])
        stored = db_upgrades.get_upgrade(self.context, upgrade['id'])
        self.assertEqual(outcomes[-1][1], stored)
        self.assertEqual(T0 + datetime.timedelta(seconds=2),
                         stored['finished_at'])
        self.assertEqual([(None, states.PENDING),
                          (states.PENDING, states.DOWNLOADING),
                          (states.DOWNLOADING, states.VERIFYING),
                          (states.VERIFYING, states.INSTALLING),
                          (states.INSTALLING, states.SUCCESS)],
                         self._events(upgrade))
        self.assertEqual([None, None, 'verified', None, 'healthy'],
                         self._details(upgrade))

    def test_a_refused_move_leaves_the_next_to_be_decided(self):
        upgrade = self._create()
        self._transition(upgrade, states.DOWNLOADING)
        outcomes = self._chain(
            upgrade, (states.VERIFYING, None, None),
            (states.CANCELLED, None, None),
            ('NOT-A-STATE', None, None),
            (states.INSTALLING, None, {'no_such_column': 1}),
            (states.VERIFYING, None, None),
            (states.DOWNLOADING, None, None),
            (states.INSTALLING, None, None))
        self.assertEqual((True, states.VERIFYING),
                         (outcomes[0][0], outcomes[0][1]['status']))
        self.assertIsInstance(
            outcomes[1], exception.InvalidStateTransitionError)
        self.assertEqual(states.VERIFYING, outcomes[1].kwargs['from_state'])
        self.assertIsInstance(outcomes[2], exception.InvalidInputError)
        self.assertIsInstance(outcomes[3], exception.InvalidInputError)
        self.assertEqual([False, False, True],
                         [o[0] for o in outcomes[4:]])
        self.assertEqual([states.VERIFYING, states.VERIFYING,
                          states.INSTALLING],
                         [o[1]['status'] for o in outcomes[4:]])
        self.assertEqual([(states.DOWNLOADING, states.VERIFYING),
                          (states.VERIFYING, states.INSTALLING)],
                         self._events(upgrade)[2:])

    def test_nothing_new_writes_nothing(self):
        upgrade = self._create()
        self._transition(upgrade, states.INSTALLING)
        self._advance(5)
        outcomes = self._chain(upgrade, (states.VERIFYING, None, None),
                               (states.INSTALLING, 'again', None))
        self.assertEqual([False, False], [o[0] for o in outcomes])
        stored = db_upgrades.get_upgrade(self.context, upgrade['id'])
        self.assertEqual(T0, stored['updated_at'])
        self.assertEqual(2, len(self._events(upgrade)))

    def test_unknown_upgrade_or_another_instance_refuses_every_move(self):
        moves = ((states.VERIFYING, None, None), ('BAD', None, None))
        outcomes = self._chain({'id': uuidutils.generate_uuid()}, *moves)
        self.assertIsInstance(outcomes[0], exception.UpgradeNotFoundError)
        self.assertIsInstance(outcomes[1], exception.InvalidInputError)
        upgrade = self._create()
        outcomes = self._chain(upgrade, *moves, instance_id=OTHER_INSTANCE)
        self.assertIsInstance(outcomes[0],
                              exception.UpgradeOfAnotherInstanceError)
        self.assertEqual([(None, states.PENDING)], self._events(upgrade))

    def test_a_detail_that_cannot_be_stored_refuses_its_move_only(self):
        upgrade = self._create()
        outcomes = self._chain(upgrade, (states.SENT, lambda u: 3, None),
                               (states.DOWNLOADING, lambda u: 'claimed',
                                None))
        self.assertIsInstance(outcomes[0], exception.InvalidInputError)
        self.assertEqual('claimed', outcomes[1][1]['status_detail'])
        self.assertEqual([(None, states.PENDING),
                          (states.PENDING, states.DOWNLOADING)],
                         self._events(upgrade))

    def test_another_writer_between_read_and_update_is_retried(self):
        upgrade = self._create()
        self._transition(upgrade, states.DOWNLOADING)
        memory = upgrade_memory.UpgradeMemory()
        memory.remember(db_upgrades.get_upgrade(self.context, upgrade['id']))
        # Another conductor records VERIFYING: what is remembered is old.
        self._transition(upgrade, states.VERIFYING)
        outcomes = self._chain(upgrade, (states.VERIFYING, None, None),
                               (states.INSTALLING, None, None),
                               memory=memory)
        self.assertEqual([False, True], [o[0] for o in outcomes])
        self.assertEqual(states.INSTALLING, memory.get(upgrade['id'])[
            'status'])
        self.assertEqual([(states.DOWNLOADING, states.VERIFYING),
                          (states.VERIFYING, states.INSTALLING)],
                         self._events(upgrade)[2:])


class TestCreateSent(db_base.DbTestCase):
    """An upgrade recorded with its first send, for the API's cast."""

    def _events(self, upgrade):
        return [(e['source'], e['from_state'], e['to_state'], e['created_at'])
                for e in db_upgrades.get_upgrade(
                    self.context, upgrade['id'], with_events=True)['events']]

    def test_recorded_sent_with_both_events_in_order(self):
        resend_at = T0 + datetime.timedelta(seconds=10)
        upgrade, keys = db_upgrades.create_sent_upgrade(
            self.context, self._values(), resend_at)
        self.assertEqual({}, keys)
        self.assertEqual(db_upgrades.get_upgrade(self.context,
                                                 upgrade['id']), upgrade)
        self.assertEqual((states.SENT, None, resend_at, 1, T0),
                         (upgrade['status'], upgrade['status_detail'],
                          upgrade['resend_at'], upgrade['send_count'],
                          upgrade['updated_at']))
        self.assertEqual([('api', None, states.PENDING, T0),
                          ('api', states.PENDING, states.SENT, T0)],
                         self._events(upgrade))

    def test_pending_without_resend_at(self):
        upgrade = self._create()
        self.assertEqual((states.PENDING, None, 0),
                         (upgrade['status'], upgrade['resend_at'],
                          upgrade['send_count']))
        self.assertEqual([('api', None, states.PENDING, T0)],
                         self._events(upgrade))

    def test_invalid_values_record_nothing(self):
        self.assertRaises(
            exception.InvalidInputError, db_upgrades.create_sent_upgrade,
            self.context, self._values(location=''), T0)
        self.assertEqual([], db_upgrades.list_upgrades(self.context))

    def test_gives_the_instances_unexpired_keys_newest_first(self):
        def add(instance_id, key_id, expire_others_at=None):
            db_keys.add_instance_key(self.context, instance_id, key_id,
                                     'bWF0ZXJpYWw=', False,
                                     expire_others_at=expire_others_at)
        add(INSTANCE, 'expired')
        self._advance()
        add(INSTANCE, 'older', expire_others_at=T0)
        self._advance()
        add(INSTANCE, 'newest')
        add(uuidutils.generate_uuid(), 'another instance\'s')
        _upgrade, keys = db_upgrades.create_sent_upgrade(
            self.context, self._values(), T0)
        self.assertEqual(['newest', 'older'],
                         [k['key_id'] for k in keys[INSTANCE]])
        self.assertEqual([INSTANCE], list(keys))
        self.assertEqual(db_keys.get_instance_keys_of(self.context,
                                                      [INSTANCE]), keys)
