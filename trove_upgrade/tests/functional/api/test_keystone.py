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

"""The API behind keystonemiddleware, with real tokens from a real Keystone.

One Keystone serves the whole class. Each test builds the API with
``[api] auth_strategy = keystone`` and ``[keystone_authtoken]`` pointing at
that Keystone, so auth_token validates every token over HTTP.
"""


import fixtures
from keystoneauth1 import exceptions as ks_exc
from oslo_messaging import conffixture
from oslo_utils import uuidutils
import sqlalchemy as sa
import webob

from trove_upgrade.api import deploy
from trove_upgrade.api import server as api_server
from trove_upgrade.common import rpc
from trove_upgrade import conf
from trove_upgrade.db import models
from trove_upgrade.tests import base
from trove_upgrade.tests.fixtures import authtoken
from trove_upgrade.tests.fixtures import database
from trove_upgrade.tests.functional import keystone

INSTANCE_ID = '0b7c8a34-5a9e-4f0e-8d5e-6f1f8f0e2a11'
BODY = {'instance_id': INSTANCE_ID, 'instance_version': 'v1.0.1',
        'strategy': 'swift', 'location': 'swift://guest/agent.tar.gz'}


class TestKeystoneAuth(base.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.keystone = keystone.Keystone()
        cls.keystone.setUp()
        try:
            cls.member_project_id = cls.keystone.create_project()
            name = 'member-' + uuidutils.generate_uuid(dashed=False)
            cls.keystone.create_user(name, 'member-secret',
                                     cls.member_project_id,
                                     roles=['member', 'reader'])
            cls.member_name = name
            cls.admin_token = cls.keystone.admin.get_token()
            cls.member_token = cls.keystone.session(
                name, 'member-secret', cls.member_project_id).get_token()
        except Exception:
            cls.keystone.cleanUp()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.keystone.cleanUp()
        super().tearDownClass()

    def setUp(self):
        super().setUp()
        self.database = self.useFixture(database.Database())
        self.useFixture(conffixture.ConfFixture(conf.CONF))
        rpc.cleanup()
        self.addCleanup(rpc.cleanup)
        self.useFixture(authtoken.AuthPluginOptions())
        config = self.useFixture(fixtures.TempDir()).join('api.conf')
        with open(config, 'w') as f:
            # In memory: an accepted POST casts, and the default transport
            # would leave the shared broker an exchange.
            f.write('[DEFAULT]\ntransport_url = fake:/\n\n'
                    '[api]\nauth_strategy = keystone\n\n'
                    '[keystone_authtoken]\n')
            for name, value in self.keystone.authtoken_options().items():
                f.write('%s = %s\n' % (name, value))
        self.conf([], default_config_files=[config], default_config_dirs=[])
        self.app = deploy.loadapp(self.conf)

    def request(self, method, project_id, token=None, body=None):
        req = webob.Request.blank(
            '/v1.0/%s/mgmt/upgrades' % project_id, method=method)
        if token is not None:
            req.headers['X-Auth-Token'] = token
        if body is not None:
            req.json_body = body
            req.content_type = 'application/json'
        return req.get_response(self.app)

    def assertError(self, resp, status, detail):
        self.assertEqual(status, resp.status_int, resp.text)
        error, = resp.json['errors']
        self.assertEqual(status, error['status'])
        self.assertIn(detail, error['detail'])
        self.assertEqual(resp.headers['x-openstack-request-id'],
                         error['request_id'])

    def assertNothingRecorded(self):
        with self.database.engine.connect() as connection:
            self.assertEqual(0, connection.scalar(
                sa.select(sa.func.count()).select_from(models.Upgrade)))

    def test_admin_token_gets_202(self):
        project_id = self.keystone.admin_project_id
        resp = self.request('POST', project_id, self.admin_token, BODY)
        self.assertEqual(202, resp.status_int, resp.text)
        upgrade = resp.json['upgrade']
        self.assertEqual(project_id, upgrade['project_id'])
        self.assertEqual(self.keystone.admin.get_user_id(),
                         upgrade['user_id'])
        listed = self.request('GET', project_id, self.admin_token)
        self.assertEqual([upgrade['id']],
                         [u['id'] for u in listed.json['upgrades']])

    def test_member_token_gets_403(self):
        for method, body in (('POST', BODY), ('GET', None)):
            resp = self.request(method, self.member_project_id,
                                self.member_token, body)
            self.assertError(resp, 403, 'Policy does not allow '
                                        'trove_upgrade:upgrades:')
        self.assertNothingRecorded()

    def test_no_token_gets_401(self):
        resp = self.request('POST', self.keystone.admin_project_id,
                            body=BODY)
        self.assertError(resp, 401, 'The request has no X-Auth-Token header')
        self.assertEqual('Keystone uri="%s"' % self.keystone.auth_url,
                         resp.headers['WWW-Authenticate'])
        self.assertNothingRecorded()

    def test_healthcheck_needs_no_token(self):
        resp = webob.Request.blank('/healthcheck').get_response(self.app)
        self.assertEqual(200, resp.status_int, resp.text)

    def test_bad_token_gets_401(self):
        for token in ('not-a-token', self.admin_token[:-4] + 'AAAA'):
            resp = self.request('POST', self.keystone.admin_project_id,
                                token, BODY)
            self.assertError(resp, 401, 'The token is invalid or has '
                                        'expired.')
        self.assertNothingRecorded()

    def test_admin_token_of_another_project_gets_403(self):
        resp = self.request('POST', self.member_project_id,
                            self.admin_token, BODY)
        self.assertError(resp, 403, 'The project in the URL')
        self.assertNothingRecorded()

    def test_clients_find_the_api_in_the_catalog(self):
        server = api_server.APIService('127.0.0.1', 0, self.app, 60, 100,
                                       65536)
        server.start()
        self.addCleanup(server.wait)
        self.addCleanup(server.stop)
        url = 'http://127.0.0.1:%d' % server.address[1]
        self.keystone.register_service(url)

        # New sessions: their tokens' catalogs hold the new endpoint.
        admin = self.keystone.session('admin', self.keystone.admin_password,
                                      self.keystone.admin_project_id)
        member = self.keystone.session(self.member_name, 'member-secret',
                                       self.member_project_id)
        endpoint = {'service_type': keystone.SERVICE_TYPE,
                    'interface': 'public'}
        self.assertEqual(url, admin.get_endpoint(**endpoint))
        path = '/v1.0/%s/mgmt/upgrades'
        resp = admin.post(path % self.keystone.admin_project_id, json=BODY,
                          endpoint_filter=endpoint)
        self.assertEqual(202, resp.status_code, resp.text)
        resp = admin.get(path % self.keystone.admin_project_id,
                         endpoint_filter=endpoint)
        self.assertEqual(1, len(resp.json()['upgrades']))
        try:
            member.get(path % self.member_project_id,
                       endpoint_filter=endpoint)
        except ks_exc.Forbidden as e:
            self.assertIn('Policy does not allow',
                          e.response.json()['errors'][0]['detail'])
        else:
            self.fail('a member listed the upgrades')
