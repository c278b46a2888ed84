"""The db API on SQLite: upgrades, their events, agents."""

import datetime

import fixtures
from oslo_utils import timeutils
from oslo_utils import uuidutils

from trove_upgrade import context
from trove_upgrade.db import agents as db_agents
from trove_upgrade.db import common as db_common
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade import exception
from trove_upgrade import states
from trove_upgrade.tests import base
from trove_upgrade.tests.fixtures import database

T0 = datetime.datetime(2026, 1, 2, 3, 4, 5, 123456)
INSTANCE = '6f1c1a53-9d63-4c43-a0a1-6b1ad1f3c001'
OTHER_INSTANCE = '6f1c1a53-9d63-4c43-a0a1-6b1ad1f3c002'


class DbTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(database.Database())
        # The db API's clock, moved by hand.
        self.now = T0
        self.useFixture(fixtures.MockPatchObject(
            timeutils, 'utcnow', side_effect=lambda: self.now))
        self.context = context.RequestContext(
            project_id='admin-project', user_id='admin-user',
            request_id='req-6f1c1a53-9d63-4c43-a0a1-6b1ad1f3c0ff')

    def _values(self, **kw):
        values = {'instance_id': INSTANCE, 'instance_version': '2.0.0',
                  'strategy': 'swift', 'location': 'agents/2.0.0.tar'}
        values.update(kw)
        return values

    def _create(self, **kw):
        return db_upgrades.create_upgrade(self.context, self._values(**kw))

    def _advance(self, seconds=1):
        self.now += datetime.timedelta(seconds=seconds)


class TestCreateUpgrade(DbTestCase):

    def test_records_a_pending_upgrade_with_its_first_event(self):
        upgrade = self._create()

        self.assertTrue(uuidutils.is_uuid_like(upgrade['id']))
        self.assertEqual({
            'id': upgrade['id'],
            'instance_id': INSTANCE,
            'instance_version': '2.0.0',
            'from_version': None,
            'strategy': 'swift',
            'location': 'agents/2.0.0.tar',
            'metadata': {},
            'allow_downgrade': False,
            'status': states.PENDING,
            'status_detail': None,
            'project_id': 'admin-project',
            'user_id': 'admin-user',
            'request_id': self.context.request_id,
            'rollout_id': None,
            'created_at': T0,
            'updated_at': T0,
            'finished_at': None,
        }, upgrade)
        stored = db_upgrades.get_upgrade(self.context, upgrade['id'],
                                         with_events=True)
        self.assertEqual([{
            'id': stored['events'][0]['id'],
            'created_at': T0,
            'source': 'api',
            'from_state': None,
            'to_state': states.PENDING,
            'detail': None,
            'request_id': self.context.request_id,
        }], stored['events'])
        del stored['events']
        self.assertEqual(upgrade, stored)

    def test_optional_fields(self):
        rollout_id = uuidutils.generate_uuid()
        upgrade = self._create(metadata={'ticket': 'OPS-1', 'n': [1, 2]},
                               allow_downgrade=True, rollout_id=rollout_id)
        stored = db_upgrades.get_upgrade(self.context, upgrade['id'])
        self.assertEqual({'ticket': 'OPS-1', 'n': [1, 2]}, stored['metadata'])
        self.assertIs(True, stored['allow_downgrade'])
        self.assertEqual(rollout_id, stored['rollout_id'])

    def test_datetimes_are_naive_utc(self):
        upgrade = self._create()
        self.assertIsNone(upgrade['created_at'].tzinfo)
        stored = db_upgrades.get_upgrade(self.context, upgrade['id'])
        self.assertEqual(T0, stored['created_at'])

    def test_longest_location_fits(self):
        upgrade = self._create(location='l' * 2048)
        self.assertEqual(2048, len(
            db_upgrades.get_upgrade(self.context, upgrade['id'])['location']))

    def _assert_refused(self, values, message):
        error = self.assertRaises(exception.Invalid,
                                  db_upgrades.create_upgrade, self.context,
                                  values)
        self.assertIn(message, str(error))
        self.assertEqual([], db_upgrades.list_upgrades(self.context))

    def test_missing_field(self):
        values = self._values()
        del values['location']
        self._assert_refused(values, 'missing upgrade field: location')

    def test_unknown_field(self):
        self._assert_refused(self._values(status=states.SUCCESS),
                             'unknown upgrade field: status')

    def test_empty_string(self):
        self._assert_refused(self._values(strategy=''),
                             'strategy must be a non-empty string')

    def test_required_field_none(self):
        self._assert_refused(self._values(instance_id=None),
                             'instance_id must be a non-empty string')

    def test_not_a_string(self):
        self._assert_refused(self._values(instance_version=2),
                             'instance_version must be a non-empty string')

    def test_too_long(self):
        self._assert_refused(self._values(location='l' * 2049),
                             'location is longer than 2048 characters')

    def test_metadata_not_an_object(self):
        self._assert_refused(self._values(metadata=['a']),
                             'metadata must be an object')

    def test_metadata_that_json_cannot_hold(self):
        self._assert_refused(self._values(metadata={'at': object()}),
                             'metadata cannot be stored as JSON')
        self._assert_refused(self._values(metadata={1: 'one'}),
                             'metadata keys must be strings')
        self._assert_refused(self._values(metadata=''),
                             'metadata must be an object')

    def test_allow_downgrade_not_a_boolean(self):
        self._assert_refused(self._values(allow_downgrade='yes'),
                             'allow_downgrade must be a boolean')


