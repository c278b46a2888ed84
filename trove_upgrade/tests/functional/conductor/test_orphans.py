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

"""No conductor process outlives the process that started it.

The conductor console script is a launcher (master) process that forks the
service into a worker, and the worker forks the rollout reconciler. These
tests SIGKILL parts of that tree of real processes, on their own and under
a real service manager (supervisor's ``supervisord``; this machine runs no
systemd), and check that no process of a killed tree stays behind.
"""

import os
import signal
import subprocess
import sys

from tools.testbed import conffile
from trove_upgrade.tests.functional.conductor import test_conductor_process

wait_until = test_conductor_process.wait_until
SUPERVISORD = os.path.join(os.path.dirname(sys.executable), 'supervisord')
RECONCILER_TITLE = b'rollout reconciler'


def _stat(pid):
    """(state, ppid) of ``pid``, or None once it is gone or a zombie."""
    try:
        with open('/proc/%d/stat' % pid, 'rb') as f:
            fields = f.read().rsplit(b')', 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    if fields[0] in (b'Z', b'X'):
        return None
    return fields[0], int(fields[1])


def alive(pid):
    return _stat(pid) is not None


def children(pid):
    found = []
    for name in os.listdir('/proc'):
        if name.isdigit():
            stat = _stat(int(name))
            if stat is not None and stat[1] == pid:
                found.append(int(name))
    return found


def is_reconciler(pid):
    try:
        with open('/proc/%d/cmdline' % pid, 'rb') as f:
            return RECONCILER_TITLE in f.read()
    except FileNotFoundError:
        return False


class TestNoOrphans(test_conductor_process.ConductorProcessTestCase):

    def tree(self, master):
        """(worker, reconciler) of the launcher ``master``, once both run."""
        def find():
            for worker in children(master):
                reconcilers = [p for p in children(worker)
                               if is_reconciler(p)]
                if reconcilers:
                    return worker, reconcilers[0]
        return wait_until(find, 'a worker with its reconciler')

    def assert_all_end(self, pids, what):
        wait_until(lambda: not any(alive(p) for p in pids), what)

    def test_reconciler_ends_with_its_killed_worker(self):
        process = self.start_conductor()
        worker, reconciler = self.tree(process.pid)
        os.kill(worker, signal.SIGKILL)
        self.assert_all_end([reconciler],
                            'the reconciler to end with its worker')
        # The launcher replaces the worker; the new one has its own.
        new_worker, new_reconciler = self.tree(process.pid)
        self.assertNotIn(new_worker, (worker, reconciler))
        self.assertNotIn(new_reconciler, (worker, reconciler))

    def test_killed_launcher_leaves_nothing(self):
        process = self.start_conductor()
        worker, reconciler = self.tree(process.pid)
        process.kill()
        process.wait()
        self.assert_all_end([worker, reconciler],
                            'the worker and reconciler to end')

    def test_launcher_and_worker_killed_at_once_leave_nothing(self):
        process = self.start_conductor()
        worker, reconciler = self.tree(process.pid)
        os.kill(worker, signal.SIGKILL)
        process.kill()
        process.wait()
        self.assert_all_end([reconciler], 'the reconciler to end')

    def test_killed_launcher_under_supervisord_leaves_nothing(self):
        command = self.conductor_command()
        conf_path = os.path.join(self.tmp, 'supervisord.conf')
        conffile.write_conf(conf_path, {
            'supervisord': {
                'nodaemon': 'true',
                'logfile': os.path.join(self.tmp, 'supervisord.log'),
                'pidfile': os.path.join(self.tmp, 'supervisord.pid'),
                'childlogdir': self.tmp},
            'unix_http_server': {
                'file': os.path.join(self.tmp, 'supervisor.sock')},
            'rpcinterface:supervisor': {
                'supervisor.rpcinterface_factory':
                    'supervisor.rpcinterface:make_main_rpcinterface'},
            'program:conductor': {
                'command': ' '.join(command),
                'autorestart': 'true',
                'startsecs': '1',
                'stopsignal': 'TERM',
                'stopwaitsecs': '30',
                'redirect_stderr': 'true',
                'stdout_logfile': os.path.join(self.tmp, 'conductor.out')}})
        manager = subprocess.Popen(
            [SUPERVISORD, '-c', conf_path], stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
            start_new_session=True)
        self.addCleanup(self._stop_manager, manager)
        master = wait_until(lambda: (children(manager.pid) or [None])[0],
                            'supervisord to start the conductor')
        worker, reconciler = self.tree(master)
        os.kill(master, signal.SIGKILL)
        self.assert_all_end([master, worker, reconciler],
                            'the killed tree to end')
        # supervisord starts a new conductor, with a tree of its own.
        new_master = wait_until(
            lambda: [p for p in children(manager.pid) if p != master],
            'supervisord to restart the conductor')[0]
        new_tree = self.tree(new_master)
        self._stop_manager(manager)
        self.assert_all_end([new_master] + list(new_tree),
                            'the conductor to stop with supervisord')

    @staticmethod
    def _stop_manager(manager):
        if manager.poll() is None:
            manager.send_signal(signal.SIGTERM)
            try:
                manager.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(manager.pid, signal.SIGKILL)
                manager.wait()
