"""auth_strategy = keystone, up to the point where Keystone is asked.

The functional tests cover real tokens against a real Keystone; these show
that keystonemiddleware's own refusals come out as the API's JSON errors.
"""

import socket

import fixtures

from trove_upgrade.api import deploy
from trove_upgrade.tests.fixtures import authtoken
from trove_upgrade.tests.unit.api import base


class TestKeystoneAuth(base.APITestCase):

    auth_strategy = 'keystone'

    def setUp(self):
        super().setUp()
        self.flags(group='keystone_authtoken',
                   www_authenticate_uri='http://127.0.0.1:5000/v3')
        self.app = deploy.loadapp(self.conf)

    def test_no_token_is_401_json(self):
        # Identity headers alone mean nothing: auth_token strips them.
        resp = self.request('POST', self.mgmt + '/upgrades',
                            base.upgrade_body())
        self.assertError(resp, 401, 'The request has no X-Auth-Token '
                                    'header; this API requires a Keystone '
                                    'token.')
        self.assertEqual('Keystone uri="http://127.0.0.1:5000/v3"',
                         resp.headers['WWW-Authenticate'])
        self.assertNothingRecorded()

    def test_healthcheck_needs_no_token(self):
        resp = self.request('GET', '/healthcheck', identity=False)
        self.assertEqual(200, resp.status_int, resp.text)

    def test_keystone_unreachable_is_503_json(self):
        with socket.socket() as sock:
            sock.bind(('127.0.0.1', 0))
            closed = 'http://127.0.0.1:%d/v3' % sock.getsockname()[1]
        self.useFixture(authtoken.AuthPluginOptions())
        # The password plugin's options exist only once it is loaded:
        # they come from a file, as in a deployment.
        config = self.useFixture(fixtures.TempDir()).join('api.conf')
        with open(config, 'w') as f:
            f.write('[api]\nauth_strategy = keystone\n'
                    '[keystone_authtoken]\n'
                    'www_authenticate_uri = %s\nauth_url = %s\n'
                    'auth_type = password\nusername = trove-upgrade\n'
                    'password = secret\nproject_name = service\n'
                    'user_domain_id = default\n'
                    'project_domain_id = default\n' % (closed, closed))
        self.conf([], default_config_files=[config], default_config_dirs=[])
        self.app = deploy.loadapp(self.conf)
        resp = self.request('POST', self.mgmt + '/upgrades',
                            base.upgrade_body(),
                            headers={'X-Auth-Token': 'a-token'})
        self.assertError(resp, 503, 'The Keystone service is temporarily '
                                    'unavailable.')
        self.assertNothingRecorded()

    def test_versions_need_no_token(self):
        resp = self.request('GET', '/', identity=False)
        self.assertEqual(200, resp.status_int, resp.text)