class TestGetUpgrade(DbTestCase):

    def test_unknown(self):
        error = self.assertRaises(exception.UpgradeNotFound,
                                  db_upgrades.get_upgrade, self.context,
                                  'nope')
        self.assertEqual(404, error.code)
        self.assertIn('nope', str(error))

    def test_events_only_when_asked(self):
        upgrade = self._create()
        self.assertNotIn('events',
                         db_upgrades.get_upgrade(self.context, upgrade['id']))

    def test_events_oldest_first_and_only_its_own(self):
        upgrade = self._create()
        other = self._create(instance_id=OTHER_INSTANCE)
        for state in (states.SENT, states.DOWNLOADING):
            self._advance()
            db_upgrades.transition_upgrade(self.context, upgrade['id'], state,
                                           'agent')
        db_upgrades.transition_upgrade(self.context, other['id'], states.SENT,
                                       'conductor')
        events = db_upgrades.get_upgrade(self.context, upgrade['id'],
                                         with_events=True)['events']
        self.assertEqual(
            [(None, states.PENDING), (states.PENDING, states.SENT),
             (states.SENT, states.DOWNLOADING)],
            [(e['from_state'], e['to_state']) for e in events])
        self.assertEqual(sorted(e['id'] for e in events),
                         [e['id'] for e in events])


