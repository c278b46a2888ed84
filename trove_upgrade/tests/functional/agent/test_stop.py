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

"""SIGTERM of the agent in the middle of a download, then a restart.

The package's server hangs halfway through the payload, and every timeout
that could end the download or the stop (``download_timeout``,
``download_step_timeout``, ``graceful_shutdown_timeout``) is far longer
than the test waits: only the stop itself can end the download in time.
The next agent takes the upgrade up from its journal and finishes it.
"""

import signal
import subprocess

from trove_upgrade.common import states
from trove_upgrade.tests.functional.agent import harness

# Seconds each timeout allows: a stop that waited for one fails the test.
LONG = 900
# Seconds the test waits for the agent to exit, well within LONG.
EXIT_WAIT = harness.WAIT


class TestStopDuringDownload(harness.AgentTestCase):

    def test_sigterm_mid_download_exits_then_the_next_start_upgrades(self):
        server, size = self.serve_over_https('guest-2.0.0.pkg')
        # The agent's HEAD (the reachability check) takes the first, the
        # GET of the payload the second.
        server.stall_after('guest-2.0.0.pkg', size // 2, times=2)
        timeouts = dict(allowed_strategies=['http', 'local'],
                        download_timeout=LONG, download_step_timeout=LONG,
                        defaults={'graceful_shutdown_timeout': LONG})
        agent = self.start_agent(**timeouts)
        self.wait_for_guest('1.0.0')
        upgrade = self.create_upgrade(
            '2.0.0', location=server.url('guest-2.0.0.pkg'), strategy='http')
        self.wait_for(server.stalled.is_set, 'the download to stall')

        agent.send_signal(signal.SIGTERM)
        try:
            agent.wait(EXIT_WAIT)
        except subprocess.TimeoutExpired:
            self.fail('the agent did not exit within %d s of SIGTERM, with '
                      'graceful_shutdown_timeout = %d:\n%s'
                      % (EXIT_WAIT, LONG, self._log('agent')))
        self.assertIn('Upgrade %s left at step downloading, the next start '
                      'takes it up: the download step was stopped: the '
                      'agent stops' % upgrade['id'], self._log_all('agent'))
        self.assertEqual('downloading',
                         self.journal()['current_upgrade']['step'])
        self.assertEqual(states.DOWNLOADING,
                         self.get_upgrade(upgrade['id'])['status'])
        server.released.set()

        self.start_agent(**timeouts)
        done = self.wait_for_status(upgrade['id'], states.FINAL_STATES)
        self.assertEqual(states.SUCCESS, done['status'], done['events'])
        self.wait_for_guest('2.0.0')
        self.assertEqual(
            [None, None],
            [r for m, name, r in server.requests
             if m == 'GET' and name == 'guest-2.0.0.pkg'], server.requests)
