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

"""What each database must keep exactly: times, large and non-ASCII values.

The unit tests run on SQLite; these run the db API on MariaDB and
PostgreSQL too, where column types, precision and character sets differ.
"""

import datetime

import fixtures
from oslo_utils import timeutils
import sqlalchemy as sa

from trove_upgrade.common import context
from trove_upgrade.common import rollout_states
from trove_upgrade.common import states
from trove_upgrade.db import agents as db_agents
from trove_upgrade.db import common as db_common
from trove_upgrade.db import desired_versions as db_desired
from trove_upgrade.db import held as db_held
from trove_upgrade.db import migration
from trove_upgrade.db import resends as db_resends
from trove_upgrade.db import rollouts as db_rollouts
from trove_upgrade.db import transitions as db_transitions
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.tests import base
from trove_upgrade.tests.fixtures import database

T0 = datetime.datetime(2026, 3, 4, 5, 6, 7, 654321)
INSTANCE = '0b9e4a8e-58c4-4b0e-9d0e-6a3c8f0a1001'
OTHER_INSTANCE = '0b9e4a8e-58c4-4b0e-9d0e-6a3c8f0a1002'
# Four bytes in UTF-8, twelve characters once JSON-escaped.
EMOJI = '\U0001F600'


class _BackendTests:

    def setUp(self):
        super().setUp()
        self.now = T0
        self.useFixture(fixtures.MockPatchObject(
            timeutils, 'utcnow', side_effect=lambda: self.now))
        self.context = context.RequestContext(project_id='p', user_id='u')

    def _create(self, **kw):
        values = {'instance_id': INSTANCE, 'instance_version': '3.0.0',
                  'strategy': 'http', 'location': 'https://127.0.0.1/a.tar'}
        values.update(kw)
        return db_upgrades.create_upgrade(self.context, values)

    def test_microseconds_are_kept(self):
        upgrade = self._create()
        self.now = T0 + datetime.timedelta(microseconds=1)
        db_transitions.transition_upgrade(self.context, upgrade['id'],
                                          states.SENT, 'conductor')
        stored = db_upgrades.get_upgrade(self.context, upgrade['id'],
                                         with_events=True)
        self.assertEqual(T0, stored['created_at'])
        self.assertEqual(T0 + datetime.timedelta(microseconds=1),
                         stored['updated_at'])
        self.assertEqual([T0, T0 + datetime.timedelta(microseconds=1)],
                         [e['created_at'] for e in stored['events']])

    def test_order_within_one_second(self):
        created = []
        for i in range(3):
            self.now = T0 + datetime.timedelta(microseconds=i)
            created.append(self._create())
        self.assertEqual([u['id'] for u in reversed(created)],
                         [u['id'] for u in
                          db_upgrades.list_upgrades(self.context)])
        page = db_upgrades.list_upgrades(self.context, limit=1,
                                         marker=created[2]['id'])
        self.assertEqual([created[1]['id']], [u['id'] for u in page])

    def test_largest_values_survive_intact(self):
        # The largest metadata the API accepts, escaped to about 800 KB.
        metadata = {'k%02d' % i + 'x' * 252: EMOJI * 1024 for i in range(64)}
        detail = ('\u00e9' + EMOJI) * (db_common.MAX_DETAIL // 2)
        upgrade = self._create(metadata=metadata, location=EMOJI * 2048,
                               instance_version=EMOJI * 255)
        db_transitions.transition_upgrade(self.context, upgrade['id'],
                                          states.FAILED, 'agent',
                                          detail=detail)
        stored = db_upgrades.get_upgrade(self.context, upgrade['id'],
                                         with_events=True)
        self.assertEqual(metadata, stored['metadata'])
        self.assertEqual(EMOJI * 2048, stored['location'])
        self.assertEqual(EMOJI * 255, stored['instance_version'])
        self.assertEqual(detail, stored['status_detail'])
        self.assertEqual(detail, stored['events'][-1]['detail'])

    def test_a_written_batch_keeps_every_value(self):
        # The report writer's batch: one UPDATE per upgrade and one INSERT
        # of every event, each value bound by its column's type.
        upgrades = [self._create(), self._create()]
        for upgrade in upgrades:
            db_transitions.transition_upgrade(self.context, upgrade['id'],
                                              states.SENT, 'api')
        self.now = T0 + datetime.timedelta(microseconds=7)
        moves = [db_transitions.Move(states.DOWNLOADING, None,
                                     {'from_version': EMOJI * 255}),
                 db_transitions.Move(states.FAILED, EMOJI * 3, {})]
        kept = db_common.KeptConnection()
        self.addCleanup(kept.close)
        results = db_transitions.transition_chains_once(self.context, [
            db_transitions.Chain(self.context, upgrade['id'], moves, 'agent',
                                 None, INSTANCE, None)
            for upgrade in upgrades], kept=kept)
        self.assertEqual([states.FAILED] * 2,
                         [upgrade['status'] for _, upgrade in results])
        for upgrade in upgrades:
            stored = db_upgrades.get_upgrade(self.context, upgrade['id'],
                                             with_events=True)
            self.assertEqual(
                (states.FAILED, EMOJI * 3, EMOJI * 255, self.now, self.now),
                (stored['status'], stored['status_detail'],
                 stored['from_version'], stored['updated_at'],
                 stored['finished_at']))
            self.assertEqual(
                [(states.SENT, states.DOWNLOADING, None),
                 (states.DOWNLOADING, states.FAILED, EMOJI * 3)],
                [(e['from_state'], e['to_state'], e['detail'])
                 for e in stored['events'][-2:]])
            self.assertEqual(
                [(self.now, 'agent', self.context.request_id)] * 2,
                [(e['created_at'], e['source'], e['request_id'])
                 for e in stored['events'][-2:]])

    def _running_rollout(self):
        return db_rollouts.create_rollout(self.context, {
            'name': 'r', 'instance_version': '3.0.0', 'strategy': 'http',
            'location': 'https://127.0.0.1/a.tar',
            'selector': {'group': 'g'}, 'canary': 0, 'max_in_flight': 2,
            'max_in_flight_kind': 'count', 'max_failures': 0,
            'max_failures_kind': 'count', 'per_agent_retries': 0,
            'agent_deadline': 60, 'status': rollout_states.RUNNING})

    def test_a_batch_copies_its_events_intact(self):
        # The events of a rollout's batch are INSERT ... SELECTs with their
        # values bound once: times, details and request ids as given.
        rollout = self._running_rollout()
        db_rollouts.lease_rollout(self.context, rollout['id'], 'me',
                                  T0 + datetime.timedelta(seconds=60))
        upgrades = db_rollouts.create_rollout_upgrades(
            self.context, rollout, [(INSTANCE, 1, False),
                                    (OTHER_INSTANCE, 1, False)], 'me')
        self.now = T0 + datetime.timedelta(microseconds=1)
        detail = '\u00e9' + EMOJI
        ids = [u['id'] for u in upgrades]
        self.assertEqual(sorted(ids), sorted(db_upgrades.mark_upgrades_sent(
            self.context, ids, 'conductor', detail=detail)))
        for upgrade_id in ids:
            self.assertEqual(
                [(T0, None, states.PENDING, None),
                 (self.now, states.PENDING, states.SENT, detail)],
                [(e['created_at'], e['from_state'], e['to_state'],
                  e['detail']) for e in db_upgrades.get_upgrade(
                    self.context, upgrade_id, with_events=True)['events']
                 if e['request_id'] == self.context.request_id])

    def _leased_rollout(self):
        rollout = self._running_rollout()
        db_rollouts.lease_rollout(self.context, rollout['id'], 'me',
                                  T0 + datetime.timedelta(seconds=60))
        return rollout

    def _stored_upgrades(self):
        """Every upgrade row by id, as the driver reads it.

        No SQLAlchemy type turns what the database holds into what the
        API expects: ``(type, value)`` of each column.
        """
        with db_common.get_engine().connect() as connection:
            rows = connection.execute(sa.text('SELECT * FROM upgrades'))
            return {row.id: {k: (type(v), v) for k, v in row._asdict().items()}
                    for row in rows}

    def test_a_batch_stores_what_one_upgrade_alone_stores(self):
        # A batch binds the columns its upgrades share once per INSERT,
        # in more than one INSERT: each row holds, in type and value, what
        # the API stores for one upgrade of the same request on its own.
        rollout = self._leased_rollout()
        alone = self._create(rollout_id=rollout['id'])
        size = db_rollouts._MAX_BATCH_INSERT + 3
        targets = [('instance-%04d' % i, 1, False) for i in range(size)]
        batch = db_rollouts.create_rollout_upgrades(
            self.context, rollout, targets, 'me')
        self.assertEqual([t[0] for t in targets],
                         [u['instance_id'] for u in batch])
        stored = self._stored_upgrades()
        self.assertEqual(size + 1, len(stored))
        expected = stored.pop(alone['id'])
        for upgrade in batch:
            self.assertEqual(
                dict(expected, id=(str, upgrade['id']),
                     instance_id=(str, upgrade['instance_id'])),
                stored[upgrade['id']])
        # What a batch returns is what is read back, in type and value.
        for upgrade in batch[0], batch[-1]:
            read = db_upgrades.get_upgrade(self.context, upgrade['id'])
            self.assertEqual({k: (type(v), v) for k, v in read.items()},
                             {k: (type(v), v) for k, v in upgrade.items()})

    def test_a_sent_batch_reads_back_sent_once(self):
        rollout = self._leased_rollout()
        resend_at = T0 + datetime.timedelta(seconds=30, microseconds=1)
        batch = db_rollouts.create_rollout_upgrades(
            self.context, rollout, [(INSTANCE, 1, False),
                                    (OTHER_INSTANCE, 1, True)], 'me',
            resend_at=resend_at)
        for upgrade in batch:
            read = db_upgrades.get_upgrade(self.context, upgrade['id'])
            self.assertEqual(
                (resend_at, 1, states.PENDING, {}, False, None, T0, T0),
                (read['resend_at'], read['send_count'], read['status'],
                 read['metadata'], read['allow_downgrade'],
                 read['finished_at'], read['created_at'],
                 read['updated_at']))
            self.assertEqual(read, upgrade)

    def test_a_batch_with_an_attempt_recorded_already(self):
        # The database refuses the batch whole, and its other upgrades
        # are recorded one at a time.
        rollout = self._leased_rollout()
        first, = db_rollouts.create_rollout_upgrades(
            self.context, rollout, [(INSTANCE, 1, False)], 'me')
        others = db_rollouts.create_rollout_upgrades(
            self.context, rollout, [('before', 1, False),
                                    (INSTANCE, 1, False),
                                    ('after', 1, False)], 'me')
        self.assertEqual(['before', 'after'],
                         [u['instance_id'] for u in others])
        ids = [first['id']] + [u['id'] for u in others]
        self.assertEqual(sorted(ids), sorted(self._stored_upgrades()))
        self.assertEqual(
            sorted(ids),
            sorted(d['upgrade_id'] for d in
                   db_rollouts.list_rollout_dispatches(
                       self.context, rollout['id'])))

    def test_a_pass_reads_on_its_prebuilt_statements(self):
        """What every reconciler pass runs, built once with parameters.

        The lease, the rollouts' list and counts, the overdue upgrades,
        the held and due ones, and the ACTIVE desired versions: bound
        parameters in a LIMIT, an expanding IN and a FOR UPDATE SKIP
        LOCKED, as each database takes them.
        """
        rollout = self._running_rollout()
        until = T0 + datetime.timedelta(seconds=60)
        self.assertEqual(rollout['id'], db_rollouts.lease_rollout(
            self.context, rollout['id'], 'me', until)['id'])
        self.assertIsNone(db_rollouts.lease_rollout(
            self.context, rollout['id'], 'other', until))
        self.assertEqual([rollout['id']], [r['id'] for r in (
            db_rollouts.list_rollouts_in(
                self.context, rollout_states.ACTIVE_STATES))])
        [first, second] = db_rollouts.create_rollout_upgrades(
            self.context, rollout, [(INSTANCE, 1, False),
                                    (OTHER_INSTANCE, 1, False)], 'me',
            resend_at=T0)
        self.assertEqual((2, 0, True), tuple(
            db_rollouts.count_rollout_upgrades(self.context, rollout['id'])))
        self.now = T0 + datetime.timedelta(seconds=1)
        taken = db_resends.take_due_upgrades(
            self.context, self.now, lambda count: until, 1, 'conductor',
            lambda upgrade: 'again')
        # Both due since T0: the first by id.
        self.assertEqual([(min(first['id'], second['id']), 2, until)],
                         [(u['id'], u['send_count'], u['resend_at'])
                          for u in taken])
        self.assertEqual([], db_held.list_held_upgrades(self.context))
        self.assertEqual([], db_desired.list_desired_versions(
            self.context, filters={'status': 'ACTIVE'}))
        timed_out = db_rollouts.timeout_rollout_upgrades(
            self.context, rollout['id'], self.now)
        self.assertEqual(sorted([first['id'], second['id']]),
                         sorted(u['id'] for u in timed_out))
        self.assertEqual((0, 2, True), tuple(
            db_rollouts.count_rollout_upgrades(self.context, rollout['id'])))

    def test_agent_values_survive_intact(self):
        labels = {'r\u00e9gion': EMOJI, 'az': 'nova'}
        db_agents.register_agent(self.context, INSTANCE, {
            'labels': labels, 'host': EMOJI * 255, 'rpc_api_version': '1.10'})
        db_agents.register_agent(self.context, 'other', {
            'rpc_api_version': '1.9'})
        agent = db_agents.get_agent(self.context, INSTANCE)
        self.assertEqual(labels, agent['labels'])
        self.assertEqual(EMOJI * 255, agent['host'])
        self.assertEqual(T0, agent['last_heartbeat_at'])
        self.assertEqual([INSTANCE], [a['instance_id'] for a in
                                      db_agents.list_agents(
                                          self.context,
                                          filters={'labels': labels})])
        self.assertEqual('1.9', db_agents.min_agent_rpc_version(self.context))

    def test_allow_downgrade_is_a_boolean(self):
        for value in (True, False):
            upgrade = self._create(allow_downgrade=value)
            self.assertIs(value, db_upgrades.get_upgrade(
                self.context, upgrade['id'])['allow_downgrade'])


class _Opportunistic(database.OpportunisticDBTestMixin):

    def setUp(self):
        super().setUp()
        migration.upgrade('head', engine=db_common.get_engine())
        self.useFixture(database.ServiceFacade())


class TestBackendMySQL(_BackendTests, _Opportunistic, base.TestCase):
    FIXTURE = database.MySQLOpportunisticFixture


class TestBackendPostgreSQL(_BackendTests, _Opportunistic, base.TestCase):
    FIXTURE = database.PostgresqlOpportunisticFixture


class TestBackendSQLite(_BackendTests, base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(database.Database())
