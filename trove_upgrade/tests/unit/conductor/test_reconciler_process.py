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

"""The forked reconciler process ends on SIGTERM, whenever it comes.

Its passes are replaced by a fake that reports to the test through a pipe,
so that the process's own loop and signal handling are what run.
"""

import os
import signal
from unittest import mock

from trove_upgrade.common import rpc
from trove_upgrade.conductor import reconciler
from trove_upgrade.services import held_upgrades
from trove_upgrade.services import resends
from trove_upgrade.tests import base

# A hang detector, not a timing: a process that ends does so at once.
HANG_TIMEOUT = 60


class _FakeReconciler:
    """Writes each pass's view of SIGTERM, then waits for the test's go."""

    owner = 'test:fake'

    def __init__(self, report, gate):
        self.report = report
        self.gate = gate
        self.agent_api = None

    def run(self, context):
        handler = signal.getsignal(signal.SIGTERM)
        blocked = signal.SIGTERM in signal.pthread_sigmask(
            signal.SIG_BLOCK, [])
        os.write(self.report, b'pass handler=%s blocked=%s\n' % (
            b'default' if handler == signal.SIG_DFL else b'python',
            str(blocked).encode()))
        os.read(self.gate, 1)


class TestReconcilerProcess(base.TestCase):

    def start(self, interval):
        self.flags(rollout_interval=interval, group='conductor')
        report_r, report_w = os.pipe()
        gate_r, gate_w = os.pipe()
        for fd in (report_r, report_w, gate_r, gate_w):
            self.addCleanup(os.close, fd)
        fake = _FakeReconciler(report_w, gate_r)
        for target, name in ((reconciler, 'Reconciler'),
                             (held_upgrades, 'send_held_upgrades'),
                             (resends, 'send_unclaimed_upgrades'),
                             (rpc, 'cleanup')):
            patcher = mock.patch.object(
                target, name, (lambda host: fake) if name == 'Reconciler'
                else (lambda *args: None))
            patcher.start()
            self.addCleanup(patcher.stop)
        process = reconciler.start_process('host-a')
        self.addCleanup(self._reap, process)
        return process, report_r, gate_w

    def _reap(self, process):
        if process.is_alive():
            process.kill()
        process.join()

    def reports(self, report):
        """What the passes have written so far, without waiting."""
        os.set_blocking(report, False)
        try:
            return os.read(report, 4096)
        except BlockingIOError:
            return b''
        finally:
            os.set_blocking(report, True)

    def assertEnds(self, process):
        process.join(HANG_TIMEOUT)
        self.assertFalse(process.is_alive(), 'the reconciler did not end')
        self.assertEqual(0, process.exitcode)

    def test_sigterm_during_a_pass_ends_it_after_the_pass(self):
        process, report, gate = self.start(interval=0.1)
        # No Python handler runs on SIGTERM: one that set an Event could
        # run while the loop's wait on it held its lock, and hang there.
        self.assertEqual(b'pass handler=default blocked=True\n',
                         os.read(report, 4096))
        os.kill(process.pid, signal.SIGTERM)
        os.kill(process.pid, signal.SIGTERM)
        # Enough for a second pass, which must not begin.
        os.write(gate, b'go')
        self.assertEnds(process)
        self.assertEqual(b'', self.reports(report))

    def test_sigterm_between_passes_ends_it_without_a_pass(self):
        process, report, gate = self.start(interval=3600)
        os.kill(process.pid, signal.SIGTERM)
        self.assertEnds(process)
        self.assertEqual(b'', self.reports(report))