class TestListUpgrades(DbTestCase):

    def _create_several(self):
        created = []
        for i in range(5):
            created.append(self._create(
                instance_id=INSTANCE if i % 2 else OTHER_INSTANCE,
                instance_version='2.0.%d' % (i % 2)))
            self._advance()
        return created

    def test_empty(self):
        self.assertEqual([], db_upgrades.list_upgrades(self.context))

    def test_newest_first(self):
        created = self._create_several()
        self.assertEqual([u['id'] for u in reversed(created)],
                         [u['id'] for u in
                          db_upgrades.list_upgrades(self.context)])

    def test_same_time_ordered_by_id_descending(self):
        created = [self._create() for _ in range(4)]
        self.assertEqual(sorted((u['id'] for u in created), reverse=True),
                         [u['id'] for u in
                          db_upgrades.list_upgrades(self.context)])

    def test_filters(self):
        created = self._create_several()
        db_upgrades.transition_upgrade(self.context, created[1]['id'],
                                       states.SENT, 'conductor')
        rollout_id = uuidutils.generate_uuid()
        in_rollout = self._create(instance_id=uuidutils.generate_uuid(),
                                  rollout_id=rollout_id)

        def ids(**filters):
            return [u['id'] for u in db_upgrades.list_upgrades(
                self.context, filters=filters)]

        self.assertEqual([created[3]['id'], created[1]['id']],
                         ids(instance_id=INSTANCE, instance_version='2.0.1'))
        self.assertEqual([created[1]['id']], ids(status=states.SENT))
        self.assertEqual([in_rollout['id']], ids(rollout_id=rollout_id))
        self.assertEqual([], ids(instance_id=INSTANCE,
                                 instance_version='2.0.0'))

    def test_pages_follow_each_other(self):
        created = self._create_several()
        pages, marker = [], None
        while True:
            page = db_upgrades.list_upgrades(self.context, limit=2,
                                             marker=marker)
            if not page:
                break
            pages.append([u['id'] for u in page])
            marker = page[-1]['id']
        ids = [u['id'] for u in reversed(created)]
        self.assertEqual([ids[0:2], ids[2:4], ids[4:]], pages)

    def test_marker_with_filters(self):
        created = self._create_several()
        page = db_upgrades.list_upgrades(
            self.context, filters={'instance_id': OTHER_INSTANCE},
            marker=created[4]['id'])
        self.assertEqual([created[2]['id'], created[0]['id']],
                         [u['id'] for u in page])

    def test_unknown_marker(self):
        self._create()
        error = self.assertRaises(exception.MarkerNotFound,
                                  db_upgrades.list_upgrades, self.context,
                                  marker='no-such-upgrade')
        self.assertEqual(400, error.code)
        self.assertIn('no-such-upgrade', str(error))

    def test_unknown_filter(self):
        error = self.assertRaises(exception.Invalid, db_upgrades.list_upgrades,
                                  self.context, filters={'location': 'x'})
        self.assertIn('unknown upgrade filter: location', str(error))

    def test_bad_limits(self):
        for limit in (0, -1, '2', 1.5, True):
            error = self.assertRaises(exception.Invalid,
                                      db_upgrades.list_upgrades,
                                      self.context, limit=limit)
            self.assertIn('limit must be a positive integer', str(error))


