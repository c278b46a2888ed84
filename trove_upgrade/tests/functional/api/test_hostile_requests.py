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

"""trove-upgrade-api, a real process, against requests no client sends.

Raw bytes on a socket: header sections a proxy could read otherwise than
the server, lengths that are not one number, bodies over the limit, and
paths made to forge log lines. Each gets a status line (waitress's own,
or the API's JSON error), nothing is recorded, the process serves on and
its log holds no traceback.
"""

import json
import os
import re
import socket

import requests

from trove_upgrade.tests.functional.api import test_api_process as api

WAIT = 30


class TestHostileRequests(api._ServedAPI):

    listening = api.TestConsoleScript.listening

    def setUp(self):
        super().setUp()
        self.start([os.path.join(api.BIN, 'trove-upgrade-api'),
                    '--config-file', self.config,
                    '--log-file', self.log_file])
        self.mgmt = '/v1.0/%s/mgmt' % api.PROJECT
        self.auth = ''.join('%s: %s\r\n' % item
                            for item in api.HEADERS.items()).encode()

    def exchange(self, data):
        """Send ``data``, half-close, and read until the server closes."""
        port = int(self.url.rsplit(':', 1)[1])
        with socket.create_connection(('127.0.0.1', port),
                                      timeout=WAIT) as conn:
            conn.sendall(data)
            conn.shutdown(socket.SHUT_WR)
            return b''.join(iter(lambda: conn.recv(65536), b''))

    def post(self, headers, body=b''):
        return (b'POST ' + self.mgmt.encode() + b'/upgrades HTTP/1.1\r\n'
                + self.auth + b'Content-Type: application/json\r\n'
                + headers + b'\r\n' + body)

    def assertAnswered(self, answer, status, detail):
        """One response: ``status`` and the JSON error naming ``detail``."""
        head, _, body = answer.partition(b'\r\n\r\n')
        self.assertTrue(head.startswith(b'HTTP/1.1 %d ' % status), answer)
        self.assertEqual(1, len(re.findall(rb'HTTP/1\.1 \d{3} ', answer)),
                         answer)
        error, = json.loads(body)['errors']
        self.assertEqual(status, error['status'])
        self.assertIn(detail, error['detail'])
        self.assertIn(b'\r\nx-openstack-request-id: %s\r\n'
                      % error['request_id'].encode(),
                      head.lower() + b'\r\n')

    def assertNothingRecorded(self):
        listed = requests.get(self.url + self.mgmt + '/upgrades',
                              headers=api.HEADERS, timeout=WAIT)
        self.assertEqual([], listed.json()['upgrades'])

    def log(self):
        with open(self.log_file) as f:
            return f.read()

    def test_header_sections_it_would_misread_are_refused(self):
        # waitress refuses them itself, with its plain-text 400.
        body = json.dumps(api.BODY).encode()
        # The body, read as the next request, would have been recorded.
        smuggled = (b'POST %s/upgrades HTTP/1.1\r\nHost: x\r\n%s'
                    b'Content-Type: application/json\r\n'
                    b'Content-Length: %d\r\n\r\n%s'
                    % (self.mgmt.encode(), self.auth, len(body), body))
        for headers in (
                b'Host: x\r\nContent-Length : %d\r\n' % len(smuggled),
                b'Host: x\r\nContent-Length %d\r\n' % len(smuggled),
                b'Host: x\r\nTransfer-Encoding : chunked\r\n',
                b'Host: x\r\nContent-Length: \xb2\r\n',
                b'Host: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n',
                b'Host: x\r\nTransfer-Encoding: gzip, chunked\r\n'):
            answer = self.exchange(self.post(headers, smuggled))
            self.assertRegex(answer, rb'^HTTP/1\.[01] (400|501) ')
            self.assertEqual(1, len(re.findall(rb'HTTP/1\.[01] \d{3} ',
                                               answer)), answer)
        # waitress lets these through: the server answers them.
        for headers in (b'Content-Length: 0\r\n',
                        b'Host: x\r\nHost: y\r\nContent-Length: 0\r\n'):
            self.assertAnswered(self.exchange(self.post(headers)), 400,
                                'needs one Host header')
        self.assertNothingRecorded()
        # Serving on, no traceback.
        resp = requests.get(self.url + '/', timeout=WAIT)
        self.assertEqual(200, resp.status_code, resp.text)
        self.assertNotIn('Traceback', self.log())

    def test_a_body_over_the_limit_is_refused_unread(self):
        # waitress answers 100 Continue as the headers come in (PEP 3333),
        # and refuses a Content-Length over [api] max_request_body_size
        # itself, before any of the body.
        refused = self.exchange(self.post(
            b'Host: x\r\nContent-Length: 99999999\r\n'))
        self.assertRegex(refused, rb'^HTTP/1\.[01] 413 ')
        body = json.dumps(api.BODY).encode()
        accepted = self.exchange(self.post(
            b'Host: x\r\nExpect: 100-continue\r\nContent-Length: %d\r\n'
            % len(body), body))
        self.assertTrue(accepted.startswith(b'HTTP/1.1 100 Continue\r\n\r\n'
                                            b'HTTP/1.1 202 '), accepted)

    def test_the_environ_carries_the_headers_as_sent(self):
        answer = self.exchange(
            b'POST %s/upgrades HTTP/1.1\r\nHost: x\r\n%s'
            b'Content-Length: 2\r\n\r\n{}' % (self.mgmt.encode(), self.auth))
        self.assertAnswered(answer, 415, 'application/json, not None.')
        # Spaces around a Content-Length are no part of it (RFC 9112).
        body = json.dumps(api.BODY).encode()
        answer = self.exchange(self.post(
            b'Host: x\r\nContent-Length: %d \r\n' % len(body), body))
        self.assertTrue(answer.startswith(b'HTTP/1.1 202 '), answer)

    def test_the_request_log_is_one_bounded_line_per_request(self):
        for path in (b'/x%0D%0A2026-12-04 00:00:00.000 1 ERROR forged',
                     b'/%1B[31mred', b'/' + b'a' * 60000):
            answer = self.exchange(b'GET ' + path.replace(b' ', b'%20')
                                   + b' HTTP/1.1\r\nHost: x\r\n\r\n')
            self.assertIn(b'HTTP/1.1 401 ', answer)
        lines = [line for line in self.log().splitlines()
                 if 'requestlog' in line]
        self.assertEqual(3, len(lines), lines)
        self.assertIn('"GET /x%0D%0A2026-12-04%2000:00:00.000%201%20ERROR',
                      lines[0])
        self.assertIn('"GET /%1B[31mred" status: 401', lines[1])
        self.assertNotIn('\x1b', self.log())
        self.assertLess(len(lines[2]), 2000)


