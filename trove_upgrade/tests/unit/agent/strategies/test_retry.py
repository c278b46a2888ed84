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

"""Retry policy: which failures are retried, how often, how long apart."""

import os
import time

import fixtures
from oslo_config import cfg
import requests
from swiftclient import exceptions as swift_exc
import urllib3

from trove_upgrade.agent.strategies import base as strategy_base
from trove_upgrade.agent.strategies import exception as exceptions
from trove_upgrade.agent.strategies import swift
from trove_upgrade.tests.unit.agent.strategies import base
from trove_upgrade.tests.unit.agent.strategies import test_loader


class ScriptedStrategy(strategy_base.Strategy):
    """Each attempt takes the next outcome: an exception or bytes."""

    name = 'scripted'
    opt_group = cfg.OptGroup('scripted')

    def __init__(self, conf, outcomes):
        super().__init__(conf)
        self.outcomes = list(outcomes)
        self.attempts = 0

    def parse_location(self, location):
        return location

    def _next(self):
        self.attempts += 1
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def _check(self, target, deadline):
        self._next()

    def _fetch_once(self, target, part_path, max_bytes, deadline):
        with open(part_path, 'ab') as out:
            out.write(b'partial')
            data = self._next()
            out.seek(0)
            out.truncate()
            return self.write_capped([data], out, 0, target, max_bytes,
                                     deadline)


def transient(reason='connection reset'):
    return exceptions.TransientError(reason=reason)


def permanent_errors():
    kwargs = {'location': 'loc', 'strategy': 'scripted', 'reason': 'no'}
    return [exceptions.ObjectNotFoundError(**kwargs),
            exceptions.AccessDeniedError(**kwargs),
            exceptions.RequestRejectedError(**kwargs),
            exceptions.InvalidLocationError(**kwargs),
            exceptions.SizeLimitExceededError(max_bytes=1, **kwargs)]


class TestRetries(base.StrategyTestCase):

    def setUp(self):
        super().setUp()
        self.dest_dir = self.useFixture(fixtures.TempDir()).path
        self.dest = os.path.join(self.dest_dir, 'pkg')
        self.sleeps = []

    def strategy(self, *outcomes, retries=3, delay=0.0, max_delay=60.0):
        self.flags(group='agent', download_retries=retries,
                   download_retry_delay=delay,
                   download_retry_max_delay=max_delay)
        strategy = ScriptedStrategy(self.conf, outcomes)
        strategy.sleep = self.sleeps.append
        return strategy

    def test_transient_failures_retried_then_success(self):
        strategy = self.strategy(transient(), transient(), b'package')

        self.assertEqual(7, strategy.fetch('loc', self.dest, 100))

        self.assertEqual(3, strategy.attempts)
        with open(self.dest, 'rb') as f:
            self.assertEqual(b'package', f.read())
        self.assertEqual(['pkg'], os.listdir(self.dest_dir))

    def test_gives_up_after_the_last_retry(self):
        strategy = self.strategy(*[transient('reset %d' % n)
                                   for n in range(4)], retries=3)

        error = self.assertRaises(exceptions.DownloadError, strategy.fetch,
                                  'loc', self.dest, 100)

        self.assertEqual(4, strategy.attempts)
        self.assertEqual('Downloading "loc" with strategy "scripted" failed '
                         'after 4 attempt(s): reset 3.', str(error))
        self.assertIsInstance(error.__cause__, exceptions.TransientError)
        self.assertEqual([], os.listdir(self.dest_dir))

    def test_no_retries(self):
        strategy = self.strategy(transient(), retries=0)

        self.assertRaises(exceptions.DownloadError, strategy.fetch, 'loc',
                          self.dest, 100)
        self.assertEqual(1, strategy.attempts)
        self.assertEqual([], self.sleeps)

    def test_exponential_backoff_capped(self):
        strategy = self.strategy(*[transient() for n in range(5)],
                                 retries=4, delay=1.0, max_delay=3.0)

        self.assertRaises(exceptions.DownloadError, strategy.fetch, 'loc',
                          self.dest, 100)

        self.assertEqual([1.0, 2.0, 3.0, 3.0], self.sleeps)

    def test_permanent_failures_not_retried(self):
        for error in permanent_errors():
            strategy = self.strategy(error, b'never')

            raised = self.assertRaises(type(error), strategy.fetch, 'loc',
                                       self.dest, 100)

            self.assertIs(error, raised)
            self.assertEqual(1, strategy.attempts)
        self.assertEqual([], self.sleeps)
        self.assertEqual([], os.listdir(self.dest_dir))

    def test_programming_errors_not_retried(self):
        strategy = self.strategy(ValueError('bug'), b'never')

        self.assertRaises(ValueError, strategy.fetch, 'loc', self.dest, 100)
        self.assertEqual(1, strategy.attempts)

    def test_size_cap_is_inclusive(self):
        self.assertEqual(3, self.strategy(b'abc').fetch('loc', self.dest, 3))

        error = self.assertRaises(exceptions.SizeLimitExceededError,
                                  self.strategy(b'abcd').fetch, 'loc',
                                  self.dest + '2', 3)

        self.assertIn('more data kept arriving after 3 bytes', str(error))
        self.assertFalse(os.path.exists(self.dest + '2.part'))

    def test_failure_keeps_previous_destination_and_stale_part_removed(self):
        with open(self.dest, 'wb') as f:
            f.write(b'old')
        with open(self.dest + '.part', 'wb') as f:
            f.write(b'stale bytes of a crashed download')

        self.assertRaises(exceptions.DownloadError,
                          self.strategy(transient(), retries=0).fetch, 'loc',
                          self.dest, 100)

        self.assertEqual(['pkg'], os.listdir(self.dest_dir))
        with open(self.dest, 'rb') as f:
            self.assertEqual(b'old', f.read())

    def test_unwritable_destination(self):
        strategy = self.strategy(b'never')
        dest = os.path.join(self.dest_dir, 'missing', 'pkg')

        error = self.assertRaises(exceptions.DestinationError,
                                  strategy.fetch, 'loc', dest, 100)

        self.assertIn('No such file or directory', str(error))
        self.assertEqual(0, strategy.attempts)

    def test_check_location_retries_then_unreachable(self):
        strategy = self.strategy(transient(), transient(), retries=1)

        error = self.assertRaises(exceptions.LocationUnreachableError,
                                  strategy.check_location, 'loc')

        self.assertEqual(2, strategy.attempts)
        self.assertIn('(after 2 attempt(s))', str(error))

    def test_check_location_not_found_not_retried(self):
        strategy = self.strategy(permanent_errors()[0])

        self.assertRaises(
            exceptions.ObjectNotFoundError, strategy.check_location,
            'loc')
        self.assertEqual(1, strategy.attempts)

    def test_deadline_is_transient(self):
        strategy = self.strategy()

        strategy.check_deadline(time.monotonic() + 60)
        error = self.assertRaises(exceptions.TransientError,
                                  strategy.check_deadline,
                                  time.monotonic() - 1)

        self.assertIn('download_timeout', str(error))


