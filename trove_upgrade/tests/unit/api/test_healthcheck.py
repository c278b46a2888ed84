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

"""The health check's database backend, its query mocked, its clock moved."""

import threading

import fixtures
from oslo_db import exception as db_exc
from oslo_middleware import healthcheck as oslo_healthcheck
import stevedore

from trove_upgrade.api import healthcheck
from trove_upgrade.conf import opts
from trove_upgrade.tests import base

SECRET_ERROR = ('(psycopg2.OperationalError) connection to server at '
                '"db.internal" (10.1.2.3), port 5432 failed: FATAL: '
                'password authentication failed for user "trove_upgrade" '
                'postgresql://trove_upgrade:s3cret@db.internal/trove_upgrade')


class TestDatabaseHealthcheck(base.TestCase):

    def setUp(self):
        super().setUp()
        self.ping = self.useFixture(fixtures.MockPatch(
            'trove_upgrade.db.common.ping')).mock
        self.now = 100.0
        clock = self.useFixture(fixtures.MockPatchObject(
            healthcheck, 'time')).mock
        clock.monotonic.side_effect = lambda: self.now
        self.log = self.useFixture(fixtures.FakeLogger(
            name=healthcheck.__name__, level='INFO'))
        self.backend = healthcheck.DatabaseHealthcheck(self.conf, {})

    def check(self):
        return self.backend.healthcheck(8790)

    def test_available_while_the_query_succeeds(self):
        result = self.check()
        self.assertTrue(result.available)
        self.assertEqual('OK', result.reason)
        self.ping.assert_called_once_with()

    def test_unavailable_with_a_bounded_reason_and_the_error_logged(self):
        self.ping.side_effect = db_exc.DBConnectionError(SECRET_ERROR)
        result = self.check()
        self.assertFalse(result.available)
        self.assertEqual('DATABASE UNAVAILABLE', result.reason)
        self.assertEqual('DBConnectionError', result.details)
        # The driver's words, which may name the server and its user, go
        # to the log only.
        self.assertIn('password authentication failed', self.log.output)
        self.assertNotIn('Traceback', self.log.output)

    def test_an_unexpected_error_is_unavailable_with_a_traceback_logged(self):
        self.ping.side_effect = RuntimeError(SECRET_ERROR)
        result = self.check()
        self.assertFalse(result.available)
        self.assertEqual('DATABASE UNAVAILABLE', result.reason)
        self.assertEqual('RuntimeError', result.details)
        self.assertIn('Traceback', self.log.output)

    def test_one_query_answers_for_a_second(self):
        first = self.check()
        self.now += healthcheck.CACHE_SECONDS - 0.01
        self.assertIs(first, self.check())
        self.assertEqual(1, self.ping.call_count)
        self.now += 0.01
        self.ping.side_effect = db_exc.DBConnectionError(SECRET_ERROR)
        self.assertFalse(self.check().available)
        self.assertEqual(2, self.ping.call_count)

    def test_logs_when_the_outcome_changes_not_at_every_check(self):
        self.ping.side_effect = db_exc.DBConnectionError(SECRET_ERROR)
        for _ in range(3):
            self.assertFalse(self.check().available)
            self.now += healthcheck.CACHE_SECONDS
        self.assertEqual(3, self.ping.call_count)
        self.assertEqual(1, self.log.output.count('answers unavailable'))
        self.ping.side_effect = None
        self.assertTrue(self.check().available)
        self.assertEqual(1, self.log.output.count('answers available'))

    def query_in_another_thread(self, error=None):
        """Start a check whose query waits; return its release and answer."""
        querying, release = threading.Event(), threading.Event()

        def slow_ping():
            querying.set()
            release.wait(60)
            if error is not None:
                raise error

        self.ping.side_effect = slow_ping
        answers = []
        thread = threading.Thread(target=lambda: answers.append(
            self.check()))
        thread.start()
        self.addCleanup(thread.join)
        self.addCleanup(release.set)
        self.assertTrue(querying.wait(60))

        def finish():
            release.set()
            thread.join(60)
            [answer] = answers
            return answer
        return finish

    def test_other_requests_keep_the_last_outcome_while_one_queries(self):
        first = self.check()
        self.now += healthcheck.CACHE_SECONDS
        finish = self.query_in_another_thread(
            db_exc.DBConnectionError(SECRET_ERROR))
        # Neither queued behind the query nor a query of its own.
        self.assertIs(first, self.check())
        self.assertEqual(2, self.ping.call_count)
        answer = finish()
        self.assertFalse(answer.available)
        self.assertIs(answer, self.check())

    def test_a_query_without_an_answer_makes_the_node_unavailable(self):
        first = self.check()
        self.now += healthcheck.CACHE_SECONDS
        finish = self.query_in_another_thread()
        self.now += healthcheck.QUERY_SECONDS - 0.5
        self.assertIs(first, self.check())
        self.now += 0.5
        for _ in range(3):
            result = self.check()
            self.assertFalse(result.available)
            self.assertEqual('DATABASE UNAVAILABLE', result.reason)
            self.assertEqual('no answer for 5 seconds', result.details)
        self.assertEqual(2, self.ping.call_count)
        self.assertEqual(1, self.log.output.count('answers unavailable'))
        self.assertIn('has not answered a query for 5 seconds',
                      self.log.output)
        # The query answers at last.
        self.assertTrue(finish().available)
        self.assertEqual(1, self.log.output.count('answers available'))

    def test_the_first_outcome_is_awaited_but_not_queried_twice(self):
        finish = self.query_in_another_thread()
        answers = []
        waiter = threading.Thread(target=lambda: answers.append(
            self.check()))
        waiter.start()
        answer = finish()
        waiter.join(60)
        self.assertEqual([answer], answers)
        self.assertTrue(answer.available)
        self.assertEqual(1, self.ping.call_count)

    def test_the_first_outcome_is_awaited_for_a_while_only(self):
        self.query_in_another_thread()
        self.now += healthcheck.QUERY_SECONDS
        result = self.check()
        self.assertFalse(result.available)
        self.assertEqual('no answer for 5 seconds', result.details)
        self.assertEqual(1, self.ping.call_count)


class TestRegistration(base.TestCase):
    """setup.cfg's entry point and the default name the same backend."""

    def test_the_default_backends_are_the_database_backend(self):
        self.assertEqual(
            [healthcheck.DatabaseHealthcheck],
            [stevedore.DriverManager(oslo_healthcheck.Healthcheck.NAMESPACE,
                                     name).driver
             for name in opts.HEALTHCHECK_BACKENDS])
