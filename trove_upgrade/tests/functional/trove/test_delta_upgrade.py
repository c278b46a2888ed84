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

"""The real Trove guest agent, 25.1.0 to 26.0.0, fetching only what changed.

The guest's agent installed 25.1.0 itself (the real install code, uv,
from the wheels of 25.1.0), so it keeps those wheels; the package of
26.0.0 is the one ``trove-upgrade-package build --requirement
trove==26.0.0`` makes, as in :mod:`.test_upgrade`, whose harness (a real
Trove guest under supervisord, real RabbitMQ, conductor and agent) this
reuses. Slow: one package build per class, one guest per test.
"""

import os
import re
import shutil

from tools.testbed import guest
from trove_upgrade.agent import install
from trove_upgrade.agent import journal as journal_mod
from trove_upgrade.common import states
from trove_upgrade.package_format import manifest as manifest_mod
from trove_upgrade.package_format import payload_ranges
from trove_upgrade.tests.functional.trove import test_upgrade

FROM = test_upgrade.FROM
TO = test_upgrade.TO
PACKAGE = 'trove-good.pkg'
# At most this share of the package's bytes is fetched.
MAX_FETCHED_SHARE = 0.05
# Wheels of 26.0.0 the pruned guest no longer holds, besides the changed.
PRUNED = ('six', 'iso8601', 'vine')
_FETCHED = re.compile(r'verifying and decrypting (\d+) bytes fetched; '
                      r'(\d+) wheel')


class TestDeltaUpgrade(test_upgrade.TroveGuestTestCase):

    def install_image(self):
        """25.1.0 as the agent installs it: its wheels are kept."""
        installs = self.installs()
        installs.install(FROM, guest.wheelhouse(FROM, self.cache),
                         console_script=guest.CONSOLE_SCRIPT)
        installs.switch(FROM)
        return installs.current_link

    def installs(self):
        return install.InstallRoot(
            self.install_root, journal_mod.InstallRootLock(self.install_root))

    def agent_conf(self, **overrides):
        return super().agent_conf(allowed_strategies=['local', 'http'],
                                  **overrides)

    def manifest(self):
        path = os.path.join(self.repo, PACKAGE + manifest_mod.MANIFEST_SUFFIX)
        with open(path, 'rb') as f:
            return manifest_mod.Manifest.from_bytes(f.read())

    def fetched(self, upgrade):
        """(bytes fetched, wheels kept) the agent reported."""
        for event in upgrade['events']:
            match = _FETCHED.search(event['detail'] or '')
            if match:
                return int(match.group(1)), int(match.group(2))
        raise AssertionError('no fetch reported: %s' % upgrade['events'])

    def start(self):
        self.start_agent()
        self.wait_for(lambda: self._registered(),
                      'the agent to register with guest version %s' % FROM)

    def _registered(self):
        agent = self.registered()
        return agent if agent and agent['guest_version'] == FROM else None

    def assert_upgraded(self, done):
        self.assertEqual(states.SUCCESS, done['status'], done['events'])
        self.assertEqual(TO, self.current_version())
        self.assertIsNone(self.pinger.ping())
        self.assertEqual(os.path.realpath(self.installs().path(TO)),
                         guest.venv_of(self.supervisord.pid()))

    def prune(self, manifest):
        """Drop wheels of ``manifest`` the guest holds, as a pruned cache.

        Returns the entries the guest then lacks.
        """
        store = self.installs().wheel_store
        for entry in manifest.files:
            if entry.name.split('-')[0] in PRUNED:
                shutil.rmtree(os.path.join(store.path, entry.sha256))
        held = set(store.held())
        return [e for e in manifest.files if e.sha256 not in held]

    def assert_fetched(self, done, manifest, missing, transport):
        """Only the ranges of ``missing``, at most 5 % of the package."""
        size, kept = self.fetched(done)
        print('%s: fetched %d of the %d bytes of the package (%.2f %%), '
              '%d of %d wheels' % (transport, size, manifest.payload.size,
                                   100.0 * size / manifest.payload.size,
                                   len(missing), len(manifest.files)))
        self.assertEqual(payload_ranges.fetched_size(
            payload_ranges.plan(manifest, missing)), size)
        self.assertLessEqual(size, MAX_FETCHED_SHARE * manifest.payload.size)
        self.assertEqual(len(manifest.files) - len(missing), kept)
        # The wheels of both versions are kept now.
        self.assertTrue({e.sha256 for e in manifest.files}
                        <= set(self.installs().wheel_store.held()))
        return size

    def test_local_fetches_exactly_the_wheels_a_pruned_guest_lacks(self):
        self.wait_for_pong()
        manifest = self.manifest()
        changed = [e for e in manifest.files
                   if e.sha256 not in set(self.installs().wheel_store.held())]
        missing = self.prune(manifest)
        self.assertEqual(len(changed) + len(PRUNED), len(missing))
        self.start()

        done = self.upgrade('good')

        self.assert_upgraded(done)
        self.assert_fetched(done, manifest, missing, 'local')

    def test_http_refuses_other_bytes_then_fetches_only_what_changed(self):
        self.wait_for_pong()
        manifest = self.manifest()
        missing = [e for e in manifest.files
                   if e.sha256 not in set(self.installs().wheel_store.held())]
        server, _ = self.serve_over_https(PACKAGE)
        self.start()

        # A server answering each range with other bytes of the package:
        # refused before anything is installed; the guest is untouched.
        server.shift_ranges(PACKAGE, 4096)
        pid = self.supervisord.pid()
        failed = self.upgrade('good', 'http', server.url(PACKAGE))
        self.assertEqual(states.FAILED, failed['status'], failed['events'])
        self.assertIn('ChunkAuthenticationError',
                      failed['events'][-1]['detail'])
        self.assertFalse(os.path.lexists(self.installs().path(TO)))
        self.assertEqual(pid, self.supervisord.pid())
        self.assertEqual(FROM, self.current_version())

        server.clear_faults()
        server.requests[:] = []
        server.sent.clear()
        done = self.upgrade('good', 'http', server.url(PACKAGE))

        self.assert_upgraded(done)
        size = self.assert_fetched(done, manifest, missing, 'http')
        self.assertEqual(server.sent[PACKAGE], size)
        self.assertEqual(
            ['bytes=%d-%d' % (r.start, r.start + r.length - 1)
             for r in payload_ranges.plan(manifest, missing)],
            [r[2] for r in server.requests
             if r[1] == PACKAGE and r[0] == 'GET'])
