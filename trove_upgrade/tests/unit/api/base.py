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

"""The API in process, on noauth2, a fresh SQLite and the fake transport."""

from oslo_serialization import jsonutils
from oslo_utils import uuidutils
import sqlalchemy as sa
import webob

from trove_upgrade.api import deploy
from trove_upgrade.db import models
from trove_upgrade.tests import base
from trove_upgrade.tests.fixtures import database
from trove_upgrade.tests.fixtures import rpc as rpc_fixture

INSTANCE_ID = '6a9b1d1e-3c4f-4f51-9d62-1a2b3c4d5e6f'


def upgrade_body(**overrides):
    body = {
        'instance_id': INSTANCE_ID,
        'instance_version': 'v1.0.1',
        'strategy': 'swift',
        'location': 'http://swift/tenant/container/'
                    'trove-guestagent-v1.0.1.tar.gz',
    }
    body.update(overrides)
    return body


class APITestCase(base.TestCase):

    auth_strategy = 'noauth2'
    # A fresh SQLite; a functional test may take a server's database.
    database_fixture = database.Database

    def setUp(self):
        super().setUp()
        self.database = self.useFixture(self.database_fixture())
        # Explicitly the in-memory driver: in a run that mixes unit and
        # functional tests, an earlier test may have left another URL.
        self.transport = self.useFixture(rpc_fixture.FakeTransport())
        # The policy enforcer looks for its file through the parsed config.
        self.conf([], default_config_files=[], default_config_dirs=[])
        self.flags(group='api', auth_strategy=self.auth_strategy)
        self.project_id = uuidutils.generate_uuid(dashed=False)
        self.mgmt = '/v1.0/%s/mgmt' % self.project_id
        self.app = deploy.loadapp(self.conf)

    def request(self, method, path, body=None, roles='admin',
                content_type='application/json', headers=None,
                raw_body=None, identity=True):
        req = webob.Request.blank(path, method=method)
        if identity:
            req.headers['X-User-Id'] = 'operator'
            req.headers['X-Project-Id'] = self.project_id
            req.headers['X-Roles'] = roles
        if body is not None:
            raw_body = jsonutils.dump_as_bytes(body)
        if raw_body is not None:
            req.body = raw_body
            req.environ.pop('CONTENT_TYPE', None)
            if content_type is not None:
                req.headers['Content-Type'] = content_type
        req.headers.update(headers or {})
        return req.get_response(self.app)

    def count(self, model):
        with self.database.engine.connect() as connection:
            return connection.scalar(
                sa.select(sa.func.count()).select_from(model))

    def assertNothingRecorded(self):
        self.assertEqual(0, self.count(models.Upgrade))
        self.assertEqual(0, self.count(models.UpgradeEvent))

    def assertError(self, resp, status, detail):
        """A JSON error with ``status`` whose detail contains ``detail``."""
        self.assertEqual(status, resp.status_int, resp.text)
        self.assertEqual('application/json', resp.content_type)
        error, = resp.json['errors']
        self.assertEqual(status, error['status'])
        self.assertIn(detail, error['detail'])
        self.assertEqual(resp.headers['x-openstack-request-id'],
                         error['request_id'])
        self.assertNotIn('Traceback', resp.text)
        return error