class TestTransitionUpgrade(DbTestCase):

    def _transition(self, upgrade, to_state, source='agent', **kw):
        return db_upgrades.transition_upgrade(self.context, upgrade['id'],
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
        error = self.assertRaises(exception.InvalidStateTransition,
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
                    self.assertRaises(exception.InvalidStateTransition,
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
        self.assertRaises(exception.InvalidStateTransition, self._transition,
                          upgrade, states.CANCELLED, source='api',
                          allowed_from=states.CANCELLABLE_STATES)

    def test_agent_cannot_start_a_cancelled_upgrade(self):
        upgrade = self._create()
        self._transition(upgrade, states.SENT)
        self._transition(upgrade, states.CANCELLED, source='api')
        error = self.assertRaises(
            exception.InvalidStateTransition, self._transition, upgrade,
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
            exception.InvalidStateTransition, self._transition, upgrade,
            states.DOWNLOADING, allowed_from={states.SENT, states.DEFERRED})
        self.assertEqual(1, len(self._events(upgrade)))

    def test_unknown_upgrade(self):
        self.assertRaises(exception.UpgradeNotFound,
                          db_upgrades.transition_upgrade, self.context,
                          uuidutils.generate_uuid(), states.SENT, 'agent')

    def test_unknown_state(self):
        upgrade = self._create()
        error = self.assertRaises(exception.Invalid, self._transition,
                                  upgrade, 'DONE')
        self.assertIn("unknown upgrade state 'DONE'", str(error))

    def test_missing_or_bad_source(self):
        upgrade = self._create()
        for source in (None, '', 's' * 33, 7):
            self.assertRaises(exception.Invalid, self._transition, upgrade,
                              states.SENT, source=source)
        self.assertEqual(1, len(self._events(upgrade)))

    def test_values_outside_the_allowed_columns(self):
        upgrade = self._create()
        for values in ({'status': states.SUCCESS}, {'id': 'x'},
                       {'finished_at': T0}, {'project_id': 'p'}):
            error = self.assertRaises(exception.Invalid, self._transition,
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
        error = self.assertRaises(exception.Invalid, self._transition,
                                  upgrade, states.FAILED,
                                  detail={'error': 'x'})
        self.assertIn('detail must be a string', str(error))
        self.assertEqual(1, len(self._events(upgrade)))

    def test_bad_values(self):
        upgrade = self._create()
        for values in ({'from_version': 'v' * 256},
                       {'instance_version': None}):
            self.assertRaises(exception.Invalid, self._transition, upgrade,
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
            exception.UpgradeOfAnotherInstance, self._transition, upgrade,
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


class TestTimeoutUpgrades(DbTestCase):

    def test_times_out_only_old_unfinished_upgrades(self):
        old_pending = self._create()
        old_running = self._create()
        db_upgrades.transition_upgrade(self.context, old_running['id'],
                                       states.INSTALLING, 'agent')
        old_done = self._create()
        db_upgrades.transition_upgrade(self.context, old_done['id'],
                                       states.FAILED, 'agent')
        self._advance(600)
        recent = self._create()
        self._advance(300)

        timed_out = db_upgrades.timeout_upgrades(
            self.context, T0 + datetime.timedelta(seconds=300))

        self.assertEqual(sorted([old_pending['id'], old_running['id']]),
                         sorted(u['id'] for u in timed_out))
        for upgrade in timed_out:
            self.assertEqual(states.TIMED_OUT, upgrade['status'])
            self.assertEqual(T0 + datetime.timedelta(seconds=900),
                             upgrade['finished_at'])
        event = db_upgrades.get_upgrade(self.context, old_running['id'],
                                        with_events=True)['events'][-1]
        self.assertEqual(('conductor', states.INSTALLING, states.TIMED_OUT),
                         (event['source'], event['from_state'],
                          event['to_state']))
        self.assertIn('900 seconds', event['detail'])
        self.assertEqual(event['detail'], timed_out[0]['status_detail'])
        self.assertEqual(states.FAILED, db_upgrades.get_upgrade(
            self.context, old_done['id'])['status'])
        self.assertEqual(states.PENDING, db_upgrades.get_upgrade(
            self.context, recent['id'])['status'])

    def test_second_pass_changes_nothing(self):
        self._create()
        self._advance(600)
        self.assertEqual(1, len(db_upgrades.timeout_upgrades(
            self.context, timeutils.utcnow())))
        self.assertEqual([], db_upgrades.timeout_upgrades(
            self.context, timeutils.utcnow()))

    def test_nothing_to_time_out(self):
        self.assertEqual([], db_upgrades.timeout_upgrades(self.context, T0))

    def test_aware_cutoff_is_taken_as_utc(self):
        upgrade = self._create()
        self._advance(600)
        cutoff = datetime.datetime(2026, 1, 2, 5, 4, 5, tzinfo=(
            datetime.timezone(datetime.timedelta(hours=2))))
        self.assertEqual([], db_upgrades.timeout_upgrades(self.context,
                                                          cutoff))
        cutoff = datetime.datetime(2026, 1, 2, 5, 4, 6, tzinfo=(
            datetime.timezone(datetime.timedelta(hours=2))))
        self.assertEqual([upgrade['id']], [u['id'] for u in
                                           db_upgrades.timeout_upgrades(
                                               self.context, cutoff)])


class TestAgents(DbTestCase):

    def _register(self, instance_id=INSTANCE, **values):
        self.assertIsNone(db_agents.register_agent(self.context, instance_id,
                                                   values))
        return db_agents.get_agent(self.context, instance_id)

    def test_first_registration(self):
        agent = self._register(agent_version='2.0.0', guest_version='1.5.0',
                               rpc_api_version='1.2', state='RUNNING',
                               labels={'az': 'nova', 'ds': 'mysql'},
                               host='guest-1')
        self.assertEqual({
            'instance_id': INSTANCE,
            'agent_version': '2.0.0',
            'guest_version': '1.5.0',
            'rpc_api_version': '1.2',
            'state': 'RUNNING',
            'labels': {'az': 'nova', 'ds': 'mysql'},
            'host': 'guest-1',
            'created_at': T0,
            'updated_at': T0,
            'last_heartbeat_at': T0,
        }, agent)
        self.assertEqual(agent, db_agents.get_agent(self.context, INSTANCE))

    def test_registration_with_nothing_but_the_instance(self):
        agent = self._register()
        self.assertEqual({}, agent['labels'])
        self.assertIsNone(agent['rpc_api_version'])

    def test_heartbeat_updates_what_it_reports(self):
        self._register(agent_version='2.0.0', rpc_api_version='1.2',
                       state='RUNNING', labels={'az': 'nova'})
        self._advance(45)
        agent = self._register(state='UPGRADING')
        self.assertEqual('UPGRADING', agent['state'])
        self.assertEqual('2.0.0', agent['agent_version'])
        self.assertEqual({'az': 'nova'}, agent['labels'])
        self.assertEqual(T0, agent['created_at'])
        self.assertEqual(T0 + datetime.timedelta(seconds=45),
                         agent['last_heartbeat_at'])
        self.assertEqual(1, len(db_agents.list_agents(self.context)))

    def test_labels_are_replaced_as_a_whole(self):
        self._register(labels={'az': 'nova', 'ds': 'mysql'})
        agent = self._register(labels={'az': 'other'})
        self.assertEqual({'az': 'other'}, agent['labels'])

    def test_bad_registrations_record_nothing(self):
        bad = [({'version': '1'}, 'unknown agent field: version'),
               ({'rpc_api_version': '1'}, 'must look like x.y'),
               ({'rpc_api_version': '1.2.3'}, 'must look like x.y'),
               ({'rpc_api_version': 'a.b'}, 'must look like x.y'),
               ({'rpc_api_version': 1.2}, 'must be a non-empty string'),
               ({'labels': ['az']}, 'labels must be an object'),
               ({'labels': {'az': {1, 2}}}, 'labels cannot be stored as JSON'),
               ({'host': ''}, 'host must be a non-empty string'),
               ({'state': 's' * 33}, 'state is longer than 32 characters')]
        for values, message in bad:
            error = self.assertRaises(exception.Invalid,
                                      db_agents.register_agent,
                                      self.context, INSTANCE, values)
            self.assertIn(message, str(error))
        self.assertEqual([], db_agents.list_agents(self.context))

    def test_bad_instance_ids(self):
        for instance_id in (None, '', 'i' * 37, 7):
            error = self.assertRaises(exception.Invalid,
                                      db_agents.register_agent, self.context,
                                      instance_id, {'state': 'RUNNING'})
            self.assertIn('instance_id', str(error))
        self.assertEqual([], db_agents.list_agents(self.context))

    def test_unknown_agent(self):
        error = self.assertRaises(exception.AgentNotFound, db_agents.get_agent,
                                  self.context, INSTANCE)
        self.assertEqual(404, error.code)
        self.assertIn(INSTANCE, str(error))


class TestDeleteAgent(DbTestCase):

    def setUp(self):
        super().setUp()
        db_agents.register_agent(self.context, INSTANCE, {'state': 'RUNNING'})
        db_agents.register_agent(self.context, OTHER_INSTANCE,
                                 {'state': 'RUNNING'})

    def _agents(self):
        return [a['instance_id'] for a in db_agents.list_agents(self.context)]

    def test_deletes_only_that_agent_and_keeps_its_upgrades(self):
        upgrade = self._create()
        db_upgrades.transition_upgrade(self.context, upgrade['id'],
                                       states.FAILED, 'agent')
        db_agents.delete_agent(self.context, INSTANCE)
        self.assertEqual([OTHER_INSTANCE], self._agents())
        kept = db_upgrades.get_upgrade(self.context, upgrade['id'],
                                       with_events=True)
        self.assertEqual(states.FAILED, kept['status'])
        self.assertEqual(2, len(kept['events']))

    def test_unknown_agent(self):
        db_agents.delete_agent(self.context, INSTANCE)
        error = self.assertRaises(exception.AgentNotFound,
                                  db_agents.delete_agent, self.context,
                                  INSTANCE)
        self.assertIn(INSTANCE, str(error))
        self.assertEqual([OTHER_INSTANCE], self._agents())

    def test_newest_unfinished_upgrade_refuses_and_changes_nothing(self):
        self._create()
        self._advance()
        newest = self._create()
        db_upgrades.transition_upgrade(self.context, newest['id'],
                                       states.INSTALLING, 'agent')
        error = self.assertRaises(exception.AgentBusy, db_agents.delete_agent,
                                  self.context, INSTANCE)
        self.assertEqual(409, error.code)
        self.assertEqual((INSTANCE, newest['id'], states.INSTALLING),
                         (error.kwargs['instance_id'],
                          error.kwargs['upgrade_id'],
                          error.kwargs['status']))
        self.assertEqual(sorted([INSTANCE, OTHER_INSTANCE]), self._agents())

    def test_unfinished_upgrade_of_another_instance_does_not_matter(self):
        self._create(instance_id=OTHER_INSTANCE)
        db_agents.delete_agent(self.context, INSTANCE)
        self.assertEqual([OTHER_INSTANCE], self._agents())

    def test_no_agent_is_not_found_even_with_an_unfinished_upgrade(self):
        db_agents.delete_agent(self.context, INSTANCE)
        self._create()
        self.assertRaises(exception.AgentNotFound, db_agents.delete_agent,
                          self.context, INSTANCE)

    def test_registers_again_after_deletion(self):
        db_agents.delete_agent(self.context, INSTANCE)
        self._advance(30)
        db_agents.register_agent(self.context, INSTANCE, {'state': 'RUNNING'})
        agent = db_agents.get_agent(self.context, INSTANCE)
        self.assertEqual(T0 + datetime.timedelta(seconds=30),
                         agent['created_at'])


class TestListAgents(DbTestCase):

    def setUp(self):
        super().setUp()
        self.agents = {
            'i-1': {'guest_version': '1.0', 'state': 'RUNNING',
                    'rpc_api_version': '1.0',
                    'labels': {'az': 'a', 'ds': 'mysql'}},
            'i-2': {'guest_version': '2.0', 'state': 'RUNNING',
                    'rpc_api_version': '1.1',
                    'labels': {'az': 'b', 'ds': 'mysql'}},
            'i-3': {'guest_version': '1.0', 'state': 'UPGRADING',
                    'rpc_api_version': '1.1', 'labels': {'az': 'a'}},
            'i-4': {'guest_version': '1.0', 'state': 'RUNNING',
                    'rpc_api_version': '1.1',
                    'labels': {'az': 'a', 'ds': 'mysql'}},
        }
        for instance_id in ('i-3', 'i-1', 'i-4', 'i-2'):
            db_agents.register_agent(self.context, instance_id,
                                     self.agents[instance_id])

    def _ids(self, **kw):
        return [a['instance_id'] for a in db_agents.list_agents(self.context,
                                                                **kw)]

    def test_ordered_by_instance_id(self):
        self.assertEqual(['i-1', 'i-2', 'i-3', 'i-4'], self._ids())

    def test_column_filters(self):
        self.assertEqual(['i-1', 'i-3', 'i-4'],
                         self._ids(filters={'guest_version': '1.0'}))
        self.assertEqual(['i-3'], self._ids(filters={'state': 'UPGRADING'}))
        self.assertEqual(['i-2', 'i-4'], self._ids(
            filters={'rpc_api_version': '1.1', 'state': 'RUNNING'}))

    def test_labels_must_all_match(self):
        self.assertEqual(['i-1', 'i-4'], self._ids(
            filters={'labels': {'az': 'a', 'ds': 'mysql'}}))
        self.assertEqual(['i-1', 'i-3', 'i-4'],
                         self._ids(filters={'labels': {'az': 'a'}}))
        self.assertEqual([], self._ids(filters={'labels': {'rack': '1'}}))
        self.assertEqual(['i-4'], self._ids(filters={
            'labels': {'az': 'a'}, 'rpc_api_version': '1.1',
            'state': 'RUNNING'}))

    def test_empty_labels_filter_matches_all(self):
        self.assertEqual(4, len(self._ids(filters={'labels': {}})))

    def test_limit_counts_matching_agents(self):
        self.assertEqual(['i-1', 'i-3'], self._ids(
            filters={'labels': {'az': 'a'}}, limit=2))
        self.assertEqual(['i-4'], self._ids(
            filters={'labels': {'az': 'a'}}, limit=2, marker='i-3'))

    def test_pages(self):
        self.assertEqual(['i-1', 'i-2'], self._ids(limit=2))
        self.assertEqual(['i-3', 'i-4'], self._ids(limit=2, marker='i-2'))
        self.assertEqual([], self._ids(limit=2, marker='i-4'))

    def test_unknown_marker(self):
        self.assertRaises(exception.MarkerNotFound, db_agents.list_agents,
                          self.context, marker='i-9')

    def test_bad_filters(self):
        error = self.assertRaises(exception.Invalid, db_agents.list_agents,
                                  self.context, filters={'host': 'x'})
        self.assertIn('unknown agent filter: host', str(error))
        error = self.assertRaises(exception.Invalid, db_agents.list_agents,
                                  self.context, filters={'labels': 'az=a'})
        self.assertIn('labels filter must be an object', str(error))
        self.assertRaises(exception.Invalid, db_agents.list_agents,
                          self.context, limit=0)


class TestMinAgentRPCVersion(DbTestCase):

    def _register(self, instance_id, version):
        values = {} if version is None else {'rpc_api_version': version}
        db_agents.register_agent(self.context, instance_id, values)

    def test_no_agents(self):
        self.assertIsNone(db_agents.min_agent_rpc_version(self.context))

    def test_agents_without_a_version_do_not_count(self):
        self._register('i-1', None)
        self.assertIsNone(db_agents.min_agent_rpc_version(self.context))
        self._register('i-2', '1.3')
        self.assertEqual('1.3', db_agents.min_agent_rpc_version(self.context))

    def test_compared_as_numbers(self):
        self._register('i-1', '1.10')
        self._register('i-2', '1.9')
        self._register('i-3', '2.0')
        self.assertEqual('1.9', db_agents.min_agent_rpc_version(self.context))

    def test_ten_is_above_nine(self):
        self._register('i-1', '2.0')
        self._register('i-2', '1.10')
        self.assertEqual('1.10', db_agents.min_agent_rpc_version(self.context))

    def test_follows_heartbeats(self):
        self._register('i-1', '1.0')
        self._register('i-2', '1.1')
        self._register('i-1', '1.1')
        self.assertEqual('1.1', db_agents.min_agent_rpc_version(self.context))

    def test_agents_below_a_malformed_version(self):
        self._register('i-1', '1.0')
        for version in ('1', 'latest', '1.x', None):
            error = self.assertRaises(
                exception.Invalid, db_agents.list_agents_below_rpc_version,
                self.context, version)
            self.assertIn('looks like x.y', str(error))
