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

"""The API process while its PostgreSQL database goes away and comes back.

The test ends the server connections of its own database only
(``pg_terminate_backend``), and closes that database to new connections
(``ALLOW_CONNECTIONS false``) for an outage the API cannot reconnect
through, while a real ``trove-upgrade-api`` serves it. A database that
hangs instead is one behind a relay that stops passing bytes.
"""

import os
import threading
import time

import requests
import sqlalchemy as sa

from trove_upgrade.tests.fixtures import database
from trove_upgrade.tests.fixtures import relay
from trove_upgrade.tests.functional.api import test_api_process

DATABASE_UNAVAILABLE = 'The database is unavailable.'


class _PostgresqlAPI(test_api_process._ServedAPI):
    """A real trove-upgrade-api on a PostgreSQL database of its own."""

    listening = test_api_process.TestConsoleScript.listening

    def setUp(self):
        self.database = self.useFixture(database.PostgresqlDatabase())
        self.addCleanup(self.database.allow_connections, True)
        super().setUp()
        self.start([os.path.join(test_api_process.BIN, 'trove-upgrade-api'),
                    '--config-file', self.config,
                    '--log-file', self.log_file])

    def connection_url(self):
        return self.database.url

    def write_config(self):
        super().write_config()
        with open(self.config, 'a') as f:
            f.write('[database]\nconnection = %s\n' % self.connection_url())

    def mgmt(self, method, path='', **kwargs):
        return requests.request(
            method, '%s/v1.0/%s/mgmt/upgrades%s'
            % (self.url, test_api_process.PROJECT, path),
            headers=test_api_process.HEADERS, timeout=60, **kwargs)

    def assertUnavailable(self, resp):
        self.assertEqual(503, resp.status_code, resp.text)
        [error] = resp.json()['errors']
        self.assertEqual(503, error['status'])
        self.assertTrue(error['detail'].startswith(DATABASE_UNAVAILABLE),
                        error)

    def health(self, method='GET', **headers):
        return requests.request(method, self.url + '/healthcheck',
                                headers=headers, timeout=60)

    def health_once(self, status, method='GET'):
        """The health check's answer once it is ``status``, or the last.

        It keeps one outcome for a second: the outage or the recovery
        shows at a later check.
        """
        deadline = time.monotonic() + 30
        while True:
            resp = self.health(method)
            if resp.status_code == status or time.monotonic() > deadline:
                return resp
            time.sleep(0.1)

    def read_log(self):
        with open(self.log_file) as f:
            return f.read()


