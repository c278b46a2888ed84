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

"""An upgrade downloaded over HTTPS from a server with its own CA.

The transfer of the payload is broken once halfway: the ``http`` strategy
resumes it with ``Range`` and the agent installs what it verified.
"""

from trove_upgrade.common import states
from trove_upgrade.tests.functional.agent import harness


class TestHttpsUpgrade(harness.AgentTestCase):

    def test_upgrade_over_https_with_a_broken_transfer(self):
        server, size = self.serve_over_https('guest-2.0.0.pkg')
        # The fault counts requests: the agent's HEAD (the reachability
        # check) takes the first, the first GET the second.
        server.drop_after('guest-2.0.0.pkg', size // 2, times=2)
        self.start_agent(allowed_strategies=['http', 'local'],
                         download_retries=2, download_retry_delay=0)
        self.wait_for_guest('1.0.0')
        upgrade = self.create_upgrade(
            '2.0.0', location=server.url('guest-2.0.0.pkg'), strategy='http')
        done = self.wait_for_status(upgrade['id'], states.FINAL_STATES)
        self.assertEqual(states.SUCCESS, done['status'], done['events'])
        self.assertEqual('2.0.0', self.running_guest_version())
        ranges = [r for m, name, r in server.requests
                  if m == 'GET' and name == 'guest-2.0.0.pkg']
        self.assertEqual([None, 'bytes=%d-' % (size // 2)], ranges,
                         server.requests)
