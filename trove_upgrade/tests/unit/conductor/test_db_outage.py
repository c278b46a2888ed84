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

from unittest import mock

import fixtures
from oslo_db import exception as db_exc
from oslo_messaging.rpc import dispatcher
from sqlalchemy import exc as sa_exc

from trove_upgrade.common import context
from trove_upgrade.common import exception
from trove_upgrade.common import rpc_interface
from trove_upgrade.conductor import db_outage
from trove_upgrade.conductor import manager
from trove_upgrade.tests import base
from trove_upgrade.tests.fixtures import database
from trove_upgrade.tests.fixtures import rpc as rpc_fixture

INSTANCE = '7a1f8e3c-9b0d-4c2e-8f61-0d5a3b9c4e21'
UPGRADE = '0b7e2c44-5a1d-4f3e-9c8b-6e2d1a0f9b37'
AGENT = ('2026.2.0', '21.0.0', '1.2', 'RUNNING', {}, 'guest-1')


def _gone():
    """What SQLAlchemy raises for a connection the server dropped."""
    return sa_exc.OperationalError(
        'SELECT 1\nFROM upgrades', {},
        Exception('server closed the connection\nunexpectedly'))


class TestPassParts(base.TestCase):
    """Each part of a pass fails alone, in one line when the DB is away."""

    def setUp(self):
        super().setUp()
        self.logger = self.useFixture(fixtures.FakeLogger(
            name='trove_upgrade.conductor.db_outage'))

    def test_an_unavailable_database_is_one_line(self):
        db_outage.attempt('A reconcile pass', mock.Mock(side_effect=_gone()))
        self.assertIn('A reconcile pass failed, the database is '
                      'unavailable; the next pass tries again: server '
                      'closed the connection', self.logger.output)
        self.assertNotIn('Traceback', self.logger.output)
        self.assertEqual(1, len(self.logger.output.strip().splitlines()))

    def test_anything_else_keeps_its_traceback(self):
        part = mock.Mock(side_effect=ValueError('a bug'))
        db_outage.attempt('Sending the held upgrades', part, 'ctx')
        part.assert_called_once_with('ctx')
        self.assertIn('Sending the held upgrades failed; the next pass tries '
                      'again.', self.logger.output)
        self.assertIn('Traceback', self.logger.output)
        self.assertIn('ValueError: a bug', self.logger.output)


class TestEndpoints(base.TestCase):
    """Every message the database fails is one line and a clear refusal."""

    def setUp(self):
        super().setUp()
        self.useFixture(database.Database())
        self.useFixture(rpc_fixture.FakeTransport())
        self.logger = self.useFixture(fixtures.FakeLogger(
            name='trove_upgrade.conductor'))
        self.manager = manager.ConductorManager()
        self.context = context.RequestContext(request_id='req-agent')

    def assertUnavailable(self, error, gist, method, *args, **kwargs):
        """Endpoint ``method`` refused with DatabaseUnavailableError in a line.

        ``error`` is what the first read of the database raises, ``gist``
        the part of it the line quotes.
        """
        logged = self.logger.output.splitlines()
        with mock.patch.object(self.manager, '_authenticate',
                               side_effect=error):
            e = self.assertRaises(dispatcher.ExpectedException,
                                  getattr(self.manager, method),
                                  self.context, *args, **kwargs)
        refusal = e.exc_info[1]
        self.assertIsInstance(refusal, exception.DatabaseUnavailableError)
        self.assertEqual('The conductor could not handle %s: its database '
                         'is unavailable. Try again later.' % method,
                         str(refusal))
        self.assertEqual(
            logged + ['The %s message of instance %s failed, the database '
                      'is unavailable: %s' % (method, INSTANCE, gist)],
            self.logger.output.splitlines())

    def test_every_endpoint(self):
        report = {'upgrade_id': UPGRADE, 'to_state': 'VERIFYING',
                  'detail': None, 'from_version': 'v1.0.0',
                  'to_version': 'v2.0.0'}
        for error, gist in ((_gone(), 'server closed the connection'),
                            (db_exc.DBConnectionError('refused'),
                             'refused')):
            self.assertUnavailable(error, gist, 'register_agent',
                                   INSTANCE, *AGENT)
            # As oslo.messaging calls them: by keyword.
            self.assertUnavailable(error, gist, 'heartbeat',
                                   **dict(zip(rpc_interface.CONDUCTOR
                                              .arguments('heartbeat'),
                                              (INSTANCE,) + AGENT)))
            self.assertUnavailable(error, gist, 'start_upgrade',
                                   INSTANCE, UPGRADE, 'v1.0.0')
            self.assertUnavailable(error, gist,
                                   'report_upgrade_state',
                                   INSTANCE, *report.values())
            self.assertUnavailable(error, gist,
                                   'report_upgrade_states',
                                   INSTANCE, [report])

    def test_other_errors_are_left_to_oslo_messaging(self):
        with mock.patch.object(self.manager, '_authenticate',
                               side_effect=ValueError('a bug')):
            self.assertRaises(ValueError, self.manager.register_agent,
                              self.context, INSTANCE, *AGENT)
        self.assertEqual('', self.logger.output)
