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

"""The swift strategy against a loopback server answering hostile bytes.

The server plays Keystone, Swift's v1 auth or the object server. Each
attempt must end by ``[agent] download_timeout`` whatever it drips, leaving
no connection or watchdog thread behind, and the reasons must quote the
server's text bounded and printable.
"""

import os
import threading

import psutil

from trove_upgrade.agent.strategies import exception as exceptions
from trove_upgrade.tests.functional import hostile_http
from trove_upgrade.tests.functional.strategies import base

TIMEOUT = 1.0
LOCATION = 'swift://packages/pkg.tar'
respond = hostile_http.response


class HostileSwiftTestCase(base.StrategyTestCase):

    strategy = 'swift'
    download_timeout = TIMEOUT

    def _strategy(self, answer, **settings):
        self.server = self.useFixture(hostile_http.HostileHttpServer(answer))
        self.settings = {'auth_version': '1', 'user': 'test:tester',
                         'key': 'testing', 'chunk_size': 4096,
                         'auth_url': self.server.url(
                             hostile_http.SWIFT_AUTH_PATH.lstrip('/'))}
        return super()._strategy(**settings)

    def _refused(self, error_class, answer, **settings):
        strategy = self._strategy(answer, **settings)
        error = self.assertRaises(error_class, strategy.fetch, LOCATION,
                                  self.dest, 100000)
        self.assertEqual([], os.listdir(self.dest_dir))
        self._assert_nothing_left()
        return error

    def _assert_timed_out(self, error_class, answer, **settings):
        error = self._refused(error_class, answer, **settings)
        self.assertIn('took longer than [agent] download_timeout',
                      str(error))
        self.assertIn('after 2 attempt(s)', str(error))

    def _assert_nothing_left(self):
        self.assertEqual([], [t for t in threading.enumerate()
                              if t.name == 'download-watchdog'])
        self.assertEqual([], [c for c in psutil.Process().net_connections()
                              if c.raddr and c.raddr.port == self.server.port])

    def test_v1_auth_answer_dripped_ends_at_the_timeout(self):
        self._assert_timed_out(exceptions.DownloadError,
                               hostile_http.drip_status_line)

        self.assertEqual(2, len(self.server.requests))

    def test_keystone_answer_dripped_ends_at_the_timeout(self):
        strategy = self._strategy(
            hostile_http.drip_status_line, auth_version='3',
            project_name='packages', user='reader')

        error = self.assertRaises(exceptions.LocationUnreachableError,
                                  strategy.check_location, LOCATION)

        self.assertIn('took longer than [agent] download_timeout',
                      str(error))
        self._assert_nothing_left()

    def test_object_headers_dripped_end_at_the_timeout(self):
        self._assert_timed_out(
            exceptions.DownloadError,
            hostile_http.swift_v1(hostile_http.drip_status_line))

        # Auth and GET, twice.
        self.assertEqual(4, len(self.server.requests))

    def test_object_body_dripped_ends_at_the_timeout(self):
        self._assert_timed_out(exceptions.DownloadError,
                               hostile_http.swift_v1(hostile_http.drip_body))

    def test_check_location_of_dripped_head_ends_at_the_timeout(self):
        strategy = self._strategy(
            hostile_http.swift_v1(hostile_http.drip_status_line))

        error = self.assertRaises(exceptions.LocationUnreachableError,
                                  strategy.check_location, LOCATION)

        self.assertIn('download_timeout', str(error))
        self.assertIn(b'HEAD /v1/AUTH_test/packages/pkg.tar ',
                      self.server.requests[1])
        self._assert_nothing_left()

    def test_object_reason_is_quoted_bounded(self):
        def huge_reason(conn, request, number):
            conn.sendall(respond('404 \x1b[2J' + 'N' * 60000,
                                 ['Content-Length: 0']))

        error = self._refused(exceptions.ObjectNotFoundError,
                              hostile_http.swift_v1(huge_reason))

        message = str(error)
        self.assertIn("Swift answered 404 '\\x1b[2JNNN", message)
        self.assertIn('(60004 long)', message)
        self.assertNotIn('\x1b', message)
        self.assertLess(len(message), 500)

    def test_auth_reason_is_quoted_bounded(self):
        def unprintable(conn, request, number):
            conn.sendall(respond('401 Go\x07\x00away',
                                 ['Content-Length: 0']))

        error = self._refused(exceptions.AccessDeniedError, unprintable)

        self.assertIn("401 'Go\\x07\\x00away'", str(error))
        self.assertNotIn('\x07', str(error))

    def test_garbage_status_line_is_quoted_bounded(self):
        def garbage(conn, request, number):
            conn.sendall(b'\xff\xfe\x1b' * 20000 + b'\r\n\r\n')

        error = self._refused(exceptions.DownloadError, garbage)

        message = str(error)
        self.assertIn('cannot talk to Swift', message)
        self.assertNotIn('\x1b', message)
        self.assertLess(len(message), 800)

    def test_reset_mid_body_is_retried_then_fails(self):
        error = self._refused(
            exceptions.DownloadError,
            hostile_http.swift_v1(hostile_http.reset_mid_body))

        self.assertIn('after 2 attempt(s)', str(error))
        self.assertIn('cannot talk to Swift', str(error))

    def test_undecodable_headers_are_refused(self):
        def latin1(conn, request, number):
            conn.sendall(respond(headers=['Content-Length: \xb2',
                                          'X-Object-Meta-A: \xff'],
                                 body=b'x' * 10))

        error = self._refused(exceptions.DownloadError,
                              hostile_http.swift_v1(latin1))

        self.assertIn("can't decode byte 0xb2", str(error))
