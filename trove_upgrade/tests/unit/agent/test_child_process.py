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

"""Real children that flood their output, hang, or leave helpers behind."""

import os
import sys
import time
import tracemalloc
from unittest import mock

import fixtures

from trove_upgrade.agent import child_process
from trove_upgrade.tests import base

MIB = 1 << 20
# Far below what the flooding children write: the call keeps a tail, a
# head and one read's worth, whatever the child writes.
MEMORY_BOUND = 2 * MIB


def _python(code):
    return [sys.executable, '-c', code]


# Writes its pid and its helper's into argv[1], then runs argv[2] as code.
_WITH_HELPER = '''
import os, subprocess, sys, time
helper = subprocess.Popen([sys.executable, "-c",
                           "import time; time.sleep(600)"]{helper_output})
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write("%d %d" % (os.getpid(), helper.pid))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
{then}
'''


class TestChildProcess(base.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.pid_file = os.path.join(self.tmp, 'pids')

    def pids(self):
        with open(self.pid_file) as f:
            return [int(p) for p in f.read().split()]

    def run_with_helper(self, then, timeout, helper_output=''):
        code = _WITH_HELPER.format(then=then, helper_output=helper_output)
        return child_process.run(_python(code) + [self.pid_file], timeout)

    def measured(self, *args, **kwargs):
        """``run(*args, **kwargs)`` and the peak memory it allocated."""
        tracemalloc.start()
        try:
            result = child_process.run(*args, **kwargs)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        return result, peak

    def test_a_flood_on_both_streams_keeps_bounded_ends(self):
        # 100 MiB on each stream, interleaved: a reader of one stream
        # only would leave the child blocked on the other until timeout.
        code = ('import os\n'
                'os.write(1, b"first line\\n")\n'
                'chunk = b"x" * %d\n'
                'for _ in range(100):\n'
                '    os.write(1, chunk); os.write(2, chunk)\n'
                'os.write(1, b"stdout ends\\n"); os.write(2, b"stderr ends")\n'
                'raise SystemExit(3)\n' % MIB)
        result, peak = self.measured(_python(code), 300, head=64)

        self.assertEqual(3, result.returncode)
        self.assertEqual(100 * MIB + 23, result.stdout.size)
        self.assertEqual(100 * MIB + 11, result.stderr.size)
        self.assertTrue(result.stdout.head.startswith('first line\nxxx'))
        self.assertEqual(64, len(result.stdout.head))
        self.assertFalse(result.stdout.complete)
        self.assertTrue(result.stdout.tail.endswith('xxxstdout ends\n'))
        self.assertTrue(result.stderr.tail.endswith('xxxstderr ends'))
        self.assertEqual(child_process.TAIL_BYTES, len(result.stdout.tail))
        self.assertEqual(child_process.TAIL_BYTES, len(result.stderr.tail))
        self.assertLess(peak, MEMORY_BOUND)

    def test_endless_output_without_newline_times_out_bounded(self):
        code = ('import os, sys\n'
                'open(sys.argv[1], "w").write(str(os.getpid()))\n'
                'chunk = b"y" * 65536\n'
                'while True:\n'
                '    os.write(1, chunk)\n')
        tracemalloc.start()
        try:
            error = self.assertRaises(
                child_process.ChildTimeoutError, child_process.run,
                _python(code) + [self.pid_file], 2, merge_stderr=True)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        self.assertEqual('%s did not finish within 2s'
                         % os.path.basename(sys.executable), str(error))
        self.assertLess(peak, MEMORY_BOUND)
        self.assertProcessesDie(self.pids())

    def test_a_helper_holding_the_output_is_killed_on_timeout(self):
        # The child exits at once; its helper keeps stdout open, so the
        # output never ends: subprocess.run would leave the helper running.
        self.assertRaises(child_process.ChildTimeoutError,
                          self.run_with_helper, 'print("started")', 2)
        self.assertProcessesDie(self.pids())

    def test_a_hanging_child_and_its_helper_are_killed_on_timeout(self):
        self.assertRaises(
            child_process.ChildTimeoutError, self.run_with_helper,
            'time.sleep(600)', 2,
            helper_output=', stdout=subprocess.DEVNULL')
        self.assertProcessesDie(self.pids())

    def test_a_helper_left_behind_is_killed_when_the_child_exits(self):
        result = self.run_with_helper(
            'print("done")', 60,
            helper_output=', stdout=subprocess.DEVNULL, '
                          'stderr=subprocess.DEVNULL')
        self.assertEqual(0, result.returncode)
        self.assertEqual('done\n', result.stdout.tail)
        self.assertProcessesDie(self.pids())

    def test_an_exception_in_the_caller_kills_the_child_and_helper(self):
        def interrupted(streams, deadline):
            while not os.path.exists(self.pid_file):
                time.sleep(0.05)
            raise KeyboardInterrupt

        with mock.patch.object(child_process, '_read', interrupted):
            self.assertRaises(KeyboardInterrupt, self.run_with_helper,
                              'time.sleep(600)', 60)
        self.assertProcessesDie(self.pids())

    def test_a_closed_output_is_not_the_end_of_a_running_child(self):
        code = 'import os, time; os.close(1); os.close(2); time.sleep(600)'
        self.assertRaises(child_process.ChildTimeoutError, child_process.run,
                          _python(code), 1)

    def test_stderr_merged_into_stdout(self):
        code = ('import os; os.write(1, b"out "); os.write(2, b"err")')
        result = child_process.run(_python(code), 60, merge_stderr=True)
        self.assertEqual('out err', result.stdout.tail)
        self.assertEqual(0, result.stderr.size)

    def test_text_is_printable(self):
        code = ('import os\n'
                'os.write(1, b"\\x1b[31mred\\x00\\xff" '
                'b"\\tdone\\r\\n\\xc2\\x85")')
        result = child_process.run(_python(code), 60, head=100)
        expected = '?[31mred?\ufffd\tdone\n\n?'
        self.assertEqual(expected, result.stdout.tail)
        self.assertEqual(expected, result.stdout.head)
        self.assertTrue(result.stdout.complete)

    def test_env_and_cwd_reach_the_child(self):
        code = 'import os; print(os.getcwd(), os.environ["PHASE"])'
        result = child_process.run(_python(code), 60, cwd=self.tmp,
                                   env={'PHASE': 'preflight'})
        self.assertEqual('%s preflight\n' % os.path.realpath(self.tmp),
                         result.stdout.tail)

    def test_child_runs_in_a_session_of_its_own(self):
        code = 'import os; print(os.getsid(0) == os.getpid())'
        result = child_process.run(_python(code), 60)
        self.assertEqual('True\n', result.stdout.tail)

    def test_missing_program_is_an_os_error(self):
        self.assertRaises(OSError, child_process.run,
                          [os.path.join(self.tmp, 'missing')], 60)
