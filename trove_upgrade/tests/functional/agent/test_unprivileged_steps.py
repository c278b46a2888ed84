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

"""The download step and its clients run as ``[agent] untrusted_user``.

The agent runs as root with the default user, ``nobody``. A real rsync
daemon (with a password, which only root may read) and a real HTTP server
each hold their first request until the test has looked, in ``/proc``, at
every process working in the agent's work directory: the download child,
and the rsync client it started, have nobody's user and group ids, real,
effective, saved and file system alike. Then the upgrade succeeds.
"""

import os
import pwd
import threading

from trove_upgrade.common import states
from trove_upgrade.tests.functional.agent import harness
from trove_upgrade.tests.functional import hostile_http
from trove_upgrade.tests.functional import servers


def _status_fields(pid):
    with open('/proc/%s/status' % pid) as f:
        return dict(line.split(':', 1) for line in f.read().splitlines()
                    if ':' in line)


class TestUnprivilegedSteps(harness.AgentTestCase):

    def setUp(self):
        super().setUp()
        if os.geteuid() != 0:
            self.skipTest('the agent gives up root only when it has it')
        self.nobody = pwd.getpwnam('nobody')

    def step_processes(self):
        """``{pid: (name, uids, gids)}`` working in the agent's work dir."""
        work = os.path.join(self.install_root, 'work') + os.sep
        found = {}
        for pid in filter(str.isdigit, os.listdir('/proc')):
            try:
                if not os.readlink('/proc/%s/cwd' % pid).startswith(work):
                    continue
                fields = _status_fields(pid)
            except OSError:
                continue
            found[pid] = (fields['Name'].strip(), fields['Uid'].split(),
                          fields['Gid'].split())
        return found

    def assert_unprivileged(self, processes):
        for name, uids, gids in processes.values():
            self.assertEqual([str(self.nobody.pw_uid)] * 4, uids, name)
            self.assertEqual([str(self.nobody.pw_gid)] * 4, gids, name)

    def run_upgrade(self, location, strategy):
        return self.create_upgrade('2.0.0', location=location,
                                   strategy=strategy)

    def assert_succeeds(self, upgrade):
        done = self.wait_for_status(upgrade['id'], states.FINAL_STATES)
        self.assertEqual(states.SUCCESS, done['status'], done['events'])
        self.assertEqual('2.0.0', self.running_guest_version())

    def test_rsync_client_runs_unprivileged(self):
        release = os.path.join(self.tmp, 'release')
        gate = os.path.join(self.tmp, 'gate.sh')
        with open(gate, 'w') as f:
            f.write('#!/bin/sh\nwhile [ ! -e %s ]; do sleep 0.1; done\n'
                    % release)
        os.chmod(gate, 0o755)
        daemon = self.useFixture(servers.RsyncDaemon(
            self.repo, user='reader', secret='s3cret', pre_xfer_exec=gate))
        self.addCleanup(lambda: open(release, 'w').close())
        servers.write_strategy_conf(self.strategy_dir, 'rsync',
                                    {'password_file': daemon.password_file()})
        self.start_agent(allowed_strategies=['rsync', 'local'])
        self.wait_for_guest('1.0.0')
        upgrade = self.run_upgrade(daemon.url('guest-2.0.0.pkg'), 'rsync')

        processes = self.wait_for(
            lambda: (lambda found: found if 'rsync' in [
                p[0] for p in found.values()] else None)(
                    self.step_processes()),
            'the download step to run rsync')
        self.assertGreaterEqual(len(processes), 2, processes)
        self.assert_unprivileged(processes)
        fetched = os.path.join(self.install_root, 'work', upgrade['id'],
                               'fetch')
        self.assertEqual(self.nobody.pw_uid, os.stat(fetched).st_uid)

        open(release, 'w').close()
        self.assert_succeeds(upgrade)

    def test_http_client_runs_unprivileged(self):
        release = threading.Event()
        asked = threading.Event()

        def serve_repo(conn, request, number):
            asked.set()
            release.wait()
            method, path = request.split(b' ')[:2]
            with open(os.path.join(self.repo, os.path.basename(
                    path.decode())), 'rb') as f:
                body = f.read()
            headers = ['Content-Length: %d' % len(body), 'Connection: close']
            conn.sendall(hostile_http.response(
                headers=headers, body=b'' if method == b'HEAD' else body))

        server = self.useFixture(hostile_http.HostileHttpServer(serve_repo))
        self.addCleanup(release.set)
        servers.write_strategy_conf(self.strategy_dir, 'http',
                                    {'allow_insecure_http': True})
        self.start_agent(allowed_strategies=['http', 'local'])
        self.wait_for_guest('1.0.0')
        upgrade = self.run_upgrade(server.url('guest-2.0.0.pkg'), 'http')

        self.wait_for(asked.is_set, 'the download step to ask the server')
        processes = self.step_processes()
        self.assertEqual(1, len(processes), processes)
        self.assert_unprivileged(processes)

        release.set()
        self.assert_succeeds(upgrade)
