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

"""A store that hangs holds one download, never the agent's messages.

A real loopback server accepts the agent's connection and answers nothing
until the test lets it go, far inside ``[agent] download_timeout``: the
next upgrade message is accepted (queued in the journal) while the first
upgrade's store still hangs, and runs once the hung one fails.
"""

import threading

from trove_upgrade.common import states
from trove_upgrade.tests.functional.agent import harness
from trove_upgrade.tests.functional import hostile_http
from trove_upgrade.tests.functional import servers


class TestSlowStore(harness.AgentTestCase):

    def test_next_upgrade_is_accepted_while_a_store_hangs(self):
        release = threading.Event()
        asked = threading.Event()

        def stall(conn, request, number):
            asked.set()
            release.wait()

        server = self.useFixture(hostile_http.HostileHttpServer(stall))
        # Runs before the server's cleanup: its thread must end.
        self.addCleanup(release.set)
        servers.write_strategy_conf(self.strategy_dir, 'http',
                                    {'allow_insecure_http': True})
        # Far longer than the test waits: only what the agent does
        # meanwhile can let the second message in.
        self.start_agent(allowed_strategies=['http', 'local'],
                         download_timeout=3600, download_retries=0)
        self.wait_for_guest('1.0.0')
        hung = self.create_upgrade('2.0.0', strategy='http',
                                   location=server.url('guest-2.0.0.pkg'))
        self.wait_for(asked.is_set, 'the agent to ask the hanging store')
        second = self.create_upgrade('2.0.0')
        self.wait_for(
            lambda: second['id'] in [u['id'] for u in
                                     self.journal()['queue']],
            'the second upgrade to be accepted while the store hangs')
        self.assertFalse(release.is_set())
        self.assertEqual(states.DOWNLOADING,
                         self.get_upgrade(hung['id'])['status'])

        release.set()
        failed = self.wait_for_status(hung['id'], states.FINAL_STATES)
        self.assertEqual(states.FAILED, failed['status'])
        self.assertIn('download failed', failed['events'][-1]['detail'])
        done = self.wait_for_status(second['id'], states.FINAL_STATES)
        self.assertEqual(states.SUCCESS, done['status'], done['events'])
        self.assertEqual('2.0.0', self.running_guest_version())