class TestHostileChunksUnderGunicorn(api._ServedAPI):
    """Chunked bodies gunicorn cannot parse, through the API's size limit."""

    listening = api.TestGunicorn.listening

    def test_a_chunked_body_gunicorn_cannot_read_is_400(self):
        # gunicorn's InvalidChunkSize and NoMoreData: 500 and a traceback.
        self.start([os.path.join(api.BIN, 'gunicorn'), '--bind',
                    '127.0.0.1:0', '--workers', '1',
                    'trove_upgrade.wsgi.api:application'],
                   env={'OS_TROVE_UPGRADE_CONFIG_DIR': self.dir})
        port = int(self.url.rsplit(':', 1)[1])
        head = ''.join('%s: %s\r\n' % item for item in api.HEADERS.items())
        for chunks in (b'zz\r\n{}\r\n0\r\n\r\n', b'10\r\n{"a'):
            with socket.create_connection(('127.0.0.1', port),
                                          timeout=WAIT) as conn:
                conn.sendall(('POST /v1.0/%s/mgmt/upgrades HTTP/1.1\r\n'
                              'Host: x\r\n%sContent-Type: application/json'
                              '\r\nTransfer-Encoding: chunked\r\n\r\n'
                              % (api.PROJECT, head)).encode() + chunks)
                conn.shutdown(socket.SHUT_WR)
                answer = b''.join(iter(lambda: conn.recv(65536), b''))
            self.assertTrue(answer.startswith(b'HTTP/1.1 400 '), answer)
            error, = json.loads(answer.partition(b'\r\n\r\n')[2])['errors']
            self.assertIn('The request body is malformed', error['detail'])
        with open(self.log_file) as f:
            self.assertNotIn('Traceback', f.read())
