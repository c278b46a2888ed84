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

"""Creating, reading, listing and timing out upgrades on SQLite."""

import datetime

from oslo_utils import timeutils
from oslo_utils import uuidutils

from trove_upgrade.common import exception
from trove_upgrade.common import states
from trove_upgrade.db import resends as db_resends
from trove_upgrade.db import transitions as db_transitions
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.tests.fixtures import database
from trove_upgrade.tests.unit.db import base as db_base

T0 = db_base.T0
INSTANCE = db_base.INSTANCE
OTHER_INSTANCE = db_base.OTHER_INSTANCE


class TestCreateUpgrade(db_base.DbTestCase):

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
            'resend_at': None,
            'send_count': 0,
            'expected_manifest': None,
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
        error = self.assertRaises(exception.InvalidInputError,
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


class TestGetUpgrade(db_base.DbTestCase):

    def test_unknown(self):
        error = self.assertRaises(exception.UpgradeNotFoundError,
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
            db_transitions.transition_upgrade(self.context, upgrade['id'],
                                              state, 'agent')
        db_transitions.transition_upgrade(self.context, other['id'],
                                          states.SENT, 'conductor')
        events = db_upgrades.get_upgrade(self.context, upgrade['id'],
                                         with_events=True)['events']
        self.assertEqual(
            [(None, states.PENDING), (states.PENDING, states.SENT),
             (states.SENT, states.DOWNLOADING)],
            [(e['from_state'], e['to_state']) for e in events])
        self.assertEqual(sorted(e['id'] for e in events),
                         [e['id'] for e in events])


class TestListUpgrades(db_base.DbTestCase):

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
        db_transitions.transition_upgrade(self.context, created[1]['id'],
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
        error = self.assertRaises(exception.MarkerNotFoundError,
                                  db_upgrades.list_upgrades, self.context,
                                  marker='no-such-upgrade')
        self.assertEqual(400, error.code)
        self.assertIn('no-such-upgrade', str(error))

    def test_unknown_filter(self):
        error = self.assertRaises(
            exception.InvalidInputError, db_upgrades.list_upgrades,
            self.context, filters={'location': 'x'})
        self.assertIn('unknown upgrade filter: location', str(error))

    def test_bad_limits(self):
        for limit in (0, -1, '2', 1.5, True):
            error = self.assertRaises(exception.InvalidInputError,
                                      db_upgrades.list_upgrades,
                                      self.context, limit=limit)
            self.assertIn('limit must be a positive integer', str(error))


class TestTimeoutUpgrades(db_base.DbTestCase):

    def test_times_out_only_old_unfinished_upgrades(self):
        old_pending = self._create()
        old_running = self._create()
        db_transitions.transition_upgrade(self.context, old_running['id'],
                                          states.INSTALLING, 'agent')
        old_done = self._create()
        db_transitions.transition_upgrade(self.context, old_done['id'],
                                          states.FAILED, 'agent')
        self._advance(600)
        recent = self._create()
        self._advance(300)

        timed_out = db_transitions.timeout_upgrades(
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
        self.assertEqual(1, len(db_transitions.timeout_upgrades(
            self.context, timeutils.utcnow())))
        self.assertEqual([], db_transitions.timeout_upgrades(
            self.context, timeutils.utcnow()))

    def test_nothing_to_time_out(self):
        self.assertEqual([], db_transitions.timeout_upgrades(self.context, T0))

    def test_aware_cutoff_is_taken_as_utc(self):
        upgrade = self._create()
        self._advance(600)
        cutoff = datetime.datetime(2026, 1, 2, 5, 4, 5, tzinfo=(
            datetime.timezone(datetime.timedelta(hours=2))))
        self.assertEqual([], db_transitions.timeout_upgrades(self.context,
                                                             cutoff))
        cutoff = datetime.datetime(2026, 1, 2, 5, 4, 6, tzinfo=(
            datetime.timezone(datetime.timedelta(hours=2))))
        self.assertEqual([upgrade['id']], [u['id'] for u in
                                           db_transitions.timeout_upgrades(
                                               self.context, cutoff)])


class TestWritesWhileAnotherWrites(db_base.DbTestCase):
    """The upgrades' writers that read first wait for SQLite's lock."""

    def _status(self, upgrade):
        return db_upgrades.get_upgrade(self.context, upgrade['id'])['status']

    def test_a_transition_waits_for_another_writer(self):
        upgrade = self._create()
        changed, _upgrade = database.while_another_writes(
            self, lambda: db_transitions.transition_upgrade(
                self.context, upgrade['id'], states.SENT, 'conductor'))
        self.assertTrue(changed)
        self.assertEqual(states.SENT, self._status(upgrade))

    def test_a_group_commit_waits_for_another_writer(self):
        upgrade = self._create()
        move = db_transitions.Move(states.SENT, None, {})
        chain = db_transitions.Chain(self.context, upgrade['id'], [move],
                                     'conductor', None, None, None)
        [(outcomes, _upgrade)] = database.while_another_writes(
            self, lambda: db_transitions.transition_chains_once(
                self.context, [chain]))
        self.assertEqual([True], [changed for changed, _u in outcomes])
        self.assertEqual(states.SENT, self._status(upgrade))

    def test_marking_sent_waits_for_another_writer(self):
        upgrade = self._create()
        moved = database.while_another_writes(
            self, lambda: db_upgrades.mark_upgrades_sent(
                self.context, [upgrade['id']], 'conductor'))
        self.assertEqual([upgrade['id']], moved)
        self.assertEqual(states.SENT, self._status(upgrade))

    def test_taking_due_resends_waits_for_another_writer(self):
        upgrade, _keys = db_upgrades.create_sent_upgrade(
            self.context, self._values(), resend_at=self.now)
        taken = database.while_another_writes(
            self, lambda: db_resends.take_due_upgrades(
                self.context, self.now, lambda count: None, 10, 'conductor',
                lambda upgrade: 'sent again'))
        self.assertEqual([(upgrade['id'], 2)],
                         [(u['id'], u['send_count']) for u in taken])
