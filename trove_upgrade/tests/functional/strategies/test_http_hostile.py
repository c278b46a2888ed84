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

"""The http strategy against a loopback server answering hostile bytes.

Each attempt must end by ``[agent] download_timeout`` whatever the server
drips, the reasons must quote the server's text bounded and printable, and
a failed download must leave no file behind.
"""

import gzip
import os
import time

from trove_upgrade.agent.strategies import exception as exceptions
from trove_upgrade.services import packages as package_registry
from trove_upgrade.tests.functional import hostile_http
from trove_upgrade.tests.functional.strategies import base

TIMEOUT = 1.0
respond = hostile_http.response
drip_status_line = hostile_http.drip_status_line
drip_body = hostile_http.drip_body


class HostileHttpTestCase(base.StrategyTestCase):

    strategy = 'http'
    download_timeout = TIMEOUT
    dest_name = 'pkg'

    def setUp(self):
        super().setUp()
        self.settings = {'allow_insecure_http': True, 'chunk_size': 4096}
        # The registry's manifest fetch reads it too.
        self._write_settings()

    def _serve(self, answer):
        return self.useFixture(hostile_http.HostileHttpServer(answer))

    def _fetch(self, answer, max_bytes=100000):
        self.server = self._serve(answer)
        strategy = self._strategy()
        return strategy.fetch(self.server.url('pkg'), self.dest, max_bytes)

    def _refused(self, error_class, answer, max_bytes=100000):
        error = self.assertRaises(error_class, self._fetch, answer,
                                  max_bytes)
        self.assertEqual([], os.listdir(self.dest_dir))
        return error

    def test_status_line_dripped_ends_at_the_timeout(self):
        error = self._refused(exceptions.DownloadError, drip_status_line)

        self.assertIn('took longer than [agent] download_timeout',
                      str(error))

    def test_body_dripped_ends_at_the_timeout(self):
        error = self._refused(exceptions.DownloadError, drip_body)

        self.assertIn('took longer than [agent] download_timeout',
                      str(error))

    def test_check_location_of_dripped_headers_ends_at_the_timeout(self):
        server = self._serve(drip_status_line)
        strategy = self._strategy()

        error = self.assertRaises(exceptions.LocationUnreachableError,
                                  strategy.check_location, server.url('pkg'))

        self.assertIn('download_timeout', str(error))

    def test_silent_server_ends_at_the_timeout(self):
        def silent(conn, request, number):
            time.sleep(3 * TIMEOUT)

        error = self._refused(exceptions.DownloadError, silent)

        self.assertIn('after 2 attempt(s)', str(error))

    def test_redirect_location_is_quoted_bounded(self):
        def redirect(conn, request, number):
            conn.sendall(respond('302 Found', [
                'Location: \x1b[2Jhttp://10.0.0.1/' + 'a' * 5000,
                'Content-Length: 0']))

        error = self._refused(exceptions.RequestRejectedError, redirect)

        message = str(error)
        self.assertIn('redirects are not followed', message)
        self.assertIn(r"'\x1b[2Jhttp://10.0.0.1/", message)
        self.assertNotIn('\x1b', message)
        self.assertLess(len(message), 500)
        # Not followed: one request, to this server.
        self.assertEqual(1, len(self.server.requests))

    def test_status_reason_and_status_line_are_quoted_bounded(self):
        def huge_reason(conn, request, number):
            conn.sendall(respond('404 ' + 'N' * 60000,
                                 ['Content-Length: 0']))

        def garbage(conn, request, number):
            conn.sendall(b'\xff\xfe\r\n\r\n')

        error = self._refused(exceptions.ObjectNotFoundError, huge_reason)
        self.assertIn('(60000 long)', str(error))
        self.assertLess(len(str(error)), 500)

        error = self._refused(exceptions.DownloadError, garbage)
        # http.client reads the status line as latin-1.
        self.assertIn("'\xff\xfe\\r\\n'", str(error))
        self.assertNotIn('\n', str(error))

    def test_reset_mid_body_is_retried_then_fails(self):
        error = self._refused(exceptions.DownloadError,
                              hostile_http.reset_mid_body)

        self.assertIn('after 2 attempt(s)', str(error))

    def test_resume_answered_with_200_starts_over(self):
        def answer(conn, request, number):
            if number == 1:
                conn.sendall(respond(headers=['Content-Length: 1000',
                                              'ETag: "v1"'],
                                     body=b'x' * 500))
                return
            conn.sendall(respond(headers=['Content-Length: 1000'],
                                 body=b'y' * 1000))

        size = self._fetch(answer)

        self.assertEqual(1000, size)
        self.assertEqual(b'y' * 1000, self._read_dest())
        self.assertIn(b'Range: bytes=500-', self.server.requests[1])

    def test_resume_answered_with_the_wrong_range_fails(self):
        def answer(conn, request, number):
            if number == 1:
                conn.sendall(respond(headers=['Content-Length: 1000'],
                                     body=b'x' * 500))
                return
            conn.sendall(respond('206 Partial Content', [
                'Content-Range: bytes 0-999/1000\x07',
                'Content-Length: 1000'], body=b'y' * 1000))

        error = self._refused(exceptions.DownloadError, answer)

        self.assertIn('instead of bytes 500-', str(error))
        self.assertNotIn('\x07', str(error))

    def test_gzip_content_encoding_is_not_decoded(self):
        bomb = gzip.compress(b'\0' * 10 * 1024 * 1024)

        def answer(conn, request, number):
            conn.sendall(respond(headers=[
                'Content-Encoding: gzip',
                'Content-Length: %d' % len(bomb)], body=bomb))

        size = self._fetch(answer, max_bytes=len(bomb))

        # The bytes sent, for the signed hash to judge; never inflated.
        self.assertEqual(len(bomb), size)
        self.assertNotIn(b'gzip', self.server.requests[0].lower())

    def test_registry_manifest_fetch_ends_at_its_timeout(self):
        server = self._serve(drip_body)
        self.flags(group='packages', strategy_config_dir=self.config_dir,
                   allowed_strategies=['http'], fetch_timeout=TIMEOUT,
                   fetch_retries=0)

        error = self.assertRaises(exceptions.DownloadError,
                                  package_registry.fetch_manifest, 'http',
                                  server.url('pkg'))

        self.assertIn('download_timeout', str(error))

    def test_content_length_of_non_ascii_digits_is_ignored(self):
        def superscript(conn, request, number):
            conn.sendall(respond(headers=['Content-Length: \xb2'],
                                 body=b'x' * 10))

        size = self._fetch(superscript)

        # Not a length: the body runs to the end of the connection.
        self.assertEqual(10, size)
