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

"""Upgrades their agents have not claimed are cast again, and recorded."""

import datetime

import fixtures
import oslo_messaging as messaging
from oslo_utils import fixture as utils_fixture

from trove_upgrade.common import context
from trove_upgrade.common import states
from trove_upgrade.db import agents as db_agents
from trove_upgrade.db import held as db_held
from trove_upgrade.db import resends as db_resends
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.services import agent_rpcapi
from trove_upgrade.services import held_upgrades
from trove_upgrade.services import resends
from trove_upgrade.services import upgrades
from trove_upgrade.tests import base
from trove_upgrade.tests.fixtures import database
from trove_upgrade.tests.fixtures import rpc as rpc_fixture

INSTANCE = '7d3c2b1a-0f9e-4d8c-b7a6-5f4e3d2c1b0a'
START = datetime.datetime(2026, 12, 1, 12, 0, 0)

VALUES = {'instance_id': INSTANCE, 'instance_version': 'v1.0.1',
          'strategy': 'swift',
          'location': 'swift://guest-agents/trove-guestagent-v1.0.1.tar.gz'}


class ResendsTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(database.Database())
        self.useFixture(rpc_fixture.FakeTransport())
        self.flags(group='conductor', resend_interval=10,
                   resend_max_interval=60, upgrade_timeout=3600)
        self.clock = self.useFixture(utils_fixture.TimeFixture(START))
        self.context = context.get_admin_context()
        # What the fake driver was asked to cast: (upgrade id, error).
        self.casts = []
        self.refuse_with = None
        self.useFixture(fixtures.MonkeyPatch(
            'oslo_messaging._drivers.impl_fake.FakeDriver.send',
            self._send))
        self.agent_api = agent_rpcapi.AgentAPI()

    def _send(self, driver, target, ctxt, message, **kwargs):
        self.casts.append(message['args']['upgrade_id'])
        if self.refuse_with is not None:
            raise self.refuse_with

    def later(self, seconds):
        self.clock.advance_time_seconds(seconds)

    def resend(self):
        return resends.send_unclaimed_upgrades(self.context, self.agent_api)

    def get(self, upgrade_id):
        return db_upgrades.get_upgrade(self.context, upgrade_id,
                                       with_events=True)

    def history(self, upgrade_id):
        return [(e['source'], e['from_state'], e['to_state'])
                for e in self.get(upgrade_id)['events']]


class TestResend(ResendsTestCase):

    def test_unclaimed_upgrade_is_cast_again_with_backoff(self):
        upgrade = upgrades.create_upgrade(self.context, VALUES)
        self.assertEqual((1, START + datetime.timedelta(seconds=10)),
                         (upgrade['send_count'], upgrade['resend_at']))
        self.later(9)
        self.assertEqual([], self.resend())
        self.later(1)
        self.assertEqual([upgrade['id']], self.resend())
        self.assertEqual([upgrade['id']] * 2, self.casts)
        again = self.get(upgrade['id'])
        # Twice as long each time.
        self.assertEqual((2, START + datetime.timedelta(seconds=30)),
                         (again['send_count'], again['resend_at']))
        self.assertEqual(states.SENT, again['status'])
        self.assertEqual(('conductor', states.SENT, states.SENT),
                         self.history(upgrade['id'])[-1])
        self.assertIn('send 2', again['events'][-1]['detail'])
        self.assertEqual(again['events'][-1]['detail'],
                         again['status_detail'])
        self.assertEqual([], self.resend())
        self.later(20)
        self.assertEqual([upgrade['id']], self.resend())
        self.assertEqual(START + datetime.timedelta(seconds=70),
                         self.get(upgrade['id'])['resend_at'])

    def test_backoff_stops_growing_at_the_maximum(self):
        self.assertEqual(
            [10, 20, 40, 60, 60],
            [(resends.resend_at(count, START) - START).total_seconds()
             for count in range(1, 6)])

    def test_claimed_upgrade_is_not_cast_again(self):
        upgrade = upgrades.create_upgrade(self.context, VALUES)
        upgrades.claim_upgrade(self.context, INSTANCE, upgrade['id'],
                               'v1.0.0')
        self.later(3000)
        self.assertEqual([], self.resend())
        self.assertEqual([upgrade['id']], self.casts)

    def test_ended_upgrades_are_not_cast_again(self):
        cancelled = upgrades.create_upgrade(self.context, VALUES)
        upgrades.cancel_upgrade(self.context, cancelled['id'])
        timed_out = upgrades.create_upgrade(self.context, VALUES)
        self.later(3601)
        upgrades.time_out_upgrades(self.context)
        self.assertEqual(states.TIMED_OUT,
                         self.get(timed_out['id'])['status'])
        self.assertEqual([], self.resend())

    def test_deferred_report_stops_the_resends(self):
        upgrade = upgrades.create_upgrade(self.context, VALUES)
        upgrades.record_report(self.context, INSTANCE, upgrade['id'],
                               states.DEFERRED, 'the guest is BUSY', None,
                               None)
        self.assertIsNone(self.get(upgrade['id'])['resend_at'])
        self.later(3000)
        self.assertEqual([], self.resend())

    def test_another_instance_cannot_stop_the_resends(self):
        upgrade = upgrades.create_upgrade(self.context, VALUES)
        db_resends.mark_received(self.context, upgrade['id'],
                                 'c0ffee00-0000-4000-8000-000000000000')
        self.later(10)
        self.assertEqual([upgrade['id']], self.resend())

    def test_failed_resend_is_recorded_and_tried_again(self):
        upgrade = upgrades.create_upgrade(self.context, VALUES)
        self.later(10)
        self.refuse_with = messaging.MessageDeliveryFailure(
            'Unable to connect to AMQP server after 1 tries')
        self.assertEqual([], self.resend())
        failed = self.get(upgrade['id'])
        self.assertEqual(states.SENT, failed['status'])
        self.assertIn('Send 2 failed: MessageDeliveryFailure',
                      failed['status_detail'])
        self.refuse_with = None
        self.later(20)
        self.assertEqual([upgrade['id']], self.resend())


