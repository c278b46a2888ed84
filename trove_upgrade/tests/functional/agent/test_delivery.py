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

"""Upgrades sent right after a broker restart reach their agent.

The agents' queues are not durable: after a RabbitMQ restart an agent's
queue is gone until the agent reconnects and declares it again, and a cast
sent meanwhile finds no queue. The test makes that window certain rather
than likely: it freezes the agent (SIGSTOP) before it restarts its own
RabbitMQ node, sends the upgrades once the node is back, and lets the
agent go on only then. RabbitMQ returns every cast; the conductor sends
each again until the agent claims it. The upgrades ask for the version
already running, which the agent claims and ends SUCCESS at once: what
is tested is that each reaches the agent, not the install.
"""

import os
import signal

from oslo_utils import timeutils
from testtools import content

from trove_upgrade.common import states
from trove_upgrade.services import resends
from trove_upgrade.tests.functional.agent import harness
from trove_upgrade.tests.functional import rabbit_node


class TestDeliveryAfterBrokerRestart(harness.AgentTestCase):

    # Nothing to install: see the module's docstring.
    packages = {}

    def broker_url(self):
        self.node = self.useFixture(rabbit_node.RabbitMQNode())
        return self.node.url

    # Short waits keep the test short; the defaults are 10 s doubling up
    # to 300 s.
    RESENDS = {'resend_interval': 1, 'resend_max_interval': 2}

    def conductor_conf(self):
        conf = super().conductor_conf()
        conf['conductor'].update(self.RESENDS, rollout_interval=0.5)
        return conf

    def signal_agent(self, signum):
        os.killpg(self.processes['agent'].pid, signum)

    def claimed_at(self, upgrade):
        return next(e['created_at'] for e in upgrade['events']
                    if e['source'] == 'agent')

    def test_upgrades_sent_before_the_agent_is_back_reach_it(self):
        # This process sends the upgrades, as the API would, and so sets
        # when they are first sent again.
        self.flags(group='conductor', **self.RESENDS)
        self.start_agent()
        self.wait_for_guest(self.initial_version)
        self.wait_for_log('Registered with the conductor')
        self.signal_agent(signal.SIGSTOP)
        self.addCleanup(self.signal_agent, signal.SIGCONT)
        self.node.restart()
        broker_back = timeutils.utcnow()
        # Checked for existence only: the version runs already.
        open(os.path.join(self.repo, 'guest-%s.pkg' % self.initial_version),
             'wb').close()
        sent = [self.create_upgrade(self.initial_version)
                for _ in range(3)]
        # No queue took them: they were not delivered, and say so.
        self.assertEqual([(states.SENT, resends.RETURNED)] * 3,
                         [(u['status'], u['status_detail']) for u in sent])
        self.signal_agent(signal.SIGCONT)
        agent_back = timeutils.utcnow()
        done = [self.wait_for_status(u['id'], states.FINAL_STATES)
                for u in sent]
        self.assertEqual([states.SUCCESS] * 3, [u['status'] for u in done],
                         [u['status_detail'] for u in done])
        for upgrade in done:
            history = [(e['source'], e['from_state'], e['to_state'])
                       for e in upgrade['events']]
            # Sent again by the conductor, then claimed by the agent.
            self.assertIn(('conductor', states.SENT, states.SENT), history)
            self.assertIn(('agent', states.SENT, states.DOWNLOADING),
                          history)
        # Information for whoever reads the run, never asserted.
        last_claim = max(self.claimed_at(u) for u in done)
        for name, since in (('broker', broker_back), ('agent', agent_back)):
            self.addDetail(
                'seconds-from-%s-back-to-the-last-claim' % name,
                content.text_content('%.1f' % (
                    last_claim - since).total_seconds()))
