"""auth_strategy = keystone, up to the point where Keystone is asked.

The functional tests cover real tokens against a real Keystone; these show
that keystonemiddleware's own refusals come out as the API's JSON errors.
"""

from trove_upgrade.api import deploy
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

    def test_versions_need_no_token(self):
        resp = self.request('GET', '/', identity=False)
        self.assertEqual(200, resp.status_int, resp.text)
