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

"""A broker outage mid-upgrade delays the reports and loses none.

The agent talks to RabbitMQ through a relay the test cuts while the
upgrade runs (see ``relay.Relay``): restarting the RabbitMQ that every other
test shares would disturb them. For the agent the effect is the same as a
broker restart: its connections drop and reconnecting fails until the relay
is restored.
"""

import time

from testtools import content

from trove_upgrade.common import states
from trove_upgrade.tests.fixtures import relay
from trove_upgrade.tests.functional.agent import harness
from trove_upgrade.tests.functional import rabbit_node


class TestBrokerOutage(harness.AgentTestCase):

    def relay_broker(self):
        """A relay to the shared RabbitMQ, and the agent's URL through it."""
        broker = self.useFixture(relay.Relay(5672))
        return broker, harness.RABBIT_URL.replace(':5672/',
                                                  ':%d/' % broker.port)

    def test_final_state_reaches_the_database_after_the_outage(self):
        broker, url = self.relay_broker()
        # A long health grace keeps the upgrade running after the cut.
        self.start_agent(transport_url=url, health_grace=3)
        self.wait_for_guest('1.0.0')
        self.wait_for_log('Registered with the conductor')
        upgrade = self.create_upgrade('2.0.0')
        self.wait_for(
            lambda: (self.journal()['current_upgrade'] or {}).get('step')
            in ('installing', 'switching', 'restarting'),
            'the upgrade to reach the install step')
        broker.cut()
        self.wait_for(
            lambda: self.journal()['processed'].get(upgrade['id']),
            'the agent to finish the upgrade offline')
        journal = self.journal()
        self.assertEqual(states.SUCCESS, journal['processed'][upgrade['id']])
        pending = [r['to_state'] for r in journal['outbox']]
        self.assertIn(states.SUCCESS, pending)
        self.assertNotEqual(states.SUCCESS,
                            self.get_upgrade(upgrade['id'])['status'])
        self.assertEqual('2.0.0', self.running_guest_version())
        broker.restore()
        done = self.wait_for_status(upgrade['id'], states.FINAL_STATES)
        self.assertEqual(states.SUCCESS, done['status'])
        self.wait_for_outbox_empty()

    def test_reports_survive_an_outage_and_an_agent_restart(self):
        broker, url = self.relay_broker()
        self.start_agent(transport_url=url, health_grace=3)
        self.wait_for_guest('1.0.0')
        upgrade = self.create_upgrade('2.0.0')
        self.wait_for(
            lambda: (self.journal()['current_upgrade'] or {}).get('step')
            in ('installing', 'switching', 'restarting'),
            'the upgrade to reach the install step')
        broker.cut()
        self.wait_for(
            lambda: self.journal()['processed'].get(upgrade['id']),
            'the agent to finish the upgrade offline')
        self.kill_agent()
        self.assertIn(states.SUCCESS,
                      [r['to_state'] for r in self.journal()['outbox']])
        broker.restore()
        self.start_agent(transport_url=url)
        done = self.wait_for_status(upgrade['id'], states.FINAL_STATES)
        self.assertEqual(states.SUCCESS, done['status'])
        self.assertEqual('2.0.0', self.running_guest_version())


class TestBrokerRestart(harness.AgentTestCase):
    """A real restart of a RabbitMQ node of this test's own."""

    def broker_url(self):
        self.node = self.useFixture(rabbit_node.RabbitMQNode())
        return self.node.url

    def test_waiting_reports_reach_the_database_after_a_restart(self):
        self.start_agent(health_grace=3)
        self.wait_for_guest('1.0.0')
        self.wait_for_log('Registered with the conductor')
        upgrade = self.create_upgrade('2.0.0')
        self.wait_for(
            lambda: (self.journal()['current_upgrade'] or {}).get('step')
            in ('installing', 'switching', 'restarting'),
            'the upgrade to reach the install step')
        self.node.stop()
        self.wait_for(
            lambda: self.journal()['processed'].get(upgrade['id']),
            'the agent to finish the upgrade offline')
        self.assertIn(states.SUCCESS,
                      [r['to_state'] for r in self.journal()['outbox']])
        self.assertNotEqual(states.SUCCESS,
                            self.get_upgrade(upgrade['id'])['status'])
        self.node.start()
        back = time.monotonic()
        done = self.wait_for_status(upgrade['id'], states.FINAL_STATES)
        # Information for whoever reads the run, never asserted.
        self.addDetail('seconds-from-broker-back-to-database',
                       content.text_content('%.1f' % (time.monotonic()
                                                      - back)))
        self.assertEqual(states.SUCCESS, done['status'])
        self.wait_for_outbox_empty()
