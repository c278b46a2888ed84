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

"""A huge answer costs the reader a bounded amount of memory.

A real loopback server answers with a body of :data:`HUGE` bytes,
generated as it is sent: Swift's 503 to the manifest's GET, Keystone's
answer to the token request. The readers are real processes: the agent's
download step (``python -m trove_upgrade.agent.untrusted``) and the
registry's manifest fetch, as the API runs it. The peak resident memory
of each (``wait4``'s ``ru_maxrss``) stays within :data:`ALLOWED` of the
same process reading a short answer, and the failure says why.
"""

import json
import os
import subprocess
import sys

import fixtures

from tools.testbed import conffile
from trove_upgrade.agent import unprivileged
from trove_upgrade.package_format import keys
from trove_upgrade.tests import base
from trove_upgrade.tests.functional import hostile_http
from trove_upgrade.tests.functional import servers

MIB = 1024 * 1024
HUGE = 256 * MIB
ALLOWED = 64 * MIB
LOCATION = 'swift://packages/guest-2.0.0.pkg'
_BLOCK = b'x' * MIB

REGISTRY_FETCH = '''
import sys
from trove_upgrade import conf
from trove_upgrade.services import packages as package_registry
conf.CONF(['--config-file', sys.argv[1]], project='trove-upgrade')
try:
    package_registry.fetch_manifest('swift', sys.argv[2])
except Exception as e:
    print('%s: %s' % (type(e).__name__, e))
'''


def long_answer(size, status='503 Service Unavailable', headers=()):
    """An answer whose ``size``-byte body is generated while it is sent."""
    def answer(conn, request, number):
        if request.startswith(b'HEAD '):
            conn.sendall(hostile_http.response(
                headers=['Content-Length: 10']))
            return
        conn.sendall(hostile_http.response(
            status, list(headers) + ['Content-Length: %d' % size]))
        for _ in range(size // len(_BLOCK)):
            conn.sendall(_BLOCK)
        conn.sendall(_BLOCK[:size % len(_BLOCK)])
    return answer


def keystone_token(size):
    """Keystone's v3 token answer with a ``size``-byte body."""
    return long_answer(size, '201 Created', [
        'X-Subject-Token: gAAAAtoken', 'Content-Type: application/json'])


def run_measured(argv, stdin=b''):
    """``(stdout, peak RSS in bytes)`` of the process ``argv``."""
    with open(os.devnull, 'wb') as devnull:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=devnull)
    proc.stdin.write(stdin)
    proc.stdin.close()
    output = proc.stdout.read()
    proc.stdout.close()
    _, status, usage = os.wait4(proc.pid, 0)
    # Reaped here: Popen must not wait for it again.
    proc.returncode = os.waitstatus_to_exitcode(status)
    return output.decode(), usage.ru_maxrss * 1024


class TestHugeAnswers(base.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.strategy_dir = os.path.join(self.tmp, 'strategies.d')
        self.trusted_key = os.path.join(self.tmp, 'sign.key')
        keys.write_signing_key(self.trusted_key, keys.generate_signing_key())
        self.decryption_key = keys.write_encryption_key(
            os.path.join(self.tmp, 'enc.key'),
            keys.generate_encryption_key())

    def _serve(self, answer, keystone=False):
        if not keystone:
            answer = hostile_http.swift_v1(answer)
        server = self.useFixture(hostile_http.HostileHttpServer(answer))
        if keystone:
            settings = {'auth_version': '3', 'user': 'reader',
                        'key': 'secret', 'project_name': 'packages',
                        'auth_url': server.url('v3')}
        else:
            settings = {'auth_version': '1', 'user': 'test:tester',
                        'key': 'testing',
                        'auth_url': server.url(
                            hostile_http.SWIFT_AUTH_PATH.lstrip('/'))}
        servers.write_strategy_conf(self.strategy_dir, 'swift', settings)
        return server

    def _download_step(self, answer, keystone=False):
        """The agent's download step: (reason it failed, peak RSS)."""
        server = self._serve(answer, keystone)
        config = os.path.join(self.tmp, 'agent.conf')
        conffile.write_conf(config, {'agent': {
            'allowed_strategies': ['swift'],
            'strategy_config_dir': self.strategy_dir,
            'trusted_key_files': [self.trusted_key + '.pub'],
            'decryption_key_files': [self.decryption_key],
            'download_retries': 1, 'download_retry_delay': 0,
            'download_timeout': 120}})
        work = os.path.join(self.tmp, 'work-%d' % server.port)
        os.mkdir(work)
        # As the agent gives it to the step's user.
        unprivileged.give(work, unprivileged.ids(self.conf))
        result = os.path.join(work, 'download.result.json')
        request = {'config': ['--config-file', config], 'step': 'download',
                   'upgrade': {'strategy': 'swift', 'location': LOCATION,
                               'to_version': '2.0.0',
                               'from_version': '1.0.0',
                               'allow_downgrade': False},
                   'work': work, 'result': result, 'parent': os.getpid()}
        _, peak = run_measured(
            [sys.executable, '-m', 'trove_upgrade.agent.untrusted'],
            json.dumps(request).encode())
        with open(result) as f:
            return json.load(f)['failed'], server, peak

    def _registry_fetch(self, answer, keystone=False):
        """The registry's manifest fetch: (its error, peak RSS)."""
        server = self._serve(answer, keystone)
        config = os.path.join(self.tmp, 'api.conf')
        conffile.write_conf(config, {'packages': {
            'allowed_strategies': ['swift'],
            'strategy_config_dir': self.strategy_dir,
            'fetch_retries': 1, 'fetch_timeout': 120}})
        output, peak = run_measured(
            [sys.executable, '-c', REGISTRY_FETCH, config, LOCATION])
        return output, server, peak

    def _assert_bounded(self, run, answer, keystone=False):
        """Run ``run`` on a short then a huge answer; return the reason."""
        _, _, short_peak = run(answer(1000), keystone)
        reason, server, peak = run(answer(HUGE), keystone)
        self.assertLess(peak - short_peak, ALLOWED,
                        'peak RSS %d MiB against %d MiB for a short answer'
                        % (peak // MIB, short_peak // MIB))
        self.assertIn('longer than the %d bytes read of it' % MIB, reason)
        return reason, server

    def test_swift_error_body_in_the_download_step(self):
        reason, server = self._assert_bounded(self._download_step,
                                              long_answer)
        self.assertIn('rejected the request', reason)
        self.assertIn('GET http://127.0.0.1:%d/v1/AUTH_test/packages/'
                      'guest-2.0.0.pkg.manifest (HTTP 503)' % server.port,
                      reason)
        # Not retried: the next answer would be as long.
        self.assertEqual(1, len([r for r in server.requests
                                 if r.startswith(b'GET /v1/')]))

    def test_token_answer_in_the_download_step(self):
        reason, server = self._assert_bounded(
            self._download_step, keystone_token, keystone=True)
        self.assertIn('POST http://127.0.0.1:%d/v3/auth/tokens (HTTP 201)'
                      % server.port, reason)

    def test_swift_error_body_in_the_registry_fetch(self):
        reason, _ = self._assert_bounded(self._registry_fetch, long_answer)
        self.assertIn('RequestRejectedError', reason)

    def test_token_answer_in_the_registry_fetch(self):
        self._assert_bounded(self._registry_fetch, keystone_token,
                             keystone=True)
