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

"""The API as real processes on loopback: trove-upgrade-api and gunicorn.

trove-upgrade-api serves with waitress; gunicorn stands for the servers
that production deployments put in front of ``trove_upgrade.wsgi.api``.

Each serves a SQLite database prepared by ``trove-upgrade-manage db sync``
with noauth2 and the fake message driver; the tests talk real HTTP.
"""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import fixtures
import requests

from trove_upgrade.tests import base

BIN = os.path.dirname(sys.executable)
INSTANCE_ID = '3f0c2b5e-7d4a-4c1e-9b8f-2a6d5e4c3b21'
BODY = {'instance_id': INSTANCE_ID, 'instance_version': 'v1.0.1',
        'strategy': 'http', 'location': 'https://127.0.0.1/agent.tar.gz'}
PROJECT = 'demo-project'
HEADERS = {'X-User-Id': 'operator', 'X-Project-Id': PROJECT,
           'X-Roles': 'admin'}


class _ServedAPI(base.TestCase):
    """Prepare a config and a synced database; subclasses start a server."""

    # How the server logs the address it listens on.
    listening = None
    # Whether the server itself refuses a body over [api]
    # max_request_body_size, and one shorter than its Content-Length
    # (waitress: it reads a whole request before the API sees it).
    server_reads_bodies = False

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.log_file = os.path.join(self.dir, 'server.log')
        self.config = os.path.join(self.dir, 'trove-upgrade.conf')
        self.write_config()
        subprocess.run([os.path.join(BIN, 'trove-upgrade-manage'),
                        '--config-file', self.config, 'db', 'sync'],
                       check=True, capture_output=True)

    def write_config(self):
        with open(self.config, 'w') as f:
            f.write('[DEFAULT]\nstate_path = %s\ntransport_url = fake:/\n'
                    '[api]\nauth_strategy = noauth2\nbind_host = 127.0.0.1\n'
                    'bind_port = 0\n'
                    '[conductor]\nrequire_sealed = false\n' % self.dir)

    def start(self, args, env=None):
        log = open(self.log_file, 'w')
        self.addCleanup(log.close)
        # A session of its own: the cleanup kills the launcher and the
        # worker it forks together.
        self.process = subprocess.Popen(
            args, stdout=log, stderr=subprocess.STDOUT, cwd=self.dir,
            env=dict(os.environ, **(env or {})), start_new_session=True)
        self.addCleanup(self._kill)
        self.url = self._wait_for_address()

    def _wait_for_address(self, timeout=60.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with open(self.log_file) as f:
                found = re.search(self.listening, f.read())
            if found:
                return 'http://127.0.0.1:%s' % found.group(1)
            if self.process.poll() is not None:
                break
            time.sleep(0.1)
        with open(self.log_file) as f:
            self.fail('the server did not start:\n' + f.read())

    def _kill(self):
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()

    def assertUpgradeRoundTrip(self):
        mgmt = '%s/v1.0/%s/mgmt' % (self.url, PROJECT)
        resp = requests.post(mgmt + '/upgrades', json=BODY, headers=HEADERS,
                             timeout=30)
        self.assertEqual(202, resp.status_code, resp.text)
        location = resp.headers['Location']
        self.assertEqual(mgmt + '/upgrades/' + resp.json()['upgrade']['id'],
                         location)
        shown = requests.get(location, headers=HEADERS, timeout=30)
        self.assertEqual(200, shown.status_code, shown.text)
        upgrade = shown.json()['upgrade']
        self.assertEqual('SENT', upgrade['status'])
        self.assertEqual(['PENDING', 'SENT'],
                         [e['to_state'] for e in upgrade['events']])
        listed = requests.get(mgmt + '/upgrades', headers=HEADERS,
                              timeout=30)
        self.assertEqual([upgrade['id']],
                         [u['id'] for u in listed.json()['upgrades']])
        missing = requests.get(mgmt + '/nothing', headers=HEADERS,
                               timeout=30)
        self.assertEqual(404, missing.status_code)
        self.assertEqual(missing.headers['x-openstack-request-id'],
                         missing.json()['errors'][0]['request_id'])
        health = requests.get(self.url + '/healthcheck', timeout=30)
        self.assertEqual(200, health.status_code, health.text)
        # Over [api] max_request_body_size, 65536 bytes by default.
        padded = dict(BODY, metadata={'pad': 'x' * 70000})
        too_large = requests.post(mgmt + '/upgrades', headers=HEADERS,
                                  json=padded, timeout=30)
        self.assertEqual(413, too_large.status_code, too_large.text)
        if not self.server_reads_bodies:
            self.assertEqual(413, too_large.json()['errors'][0]['status'])
        not_json = requests.post(mgmt + '/upgrades', headers=HEADERS,
                                 data='instance_id=x', timeout=30)
        self.assertEqual(415, not_json.status_code, not_json.text)
        self.assertMethodsAnswered(mgmt, location)
        self.assertShortBodyRefused(mgmt)
        self.assertEqual([upgrade['id']], [u['id'] for u in requests.get(
            mgmt + '/upgrades', headers=HEADERS,
            timeout=30).json()['upgrades']])

    def assertMethodsAnswered(self, mgmt, location):
        """HEAD as GET without the body, OPTIONS and 405 with Allow."""
        get = requests.get(location, headers=HEADERS, timeout=30)
        head = requests.head(location, headers=HEADERS, timeout=30)
        self.assertEqual(
            (200, get.headers['Content-Length'], b''),
            (head.status_code, head.headers['Content-Length'], head.content))
        for method, url, status, allow in (
                ('OPTIONS', location, 204, 'GET, HEAD, DELETE, OPTIONS'),
                ('OPTIONS', mgmt + '/upgrades', 204,
                 'GET, HEAD, POST, OPTIONS'),
                ('TRACE', location, 405, 'GET, HEAD, DELETE, OPTIONS'),
                ('FOO', location, 405, 'GET, HEAD, DELETE, OPTIONS'),
                ('HEAD', mgmt + '/rollouts/x/pause', 405, 'POST, OPTIONS')):
            resp = requests.request(method, url, headers=HEADERS, timeout=30)
            self.assertEqual((status, allow),
                             (resp.status_code, resp.headers.get('Allow')),
                             (method, url, resp.text))

    def assertShortBodyRefused(self, mgmt):
        """A body the client ends before its Content-Length: 400."""
        host, port = self.url[len('http://'):].split(':')
        head = ''.join('%s: %s\r\n' % item for item in HEADERS.items())
        with socket.create_connection((host, int(port)), timeout=30) as conn:
            conn.sendall(('POST %s/upgrades HTTP/1.1\r\nHost: %s\r\n%s'
                          'Content-Type: application/json\r\n'
                          'Content-Length: 100\r\n\r\n{"instance_id": '
                          % (mgmt[len(self.url):], host, head)).encode())
            conn.shutdown(socket.SHUT_WR)
            answer = b''.join(iter(lambda: conn.recv(65536), b''))
        if self.server_reads_bodies:
            # Never passed on: closed unanswered.
            self.assertEqual(b'', answer)
            return
        status_line, _, rest = answer.partition(b'\r\n')
        self.assertIn(b' 400 ', status_line, answer)
        error, = json.loads(rest.partition(b'\r\n\r\n')[2])['errors']
        self.assertEqual('The request body ended before the 100 bytes its '
                         'Content-Length says.', error['detail'])

    def assertNoEventletWarning(self):
        """eventlet, imported but unused, leaves no warning in the log."""
        with open(self.log_file) as f:
            log = f.read()
        self.assertNotIn('Eventlet is deprecated', log)
        self.assertNotIn('EventletDeprecationWarning', log)


class TestConsoleScript(_ServedAPI):

    listening = r'trove-upgrade-api serving on http://127\.0\.0\.1:(\d+)'
    server_reads_bodies = True

    def setUp(self):
        super().setUp()
        self.start([os.path.join(BIN, 'trove-upgrade-api'),
                    '--config-file', self.config,
                    '--log-file', self.log_file])

    def test_post_and_get_over_http(self):
        self.assertUpgradeRoundTrip()
        self.assertNoEventletWarning()

    def test_sigterm_stops_it_cleanly(self):
        # The session keeps its connection open: stopping must close it
        # rather than wait [api] client_socket_timeout for the client.
        session = requests.Session()
        self.addCleanup(session.close)
        for _ in range(2):
            resp = session.get(self.url + '/', timeout=30)
            self.assertEqual('v1.0', resp.json()['versions'][0]['id'])
            self.assertNotEqual('close', resp.headers.get('Connection'))
        self.process.send_signal(signal.SIGTERM)
        self.assertEqual(0, self.process.wait(timeout=30))
        with open(self.log_file) as f:
            self.assertIn('trove-upgrade-api stopping', f.read())


class TestGunicorn(_ServedAPI):
    """``trove_upgrade.wsgi.api:application`` under a third-party server."""

    listening = r'Listening at: http://127\.0\.0\.1:(\d+)'

    def test_post_and_get_over_http(self):
        self.start([os.path.join(BIN, 'gunicorn'), '--bind', '127.0.0.1:0',
                    '--workers', '1', '--threads', '2',
                    'trove_upgrade.wsgi.api:application'],
                   env={'OS_TROVE_UPGRADE_CONFIG_DIR': self.dir})
        self.assertUpgradeRoundTrip()
        self.assertNoEventletWarning()