class TestReturned(ResendsTestCase):
    """RabbitMQ returns a mandatory cast that no queue takes."""

    def setUp(self):
        super().setUp()
        self.refuse_with = messaging.MessageUndeliverable(
            Exception('NO_ROUTE'), 'trove_upgrade', 'topic', {})

    def test_created_upgrade_is_sent_with_the_reason(self):
        upgrade = upgrades.create_upgrade(self.context, VALUES)
        self.assertEqual((states.SENT, resends.RETURNED),
                         (upgrade['status'], upgrade['status_detail']))
        recorded = self.get(upgrade['id'])
        del recorded['events']
        self.assertEqual(recorded, upgrade)
        # Recorded sent with the upgrade; then what became of the cast.
        self.assertEqual([('api', None, states.PENDING),
                          ('api', states.PENDING, states.SENT),
                          ('api', states.SENT, states.SENT)],
                         self.history(upgrade['id']))
        self.later(10)
        self.assertEqual([], self.resend())
        self.assertIn('Send 2: RabbitMQ returned it',
                      self.get(upgrade['id'])['status_detail'])
        # The agent's queue is back.
        self.refuse_with = None
        self.later(20)
        self.assertEqual([upgrade['id']], self.resend())
        self.assertEqual(3, len(self.casts))

    def test_batch_of_a_rollout_is_sent_with_the_reason(self):
        created = [db_upgrades.create_upgrade(self.context, VALUES)
                   for _ in range(3)]
        failures = {created[0]['id']: self.refuse_with,
                    created[1]['id']: messaging.MessageDeliveryFailure('x'),
                    created[2]['id']: messaging.RPCVersionCapError('1.3',
                                                                   '1.0')}
        self.assertEqual([created[0]['id'], created[1]['id']],
                         upgrades.record_casts(self.context, created,
                                               failures, 'conductor'))
        returned, unreachable, failed = (self.get(u['id']) for u in created)
        self.assertEqual(
            (states.SENT, resends.RETURNED, 1),
            (returned['status'], returned['status_detail'],
             returned['send_count']))
        # The broker out of reach: sent again, as a returned cast is.
        self.assertEqual(
            (states.SENT, 'Not sent: the messaging server could not be '
                          'reached (MessageDeliveryFailure: x). It is sent '
                          'again until the agent claims it.'),
            (unreachable['status'], unreachable['status_detail']))
        self.assertIsNotNone(unreachable['resend_at'])
        self.assertEqual(states.FAILED, failed['status'])


class TestHeld(ResendsTestCase):

    def hold(self):
        upgrade = db_upgrades.create_upgrade(self.context, VALUES)
        return db_held.hold_upgrade(self.context, upgrade['id'], 'api',
                                    'Held by the control plane: busy.')

    def test_held_upgrade_is_not_sent(self):
        held = self.hold()
        self.assertIsNone(held['resend_at'])
        self.later(3000)
        self.assertEqual([], self.resend())

    def test_release_without_its_cast_is_sent_again(self):
        # A conductor killed between the release and the cast.
        held = self.hold()
        db_held.release_upgrade(self.context, held['id'], 'conductor',
                                'Sent to the agent.', resends.resend_at(1))
        self.later(10)
        self.assertEqual([held['id']], self.resend())
        self.assertEqual(('conductor', states.DEFERRED, states.DEFERRED),
                         self.history(held['id'])[-1])

    def test_release_with_the_broker_out_of_reach_is_sent_again(self):
        held = self.hold()
        db_agents.register_agent(self.context, INSTANCE,
                                 {'guest_version': 'v1.0.0'})
        self.refuse_with = messaging.MessageDeliveryFailure('down')
        self.assertEqual([], held_upgrades.send_held_upgrades(
            self.context, self.agent_api))
        released = self.get(held['id'])
        self.assertEqual(states.DEFERRED, released['status'])
        self.assertIn('could not be reached (MessageDeliveryFailure: down)',
                      released['events'][-1]['detail'])
        self.refuse_with = None
        self.later(10)
        self.assertEqual([held['id']], self.resend())

    def test_agent_report_of_a_released_upgrade_stops_the_resends(self):
        held = self.hold()
        db_held.release_upgrade(self.context, held['id'], 'conductor',
                                'Sent to the agent.', resends.resend_at(1))
        result = upgrades.record_report(
            self.context, INSTANCE, held['id'], states.DEFERRED,
            'the guest is BUSY', None, None)
        self.assertEqual(upgrades.DUPLICATE, result['reason'])
        self.later(3000)
        self.assertEqual([], self.resend())
