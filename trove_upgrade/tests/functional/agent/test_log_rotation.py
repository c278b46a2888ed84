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

"""The agent's log file stays bounded on the guest's disk.

A process of its own sets up logging with the agent's entry point, from
a configuration file that names only the log file and its limits, as an
operator's would, then forks a worker, as oslo.service's launcher does,
which logs far more than the limits hold; both processes write the file.
"""

import glob
import os
import subprocess
import sys

import fixtures

from tools.testbed import conffile
from trove_upgrade.tests import base

MIB = 1024 * 1024
RECORD = 1000
# Lines of RECORD bytes and a prefix: over 4 MiB, more than the three
# files of 1 MiB the first test allows hold, so the oldest rotate away.
RECORDS = 4 * MIB // RECORD

_WORKLOAD = '''
import os, sys
from oslo_log import log as logging
from trove_upgrade.cmd import agent
agent.parse_config(['--config-file', sys.argv[1]])
LOG = logging.getLogger('trove_upgrade.agent.service')
LOG.info('launcher started')
pid = os.fork()
if pid == 0:
    for i in range(int(sys.argv[2])):
        LOG.info('record %%d %%s', i, 'x' * %d)
    os._exit(0)
os.waitpid(pid, 0)
LOG.info('worker exited')
''' % RECORD


class TestAgentLogRotation(base.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.log_file = os.path.join(self.dir, 'trove-upgrade-agent.log')

    def run_agent_logging(self, **defaults):
        path = os.path.join(self.dir, 'agent.conf')
        conffile.write_conf(path, {'DEFAULT': dict(
            log_file=self.log_file, **defaults)})
        subprocess.run([sys.executable, '-c', _WORKLOAD, path,
                        str(RECORDS)], check=True, capture_output=True)
        return sorted(glob.glob(self.log_file + '*'))

    def last_record(self, path):
        with open(path) as f:
            return f.read().splitlines()[-1]

    def test_rotated_by_size_without_being_told(self):
        files = self.run_agent_logging(max_logfile_size_mb=1,
                                       max_logfile_count=2)
        self.assertEqual(
            [self.log_file, self.log_file + '.1', self.log_file + '.2'],
            files)
        with open(self.log_file) as f:
            longest = max(len(line) + 1 for line in f)
        for path in files:
            self.assertLessEqual(os.path.getsize(path), MIB + longest, path)
        # The oldest went, the newest stayed: the log is still written.
        # (The parent's last line went to the file it opened first, which
        # the worker rotated away: see the agent guide, Logs.)
        self.assertIn('record %d ' % (RECORDS - 1),
                      self.last_record(self.log_file))

    def test_an_operator_can_turn_rotation_off(self):
        files = self.run_agent_logging(log_rotation_type='none',
                                       max_logfile_size_mb=1)
        self.assertEqual([self.log_file], files)
        self.assertGreater(os.path.getsize(self.log_file), 4 * MIB)