class FakeResponse:
    def __init__(self, status, headers=None):
        self.status = status
        self.reason = 'Reason'
        self.headers = headers or {}

    def getheader(self, name, default=None):
        return self.headers.get(name, default)


class TestHttpStatuses(base.StrategyTestCase):

    def test_status_classification(self):
        strategy = self.load('http')
        target = strategy.parse_location('https://example.org/pkg.tar')
        expected = {404: exceptions.ObjectNotFoundError,
                    410: exceptions.ObjectNotFoundError,
                    401: exceptions.AccessDeniedError,
                    403: exceptions.AccessDeniedError,
                    400: exceptions.RequestRejectedError,
                    405: exceptions.RequestRejectedError,
                    302: exceptions.RequestRejectedError,
                    408: exceptions.TransientError,
                    429: exceptions.TransientError,
                    500: exceptions.TransientError,
                    503: exceptions.TransientError}
        for status, error in expected.items():
            raised = self.assertRaises(
                exceptions.StrategyError, strategy._raise_for_status,
                target, FakeResponse(status, {'Location': 'http://x/'}))
            self.assertIs(error, type(raised), status)
            self.assertIn('HTTP %d' % status, str(raised))
        strategy._raise_for_status(target, FakeResponse(200))


class TestSwiftErrors(base.StrategyTestCase):

    def classify(self, exc, deadline=None):
        error = self.translate(exc, deadline)
        return type(error)

    def translate(self, exc, deadline=None):
        strategy = self.load('swift', **test_loader.SWIFT_CREDENTIALS)
        target = strategy.parse_location('swift://c/o')
        try:
            with swift._SwiftErrors(strategy, target,
                                    deadline or strategy._deadline()):
                raise exc
        except exceptions.StrategyError as error:
            return error

    def test_classification(self):
        def client_error(status):
            return swift_exc.ClientException('failed', http_status=status,
                                             http_path='/v1/AUTH_t/c/o')

        self.assertIs(exceptions.ObjectNotFoundError,
                      self.classify(client_error(404)))
        self.assertIs(exceptions.AccessDeniedError,
                      self.classify(client_error(401)))
        self.assertIs(exceptions.RequestRejectedError,
                      self.classify(client_error(400)))
        self.assertIs(exceptions.TransientError,
                      self.classify(client_error(503)))
        self.assertIs(exceptions.TransientError,
                      self.classify(client_error(None)))
        self.assertIs(exceptions.TransientError, self.classify(
            requests.exceptions.ConnectionError('refused')))
        self.assertIs(exceptions.TransientError, self.classify(
            urllib3.exceptions.ProtocolError('Connection broken')))

    def test_any_error_after_the_deadline_is_the_timeout(self):
        # The watchdog's shutdown surfaces as whatever the parsers made
        # of the answer it cut short.
        error = self.translate(
            swift_exc.ClientException('failed', http_status=404),
            deadline=time.monotonic() - 1)

        self.assertIsInstance(error, exceptions.TransientError)
        self.assertIn('took longer than [agent] download_timeout',
                      str(error))


class TestRsyncExitStatuses(base.StrategyTestCase):

    def classify(self, status, stderr):
        strategy = self.load('rsync')
        target = strategy.parse_location('rsync://h/m/pkg.tar')
        error = self.assertRaises(exceptions.StrategyError,
                                  strategy._raise_for, target, status,
                                  stderr, 100)
        return type(error)

    def test_classification(self):
        cases = [
            (23, 'link_stat "x" failed: No such file or directory (2)',
             exceptions.ObjectNotFoundError),
            (5, "@ERROR: Unknown module 'm'", exceptions.ObjectNotFoundError),
            (5, '@ERROR: auth failed on module m',
             exceptions.AccessDeniedError),
            (5, '@ERROR: max connections (8) reached -- try again later',
             exceptions.TransientError),
            (11, 'write failed: File too large (27)',
             exceptions.SizeLimitExceededError),
            (1, 'syntax or usage error', exceptions.RequestRejectedError),
            (10, 'Connection refused (111)', exceptions.TransientError),
            (30, 'timeout in data send/receive', exceptions.TransientError),
            (35, 'timeout waiting for daemon connection',
             exceptions.TransientError),
        ]
        for status, stderr, error in cases:
            self.assertIs(error, self.classify(status, stderr), stderr)
