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

"""What the control plane does with an upgrade: create, cancel, time out."""

import base64
import datetime

import fixtures
import oslo_messaging as messaging
from oslo_utils import fixture as utils_fixture

from trove_upgrade.common import context
from trove_upgrade.common import exception
from trove_upgrade.common import rpc_interface
from trove_upgrade.common import sealing
from trove_upgrade.common import states
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.services import sealing_keys
from trove_upgrade.services import upgrades
from trove_upgrade.tests import base
from trove_upgrade.tests.fixtures import database
from trove_upgrade.tests.fixtures import rpc as rpc_fixture

INSTANCE = '7d3c2b1a-0f9e-4d8c-b7a6-5f4e3d2c1b0a'

VALUES = {'instance_id': INSTANCE, 'instance_version': 'v1.0.1',
          'strategy': 'swift',
          'location': 'swift://guest-agents/trove-guestagent-v1.0.1.tar.gz',
          'metadata': {'ticket': 'OPS-1'}, 'allow_downgrade': True}


def history(upgrade_id):
    upgrade = db_upgrades.get_upgrade(context.get_admin_context(), upgrade_id,
                                      with_events=True)
    return [(e['source'], e['from_state'], e['to_state'])
            for e in upgrade['events']]


class UpgradesTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.database = self.useFixture(database.Database())
        self.transport = self.useFixture(rpc_fixture.FakeTransport())
        self.context = context.RequestContext(user_id='admin',
                                              project_id='ops',
                                              is_admin=True)

    def events(self):
        return [(n['event_type'], n['priority'], n['payload']['status'])
                for n in self.transport.notifications]

    def count_rows(self):
        with self.database.engine.connect() as conn:
            return conn.exec_driver_sql(
                'SELECT (SELECT count(*) FROM upgrades), '
                '(SELECT count(*) FROM upgrade_events)').one()


