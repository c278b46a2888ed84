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

"""The child-process runner of the untrusted steps, with real processes."""

import errno
import json
import os
import stat
import subprocess
import sys
import threading
import time
from unittest import mock

import fixtures

from trove_upgrade.agent.strategies import exception as strategy_exc
from trove_upgrade.agent import untrusted
from trove_upgrade.common import exception as package_exc
from trove_upgrade.tests import base


class TestDescribe(base.TestCase):

    def test_each_kind_of_error_reads_as_a_bounded_reason(self):
        cases = [
            (strategy_exc.DownloadError(location='x', strategy='s',
                                        attempts=1, reason='r'),
             'download failed'),
            (package_exc.RollbackError('older'),
             'package rejected: RollbackError: older'),
            (OSError(28, 'No space left on device'), 'No space left'),
            (ValueError('v' * 100000), 'internal error: ValueError'),
        ]
        for error, expected in cases:
            reason = untrusted.describe(error)
            self.assertIn(expected, reason)
            self.assertLessEqual(len(reason),
                                 package_exc.MAX_MESSAGE_LENGTH)


class TestChildProcessSteps(base.TestCase):

    def setUp(self):
        super().setUp()
        self.work = self.useFixture(fixtures.TempDir()).path
        self.steps = untrusted.ChildProcessSteps(self.conf)
        self.upgrade = {'id': 'u1', 'strategy': 'local',
                        'location': '/nowhere', 'to_version': '2.0.0',
                        'from_version': '1.0.0'}

    def run_child(self, script, timeout=60):
        """Run ``script`` as the child instead of the real module."""
        self.useFixture(fixtures.MockPatch(
            'trove_upgrade.agent.untrusted.sys.executable', sys.executable))
        argv = [sys.executable, '-c', script]
        real_popen = subprocess.Popen

        def popen(args, **kwargs):
            return real_popen(argv, **kwargs)

        self.useFixture(fixtures.MockPatch(
            'trove_upgrade.agent.untrusted.subprocess.Popen', popen))
        return self.steps._run('download', self.upgrade, self.work, timeout)

    def test_result_of_the_child_is_returned(self):
        result = self.run_child(
            'import json, sys\n'
            'r = json.load(sys.stdin)\n'
            'open(r["result"], "w").write(\n'
            '    json.dumps({"ok": {"size": 7, "kept": 2}}))\n')
        self.assertEqual({'size': 7, 'kept': 2}, result)
        self.assertEqual([untrusted.UNTRUSTED_DIR], os.listdir(self.work))
        self.assertEqual([], os.listdir(
            os.path.join(self.work, untrusted.UNTRUSTED_DIR)))

    def test_refusal_of_the_child_is_a_step_failure(self):
        error = self.assertRaises(
            untrusted.StepError, self.run_child,
            'import json, sys\n'
            'r = json.load(sys.stdin)\n'
            'open(r["result"], "w").write(json.dumps({"failed": "no"}))\n')
        self.assertEqual('no', str(error))

    def test_child_dying_without_a_result_fails(self):
        error = self.assertRaises(untrusted.StepError, self.run_child,
                                  'import os; os._exit(3)')
        self.assertIn('without a result (exit status 3)', str(error))

    def test_child_without_room_for_its_result_says_the_disk_is_full(self):
        with mock.patch.object(os, 'statvfs',
                               return_value=mock.Mock(f_bavail=0)):
            error = self.assertRaises(untrusted.StepError, self.run_child,
                                      'import os; os._exit(1)')
        self.assertEqual('the download step ended without a result (exit '
                         'status 1): no space is left on the file system of '
                         'its work directory', str(error))

    def test_result_not_written_leaves_no_partial_copy(self):
        path = os.path.join(self.work, 'download' + untrusted.RESULT_SUFFIX)
        with mock.patch.object(os, 'fsync', side_effect=OSError(
                errno.ENOSPC, 'No space left on device')):
            self.assertRaises(OSError, untrusted._write_result, path,
                              {'ok': {}})
        self.assertEqual([], os.listdir(self.work))

    def test_result_never_follows_a_symlink_at_its_temporary_name(self):
        # open(tmp, 'w') wrote the result through the link, wherever it
        # pointed.
        path = os.path.join(self.work, 'download' + untrusted.RESULT_SUFFIX)
        victim = os.path.join(self.work, 'victim')
        with open(victim, 'w') as f:
            f.write('untouched')
        os.symlink(victim, path + '.tmp')

        untrusted._write_result(path, {'ok': {'size': 1, 'kept': 0}})

        with open(victim) as f:
            self.assertEqual('untouched', f.read())
        self.assertFalse(os.path.islink(path))
        self.assertEqual({'size': 1, 'kept': 0},
                         untrusted._read_result(path, 'download', 0))
        self.assertEqual(['victim'], os.listdir(self.work))

    def test_result_name_is_made_durable(self):
        # Without the directory's fsync, a crash could lose the rename.
        synced = []
        real_fsync = os.fsync

        def fsync(fd):
            synced.append(os.fstat(fd).st_mode)
            real_fsync(fd)
        path = os.path.join(self.work, 'verify' + untrusted.RESULT_SUFFIX)
        with mock.patch.object(os, 'fsync', fsync):
            untrusted._write_result(path, {'ok': {}})
        self.assertTrue(any(map(stat.S_ISDIR, synced)), synced)

    def test_hanging_child_and_its_helpers_are_killed(self):
        pid_file = os.path.join(self.work, 'helper.pid')
        error = self.assertRaises(
            untrusted.StepError, self.run_child,
            'import subprocess, sys, time\n'
            'p = subprocess.Popen([sys.executable, "-c", '
            '"import time; time.sleep(600)"])\n'
            'open(%r, "w").write(str(p.pid))\n'
            'while True: pass\n' % pid_file, timeout=5)
        self.assertIn('did not finish in 5s', str(error))
        with open(pid_file) as f:
            helper = int(f.read())
        for _ in range(100):
            if not os.path.exists('/proc/%d' % helper) or open(
                    '/proc/%d/stat' % helper).read().split()[2] == 'Z':
                break
            time.sleep(0.1)
        else:
            self.fail('the helper of the killed child still runs')

    def test_oversized_or_garbage_result_fails(self):
        error = self.assertRaises(
            untrusted.StepError, self.run_child,
            'import json, sys\n'
            'r = json.load(sys.stdin)\n'
            'open(r["result"], "w").write("[1, 2")\n')
        self.assertIn('without a result', str(error))

    def test_result_of_another_shape_or_nested_deep_fails(self):
        """A child the package subverted answers what the parent reads."""
        for written in ('{"ok": {}}', '{"ok": {"size": "7"}}',
                        '{"ok": {"size": true}}',
                        '{"ok": {"size": 7, "extra": 1}}',
                        '{"ok": ' + '[' * 100000 + ']' * 100000 + '}'):
            error = self.assertRaises(
                untrusted.StepError, self.run_child,
                'import json, sys\n'
                'r = json.load(sys.stdin)\n'
                'open(r["result"], "w").write(%r)\n' % written)
            self.assertIn('without a result', str(error))

    def test_a_long_refusal_is_bounded(self):
        error = self.assertRaises(
            untrusted.StepError, self.run_child,
            'import json, sys\n'
            'r = json.load(sys.stdin)\n'
            'open(r["result"], "w").write(json.dumps({"failed": "n" * '
            '500000}))\n')
        self.assertLessEqual(len(str(error)), package_exc.MAX_MESSAGE_LENGTH)

    def test_request_names_the_config_and_the_parent(self):
        # Told back through a refusal: a result has the step's shape only.
        error = self.assertRaises(
            untrusted.StepError, self.run_child,
            'import json, os, sys\n'
            'r = json.load(sys.stdin)\n'
            'ok = r["parent"] == os.getppid() and r["step"] == "download"\n'
            'open(r["result"], "w").write(json.dumps({"failed": json.dumps('
            '{"seen": ok, "config": r["config"]})}))\n')
        result = json.loads(str(error))
        self.assertTrue(result['seen'])
        self.assertEqual(untrusted._config_args(self.conf),
                         result['config'])

    def test_stop_kills_the_step_in_hand(self):
        started = os.path.join(self.work, 'started')

        def stop_once_started():
            while not os.path.exists(started):
                time.sleep(0.05)
            self.steps.stop()
        stopper = threading.Thread(target=stop_once_started)
        stopper.start()
        self.addCleanup(stopper.join)
        # A deadline no test waits for: only the stop ends the child.
        error = self.assertRaises(
            untrusted.StepStopped, self.run_child,
            'import time\n'
            'open(%r, "w").close()\n'
            'time.sleep(3600)\n' % started, timeout=3600)
        self.assertEqual('the download step was stopped: the agent stops',
                         str(error))

    def test_no_step_starts_once_stopped(self):
        started = os.path.join(self.work, 'started')
        self.steps.stop()
        self.assertRaises(untrusted.StepStopped, self.run_child,
                          'open(%r, "w").close()\n' % started)
        self.assertFalse(os.path.exists(started))