class TestDatabaseOutage(_PostgresqlAPI):

    def cancel_while_killed(self, upgrade_id):
        """DELETE the upgrade; kill the API's connection mid-transaction.

        The test holds the upgrade's row, so the API's transaction waits
        for it until the test terminates the API's connection.
        """
        engine = sa.create_engine(self.database.url)
        self.addCleanup(engine.dispose)
        answer = []
        with engine.connect() as holder, holder.begin():
            holder.execute(sa.text('SELECT id FROM upgrades WHERE id = :id '
                                   'FOR UPDATE'), {'id': upgrade_id})
            cancel = threading.Thread(target=lambda: answer.append(
                self.mgmt('DELETE', '/' + upgrade_id)))
            cancel.start()
            deadline = time.monotonic() + 30
            while not self.database.terminate("wait_event_type = 'Lock'"):
                self.assertLess(time.monotonic(), deadline,
                                'the API never waited for the row')
                time.sleep(0.05)
            cancel.join(60)
        return answer[0]

    def test_answers_503_while_the_database_is_gone_then_recovers(self):
        created = self.mgmt('POST', json=test_api_process.BODY)
        self.assertEqual(202, created.status_code, created.text)
        upgrade_id = created.json()['upgrade']['id']

        # Idle connections ended: the pool's ping replaces them.
        self.assertGreater(self.database.terminate(), 0)
        self.assertEqual(200, self.mgmt('GET').status_code)

        self.assertUnavailable(self.cancel_while_killed(upgrade_id))
        self.assertEqual('SENT', self.mgmt(
            'GET', '/' + upgrade_id).json()['upgrade']['status'])

        self.database.allow_connections(False)
        self.database.terminate()
        self.assertUnavailable(self.mgmt('GET'))
        self.assertUnavailable(self.mgmt('POST',
                                         json=test_api_process.BODY))

        self.database.allow_connections(True)
        self.assertEqual(200, self.mgmt('DELETE', '/' + upgrade_id)
                         .status_code)
        listed = self.mgmt('GET').json()['upgrades']
        self.assertEqual([(upgrade_id, 'CANCELLED')],
                         [(u['id'], u['status']) for u in listed])
        with open(self.log_file) as f:
            log = f.read()
        self.assertIn('The database failed serving DELETE', log)
        self.assertNotIn('Traceback', log)
        self.assertEqual(None, self.process.poll())

    def test_healthcheck_is_unavailable_while_the_database_is_gone(self):
        resp = self.health()
        self.assertEqual((200, 'OK'), (resp.status_code, resp.text))
        self.assertEqual(204, self.health('HEAD').status_code)

        self.database.allow_connections(False)
        self.database.terminate()
        resp = self.health_once(503)
        self.assertEqual((503, 'DATABASE UNAVAILABLE'),
                         (resp.status_code, resp.text))
        resp = self.health(Accept='application/json')
        self.assertEqual(503, resp.status_code)
        self.assertEqual({'detailed': False,
                          'reasons': ['DATABASE UNAVAILABLE']}, resp.json())
        resp = self.health('HEAD')
        self.assertEqual((503, ''), (resp.status_code, resp.text))
        # What the driver said (server, database, user) stays in the log.
        resp = self.health(Accept='text/html')
        self.assertEqual(503, resp.status_code)
        for secret in (self.database.name, 'openstack_citest', '5432'):
            self.assertNotIn(secret, resp.text)
        self.assertUnavailable(self.mgmt('GET'))

        self.database.allow_connections(True)
        resp = self.health_once(200)
        self.assertEqual((200, 'OK'), (resp.status_code, resp.text))
        self.assertEqual(204, self.health('HEAD').status_code)
        self.assertEqual(200, self.mgmt('GET').status_code)
        log = self.read_log()
        self.assertEqual(1, log.count('The health check answers unavailable'),
                         log)
        self.assertIn('not currently accepting connections', log)
        self.assertEqual(1, log.count('The health check answers available'),
                         log)
        self.assertNotIn('Traceback', log)


class TestHungDatabase(_PostgresqlAPI):
    """The database answers nothing: neither refuses nor replies."""

    def setUp(self):
        self.relay = self.useFixture(relay.Relay(5432))
        super().setUp()

    def connection_url(self):
        return self.database.url.replace(
            '@127.0.0.1/', '@127.0.0.1:%d/' % self.relay.port)

    def health_within(self, seconds):
        """The answer, or None when there is none in ``seconds``.

        As a load balancer's check: the request that runs the query waits
        as long as the database does.
        """
        try:
            return requests.get(self.url + '/healthcheck', timeout=seconds)
        except requests.Timeout:
            return None

    def test_healthcheck_is_unavailable_while_the_database_hangs(self):
        self.assertEqual(200, self.health().status_code)
        self.relay.freeze()
        deadline = time.monotonic() + 60
        while True:
            resp = self.health_within(2)
            if resp is not None and resp.status_code == 503:
                break
            self.assertLess(time.monotonic(), deadline,
                            'the health check never answered 503')
            time.sleep(0.1)
        self.assertEqual('DATABASE UNAVAILABLE', resp.text)
        # Answered at once, with no query of its own.
        self.assertEqual(503, self.health_within(10).status_code)
        self.assertEqual(503, requests.head(self.url + '/healthcheck',
                                            timeout=10).status_code)
        self.assertEqual(1, self.read_log().count(
            'The health check answers unavailable: the database has not '
            'answered a query for'))

        self.relay.thaw()
        resp = self.health_once(200)
        self.assertEqual((200, 'OK'), (resp.status_code, resp.text))
        self.assertEqual(200, self.mgmt('GET').status_code)
        log = self.read_log()
        self.assertEqual(1, log.count('The health check answers available'),
                         log)
        self.assertNotIn('Traceback', log)
        self.assertEqual(None, self.process.poll())