class TestCreate(UpgradesTestCase):

    def test_recorded_sent_and_cast(self):
        agent = self.useFixture(rpc_fixture.RecordingServer(
            messaging.Target(topic=rpc_interface.agent_topic(INSTANCE),
                             server='guest'),
            [rpc_fixture.AgentEndpoint()]))
        upgrade = upgrades.create_upgrade(self.context, VALUES)
        self.assertEqual(states.SENT, upgrade['status'])
        self.assertEqual([('api', None, states.PENDING),
                          ('api', states.PENDING, states.SENT)],
                         history(upgrade['id']))
        [message] = agent.wait_for(1)
        self.assertEqual('upgrade', message.method)
        self.assertEqual(dict(VALUES, upgrade_id=upgrade['id']),
                         message.args)
        self.assertEqual(self.context.request_id,
                         message.context['request_id'])
        self.assertEqual(
            [('trove_upgrade.upgrade.create', 'INFO', states.SENT)],
            self.events())
        self.assertEqual(upgrade['id'],
                         self.transport.notifications[0]['payload']['id'])

    def test_failing_transport_records_failed(self):
        def refuse(*args, **kwargs):
            raise messaging.MessageDeliveryFailure(
                'Unable to connect to AMQP server after 3 tries')
        self.useFixture(fixtures.MonkeyPatch(
            'oslo_messaging._drivers.impl_fake.FakeDriver.send', refuse))
        e = self.assertRaises(exception.DispatchError,
                              upgrades.create_upgrade, self.context, VALUES)
        self.assertEqual(503, e.code)
        self.assertIn('Unable to connect to AMQP server', str(e))
        [upgrade] = db_upgrades.list_upgrades(self.context)
        self.assertEqual(upgrade['id'], e.kwargs['upgrade_id'])
        self.assertEqual(states.FAILED, upgrade['status'])
        self.assertIn('MessageDeliveryFailure', upgrade['status_detail'])
        self.assertIsNotNone(upgrade['finished_at'])
        # Recorded sent with the upgrade, then the cast failed.
        self.assertEqual([('api', None, states.PENDING),
                          ('api', states.PENDING, states.SENT),
                          ('api', states.SENT, states.FAILED)],
                         history(upgrade['id']))
        self.assertEqual(
            [('trove_upgrade.upgrade.create', 'INFO', states.SENT),
             ('trove_upgrade.upgrade.error', 'ERROR', states.FAILED)],
            self.events())

    def test_version_cap_below_the_agents_api_records_failed(self):
        self.flags(group='upgrade_levels', agent='0.9')
        e = self.assertRaises(exception.DispatchError,
                              upgrades.create_upgrade, self.context, VALUES)
        self.assertIn('RPCVersionCapError', str(e))
        [upgrade] = db_upgrades.list_upgrades(self.context)
        self.assertEqual(states.FAILED, upgrade['status'])

    def test_invalid_values_record_and_send_nothing(self):
        sent = []
        self.useFixture(fixtures.MonkeyPatch(
            'oslo_messaging._drivers.impl_fake.FakeDriver.send',
            lambda *args, **kwargs: sent.append(args)))
        for bad in ({'instance_id': INSTANCE},
                    dict(VALUES, location=''),
                    dict(VALUES, metadata='not an object'),
                    dict(VALUES, unknown='field')):
            self.assertRaises(
                exception.InvalidInputError, upgrades.create_upgrade,
                self.context, bad)
        self.assertEqual((0, 0), self.count_rows())
        self.assertEqual([], sent)
        self.assertEqual([], self.transport.notifications)

    def test_bad_version_cap_records_nothing(self):
        self.flags(group='upgrade_levels', agent='newest')
        self.assertRaises(exception.InvalidRPCVersionCapError,
                          upgrades.create_upgrade, self.context, VALUES)
        self.assertEqual((0, 0), self.count_rows())

    def test_agent_claims_as_soon_as_it_is_cast(self):
        # SENT is recorded before the cast: the agent's claim, however
        # fast, moves on from it.
        def claim_on_send(driver, target, ctxt, message, **kwargs):
            upgrade_id = message['args']['upgrade_id']
            result = upgrades.claim_upgrade(
                context.get_admin_context(), INSTANCE, upgrade_id, 'v1.0.0')
            self.assertTrue(result['proceed'])
        self.useFixture(fixtures.MonkeyPatch(
            'oslo_messaging._drivers.impl_fake.FakeDriver.send',
            claim_on_send))
        upgrade = upgrades.create_upgrade(self.context, VALUES)
        self.assertEqual([('api', None, states.PENDING),
                          ('api', states.PENDING, states.SENT),
                          ('agent', states.SENT, states.DOWNLOADING)],
                         history(upgrade['id']))

    def test_failed_cast_of_an_upgrade_claimed_meanwhile(self):
        # The conductor sent it again and the agent claimed it while this
        # cast was retried: its failure must not end a running upgrade.
        def claim_then_fail(driver, target, ctxt, message, **kwargs):
            upgrades.claim_upgrade(context.get_admin_context(), INSTANCE,
                                   message['args']['upgrade_id'], 'v1.0.0')
            raise messaging.MessageDeliveryFailure('gone')
        self.useFixture(fixtures.MonkeyPatch(
            'oslo_messaging._drivers.impl_fake.FakeDriver.send',
            claim_then_fail))
        upgrade = upgrades.create_upgrade(self.context, VALUES)
        self.assertEqual(states.DOWNLOADING, upgrade['status'])
        self.assertEqual([('api', None, states.PENDING),
                          ('api', states.PENDING, states.SENT),
                          ('agent', states.SENT, states.DOWNLOADING)],
                         history(upgrade['id']))

    def test_a_cast_never_made_is_sent_again(self):
        # The API dies between its commit and its cast: the upgrade is
        # SENT, due to be sent again, so it still reaches its agent.
        def die(*args, **kwargs):
            raise SystemExit('killed')
        self.useFixture(fixtures.MonkeyPatch(
            'oslo_messaging._drivers.impl_fake.FakeDriver.send', die))
        now = datetime.datetime(2026, 12, 1, 12, 0, 0)
        self.useFixture(utils_fixture.TimeFixture(now))
        self.flags(group='conductor', resend_interval=7)
        self.assertRaises(SystemExit, upgrades.create_upgrade, self.context,
                          VALUES)
        [upgrade] = db_upgrades.list_upgrades(self.context)
        self.assertEqual(
            (states.SENT, 1, now + datetime.timedelta(seconds=7)),
            (upgrade['status'], upgrade['send_count'], upgrade['resend_at']))


