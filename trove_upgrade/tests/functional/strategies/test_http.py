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

"""The http strategy against a real HTTPS server with its own CA."""

import os
import time

from trove_upgrade.agent import strategies
from trove_upgrade.agent.strategies import exception as exceptions
from trove_upgrade.tests.functional import https_server
from trove_upgrade.tests.functional import servers
from trove_upgrade.tests.functional.strategies import base

PACKAGE = os.urandom(300 * 1024 + 17)
MANIFEST = b'{"signed": {"version": "1.0.1"}}'


class HttpsStrategyTestCase(base.StrategyTestCase):
    """One HTTPS server, and one requiring client certificates."""

    strategy = 'http'
    download_retries = 2

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.root = cls.class_dir([('pkg.tar', PACKAGE),
                                  ('pkg.tar.manifest', MANIFEST)])
        cls.ca = https_server.CertificateAuthority(cls.class_dir())
        cls.other_ca = https_server.CertificateAuthority(
            cls.class_dir(), name='another CA')
        cls.server = cls._serve(https_server.HttpsFileServer(cls.root, cls.ca))
        cls.mtls_server = cls._serve(https_server.HttpsFileServer(
            cls.root, cls.ca, client_ca=cls.ca))

    @classmethod
    def _serve(cls, server):
        server.setUp()
        cls.addClassCleanup(server.cleanUp)
        return server

    def setUp(self):
        super().setUp()
        self.server.clear_faults()
        self.settings = {'ca_file': self.ca.cert_file, 'chunk_size': 4096}

    def _requests(self, name):
        return [r for r in self.server.requests if r[1] == name]

    def test_fetch_package_and_manifest(self):
        strategy = self._strategy()
        location = self.server.url('pkg.tar')

        strategy.check_location(location)
        size = strategy.fetch(location, self.dest, len(PACKAGE))
        manifest_size = strategy.fetch(location + '.manifest',
                                       self.dest + '.manifest', 4096)

        self.assertEqual(len(PACKAGE), size)
        self.assertEqual(PACKAGE, self._read_dest())
        self.assertEqual(len(MANIFEST), manifest_size)
        self.assertEqual(['pkg.tar', 'pkg.tar.manifest'],
                         sorted(os.listdir(self.dest_dir)))

    def test_ranges_are_asked_for_and_read_back_to_back(self):
        ranges = [(0, 10), (100000, 70000), (len(PACKAGE) - 5, 5)]
        size = self._strategy().fetch_ranges(self.server.url('pkg.tar'),
                                             ranges, self.dest)
        self.assertEqual(70015, size)
        self.assertEqual(b''.join(PACKAGE[a:a + n] for a, n in ranges),
                         self._read_dest())
        self.assertEqual(['bytes=0-9', 'bytes=100000-169999',
                          'bytes=%d-%d' % (len(PACKAGE) - 5,
                                           len(PACKAGE) - 1)],
                         [r[2] for r in self._requests('pkg.tar')])

    def test_resumes_broken_transfer_with_range(self):
        self.server.drop_after('pkg.tar', 100000)
        strategy = self._strategy()

        size = strategy.fetch(self.server.url('pkg.tar'), self.dest,
                              len(PACKAGE))

        self.assertEqual(len(PACKAGE), size)
        self.assertEqual(PACKAGE, self._read_dest())
        self.assertEqual([('GET', 'pkg.tar', None),
                          ('GET', 'pkg.tar', 'bytes=100000-')],
                         self._requests('pkg.tar'))

    def test_transfer_broken_on_every_attempt_fails(self):
        self.server.drop_after('pkg.tar', 1000, times=3)
        strategy = self._strategy()

        error = self.assertRaises(
            exceptions.DownloadError, strategy.fetch,
            self.server.url('pkg.tar'), self.dest, len(PACKAGE))

        self.assertIn('after 3 attempt(s)', str(error))
        self.assertIn('closed after 3000 bytes', str(error))
        self.assertEqual([None, 'bytes=1000-', 'bytes=2000-'],
                         [r[2] for r in self._requests('pkg.tar')])
        self.assertEqual([], os.listdir(self.dest_dir))

    def test_dripped_body_ends_at_the_timeout(self):
        # Each read gets a byte before the socket timeout: only the
        # attempt's deadline stops it, through TLS as well.
        self.server.drip('pkg.tar', 0.05)
        self.flags(group='agent', download_timeout=1, download_retries=0)
        strategy = self._strategy()
        started = time.monotonic()

        error = self.assertRaises(
            exceptions.DownloadError, strategy.fetch,
            self.server.url('pkg.tar'), self.dest, len(PACKAGE))

        self.assertIn('took longer than [agent] download_timeout',
                      str(error))
        self.assertLess(time.monotonic() - started, 5)
        self.assertEqual([], os.listdir(self.dest_dir))

    def test_not_found_is_not_retried(self):
        strategy = self._strategy()
        location = self.server.url('missing.tar')

        self.assertRaises(
            exceptions.ObjectNotFoundError, strategy.check_location,
            location)
        error = self.assertRaises(
            exceptions.ObjectNotFoundError, strategy.fetch,
            location, self.dest, 1024)

        self.assertIn('HTTP 404', str(error))
        self.assertEqual(2, len(self._requests('missing.tar')))
        self.assertEqual([], os.listdir(self.dest_dir))

    def test_server_errors_are_retried(self):
        self.server.fail_with('pkg.tar', 503, times=2)
        strategy = self._strategy()

        size = strategy.fetch(self.server.url('pkg.tar'), self.dest,
                              len(PACKAGE))

        self.assertEqual(len(PACKAGE), size)
        self.assertEqual(3, len(self._requests('pkg.tar')))

    def test_persistent_server_error_fails_after_retries(self):
        self.server.fail_with('pkg.tar', 500)
        strategy = self._strategy()

        error = self.assertRaises(
            exceptions.DownloadError, strategy.fetch,
            self.server.url('pkg.tar'), self.dest, len(PACKAGE))

        self.assertIn('HTTP 500', str(error))
        self.assertEqual(3, len(self._requests('pkg.tar')))

    def test_endless_body_stops_at_the_cap(self):
        self.server.send_endless('endless.tar')
        strategy = self._strategy()

        error = self.assertRaises(
            exceptions.SizeLimitExceededError, strategy.fetch,
            self.server.url('endless.tar'), self.dest, 1024 * 1024)

        self.assertIn('more data kept arriving after 1048576 bytes',
                      str(error))
        self.assertEqual(1, len(self._requests('endless.tar')))
        self.assertEqual([], os.listdir(self.dest_dir))

    def test_announced_size_over_the_cap_is_refused(self):
        self.server.lie_about_length('big.tar', 10 * 1024 * 1024)
        strategy = self._strategy()

        error = self.assertRaises(
            exceptions.SizeLimitExceededError, strategy.fetch,
            self.server.url('big.tar'), self.dest, 1024 * 1024)

        self.assertIn('announced 10485760 bytes', str(error))

    def test_body_beyond_content_length_is_never_read(self):
        self.server.lie_about_length('lie.tar', 5000)
        strategy = self._strategy()

        size = strategy.fetch(self.server.url('lie.tar'), self.dest, 6000)

        self.assertEqual(5000, size)
        self.assertEqual(5000, os.path.getsize(self.dest))

    def test_unknown_ca_is_rejected_without_retry(self):
        strategy = self._strategy(ca_file=self.other_ca.cert_file)

        error = self.assertRaises(
            exceptions.AccessDeniedError, strategy.fetch,
            self.server.url('pkg.tar'), self.dest, len(PACKAGE))

        self.assertIn('certificate', str(error))
        self.assertEqual([], self._requests('pkg.tar'))

    def test_client_certificate_required(self):
        strategy = self._strategy()

        # The server's alert may or may not reach the client before the
        # connection closes: either is a TLS failure.
        error = self.assertRaises(
            (exceptions.AccessDeniedError, exceptions.DownloadError),
            strategy.fetch, self.mtls_server.url('pkg.tar'), self.dest,
            len(PACKAGE))
        self.assertIn('TLS', str(error))
        self.assertFalse(os.path.exists(self.dest))

        cert_file, key_file = self.ca.issue('agent', server=False)
        strategy = self._strategy(cert_file=cert_file, key_file=key_file)
        size = strategy.fetch(self.mtls_server.url('pkg.tar'), self.dest,
                              len(PACKAGE))

        self.assertEqual(len(PACKAGE), size)

    def test_unreachable_server_fails_after_retries(self):
        strategy = self._strategy()
        location = 'https://127.0.0.1:%d/pkg.tar' % servers.free_port()

        error = self.assertRaises(exceptions.LocationUnreachableError,
                                  strategy.check_location, location)

        self.assertIn('after 3 attempt(s)', str(error))
        self.assertIn('Connection refused', str(error))


class PlainHttpStrategyTestCase(base.StrategyTestCase):

    strategy = 'http'

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.server = https_server.HttpsFileServer(
            cls.class_dir([('pkg.tar', PACKAGE)]), tls=False)
        cls.server.setUp()
        cls.addClassCleanup(cls.server.cleanUp)

    def test_plain_http_refused_by_default(self):
        # No drop-in file: the defaults.
        strategy = strategies.load('http', self.conf)

        error = self.assertRaises(
            exceptions.InvalidLocationError, strategy.fetch,
            self.server.url('pkg.tar'), self.dest, 10)

        self.assertIn('allow_insecure_http', str(error))
        self.assertEqual([], self.server.requests)

    def test_plain_http_when_allowed(self):
        strategy = self._strategy(allow_insecure_http=True)

        size = strategy.fetch(self.server.url('pkg.tar'), self.dest,
                              len(PACKAGE))

        self.assertEqual(len(PACKAGE), size)