class TestCreateSealed(UpgradesTestCase):
    """The keys the API seals with are read with the upgrade it records."""

    def setUp(self):
        super().setUp()
        self.agent = self.useFixture(rpc_fixture.RecordingServer(
            messaging.Target(topic=rpc_interface.agent_topic(INSTANCE),
                             server='guest'),
            [rpc_fixture.AgentEndpoint('1.1')]))

    def opened_with(self, keys, message):
        args = dict(message.args)
        sealing.open_sealed(keys, args.pop('sealed'), 'upgrade',
                            sealing.TO_AGENT, args, 60,
                            sealing.MemoryReplayCache())

    def test_sealed_with_the_newest_key_after_a_rotation(self):
        sealing_keys.add_key(self.context, INSTANCE)
        upgrades.create_upgrade(self.context, VALUES)
        new = sealing_keys.add_key(self.context, INSTANCE, grace=0)
        upgrades.create_upgrade(self.context, VALUES)
        first, second = self.agent.wait_for(2)
        self.assertEqual(('1.1', '1.1'), (first.version, second.version))
        keyring = sealing_keys.keyring(self.context, INSTANCE)
        self.assertEqual([new['key_id']],
                         [key_id for key_id, _material in keyring.keys])
        # The replaced key is gone: only the newest opens the second.
        self.opened_with(keyring, second)
        self.assertRaises(sealing.SealError, self.opened_with, keyring,
                          first)

    def test_unreadable_keys_record_failed(self):
        key = base64.b64encode(sealing.generate_key()).decode()
        path = self.create_tempfiles([('master', key)])[0]
        self.flags(group='conductor', instance_key_master_key_file=path)
        sealing_keys.add_key(self.context, INSTANCE)
        self.flags(group='conductor', instance_key_master_key_file=None)
        e = self.assertRaises(exception.DispatchError,
                              upgrades.create_upgrade, self.context, VALUES)
        self.assertIn('InstanceKeyError', str(e))
        [upgrade] = db_upgrades.list_upgrades(self.context)
        self.assertEqual(states.FAILED, upgrade['status'])


class TestCancel(UpgradesTestCase):

    def setUp(self):
        super().setUp()
        self.upgrade = upgrades.create_upgrade(self.context, VALUES)

    def test_cancel_sent(self):
        upgrade = upgrades.cancel_upgrade(self.context, self.upgrade['id'])
        self.assertEqual(states.CANCELLED, upgrade['status'])
        self.assertEqual(('api', states.SENT, states.CANCELLED),
                         history(upgrade['id'])[-1])
        # The operator's own decision: neither an end nor an error.
        self.assertEqual(
            [('trove_upgrade.upgrade.create', 'INFO', states.SENT)],
            self.events())

    def test_cancel_deferred(self):
        upgrades.record_report(self.context, INSTANCE, self.upgrade['id'],
                               states.DEFERRED, 'busy', None, None)
        upgrade = upgrades.cancel_upgrade(self.context, self.upgrade['id'])
        self.assertEqual(states.CANCELLED, upgrade['status'])

    def test_cancel_twice_changes_nothing_more(self):
        upgrades.cancel_upgrade(self.context, self.upgrade['id'])
        upgrade = upgrades.cancel_upgrade(self.context, self.upgrade['id'])
        self.assertEqual(states.CANCELLED, upgrade['status'])
        self.assertEqual(3, len(history(upgrade['id'])))

    def test_cannot_cancel_once_started(self):
        upgrades.claim_upgrade(self.context, INSTANCE, self.upgrade['id'],
                               'v1.0.0')
        e = self.assertRaises(exception.InvalidStateTransitionError,
                              upgrades.cancel_upgrade, self.context,
                              self.upgrade['id'])
        self.assertEqual(409, e.code)
        self.assertEqual(states.DOWNLOADING, db_upgrades.get_upgrade(
            self.context, self.upgrade['id'])['status'])

    def test_cannot_cancel_a_finished_upgrade(self):
        upgrades.record_report(self.context, INSTANCE, self.upgrade['id'],
                               states.SUCCESS, 'already there', None,
                               'v1.0.1')
        self.assertRaises(exception.InvalidStateTransitionError,
                          upgrades.cancel_upgrade, self.context,
                          self.upgrade['id'])

    def test_unknown_upgrade(self):
        self.assertRaises(exception.UpgradeNotFoundError,
                          upgrades.cancel_upgrade, self.context,
                          'a7d5fe3c-0000-4000-8000-000000000000')

    def test_cancelled_upgrade_is_not_claimed(self):
        upgrades.cancel_upgrade(self.context, self.upgrade['id'])
        self.assertEqual(
            {'proceed': False, 'status': states.CANCELLED,
             'reason': 'Upgrade %s is CANCELLED.' % self.upgrade['id']},
            upgrades.claim_upgrade(self.context, INSTANCE,
                                   self.upgrade['id'], 'v1.0.0'))
        self.assertEqual(states.CANCELLED, db_upgrades.get_upgrade(
            self.context, self.upgrade['id'])['status'])


class TestTimeOut(UpgradesTestCase):

    def setUp(self):
        super().setUp()
        self.flags(group='conductor', upgrade_timeout=600)
        self.clock = self.useFixture(utils_fixture.TimeFixture(
            datetime.datetime(2026, 11, 29, 12, 0, 0)))

    def later(self, seconds):
        self.clock.advance_time_seconds(seconds)

    def test_silent_upgrade_times_out(self):
        silent = upgrades.create_upgrade(self.context, VALUES)
        self.later(300)
        recent = upgrades.create_upgrade(self.context, VALUES)
        self.assertEqual([], upgrades.time_out_upgrades(self.context))
        self.later(301)
        [timed_out] = upgrades.time_out_upgrades(self.context)
        self.assertEqual((silent['id'], states.TIMED_OUT),
                         (timed_out['id'], timed_out['status']))
        self.assertEqual(('conductor', states.SENT, states.TIMED_OUT),
                         history(silent['id'])[-1])
        self.assertEqual(states.SENT, db_upgrades.get_upgrade(
            self.context, recent['id'])['status'])
        self.assertEqual(
            ('trove_upgrade.upgrade.error', 'ERROR', states.TIMED_OUT),
            self.events()[-1])
        # Nothing more to do on the next run.
        self.assertEqual([], upgrades.time_out_upgrades(self.context))

    def test_finished_and_in_progress_upgrades(self):
        done = upgrades.create_upgrade(self.context, VALUES)
        upgrades.record_report(self.context, INSTANCE, done['id'],
                               states.SUCCESS, None, 'v1.0.0', 'v1.0.1')
        busy = upgrades.create_upgrade(self.context, VALUES)
        upgrades.claim_upgrade(self.context, INSTANCE, busy['id'], 'v1.0.0')
        self.later(601)
        [timed_out] = upgrades.time_out_upgrades(self.context)
        self.assertEqual(busy['id'], timed_out['id'])
        self.assertEqual(states.SUCCESS, db_upgrades.get_upgrade(
            self.context, done['id'])['status'])

    def test_late_final_report_replaces_timed_out(self):
        upgrade = upgrades.create_upgrade(self.context, VALUES)
        self.later(601)
        upgrades.time_out_upgrades(self.context)
        result = upgrades.record_report(self.context, INSTANCE,
                                        upgrade['id'], states.SUCCESS, None,
                                        'v1.0.0', 'v1.0.1')
        self.assertEqual({'recorded': True, 'status': states.SUCCESS,
                          'reason': None}, result)
