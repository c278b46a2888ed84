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

"""``openstack database package ...`` against a faked API."""

import json

from trove_upgrade.tests.unit.osc import base

PACKAGES = base.MGMT + '/packages'
PACKAGE_ID = '5d1e2f3a-4b5c-4d6e-8f7a-9b0c1d2e3f4a'


def package(**overrides):
    body = {
        'id': PACKAGE_ID, 'name': 'trove-guestagent', 'version': '26.0.0',
        'strategy': 'http', 'location': 'https://repo/g-26.0.0.pkg',
        'state': 'active', 'size': 4096, 'sha256': 'ab' * 32,
        'min_upgrade_from': '25.0', 'signer_key_ids': ['k1', 'k2'],
        'manifest_created_at': '2026-11-29T18:00:00Z',
        'manifest_expires_at': '2027-11-29T18:00:00Z',
        'project_id': base.PROJECT_ID, 'user_id': 'admin',
        'created_at': '2026-11-29T18:00:00Z',
        'updated_at': '2026-11-29T18:00:00Z',
        'links': [{'rel': 'self', 'href': PACKAGES + '/' + PACKAGE_ID}],
    }
    body.update(overrides)
    return body


class TestPackageCommands(base.OSCTestCase):

    def test_create_sends_the_package(self):
        self.requests.post(PACKAGES, json={'package': package()},
                           status_code=201)
        code, out, err = self.openstack(
            'database', 'package', 'create', 'trove-guestagent',
            '--package-version', '26.0.0', '--strategy', 'http',
            '--location', 'https://repo/g-26.0.0.pkg', '-f', 'json')
        self.assertEqual(0, code, err)
        (request,) = self.api_requests()
        self.assertEqual({'package': {
            'name': 'trove-guestagent', 'version': '26.0.0',
            'strategy': 'http', 'location': 'https://repo/g-26.0.0.pkg'}},
            request.json())
        shown = json.loads(out)
        self.assertEqual((PACKAGE_ID, ['k1', 'k2']),
                         (shown['id'], shown['signer_key_ids']))

    def test_refusal_shows_the_reason(self):
        self.requests.post(PACKAGES, status_code=400, json=base.error(
            400, 'Bad Request', 'Package trove-guestagent 26.0.0 refused: '
                                'its manifest failed verification: '
                                'ExpiredManifestError: expired'))
        code, _out, err = self.openstack(
            'database', 'package', 'create', 'trove-guestagent',
            '--package-version', '26.0.0', '--strategy', 'http',
            '--location', 'x')
        self.assertEqual(1, code)
        self.assertIn('ExpiredManifestError', err)

    def test_list_passes_the_version_query(self):
        self.requests.get(PACKAGES, json={'packages': [package()]})
        code, out, err = self.openstack(
            'database', 'package', 'list', '--package-version', '>=25.1',
            '--state', 'active', '-f', 'json')
        self.assertEqual(0, code, err)
        (request,) = self.api_requests()
        self.assertEqual({'version': ['>=25.1'], 'state': ['active']},
                         request.qs)
        self.assertEqual(['26.0.0'], [p['Version'] for p in json.loads(out)])

    def test_set_and_delete(self):
        href = PACKAGES + '/' + PACKAGE_ID
        self.requests.patch(href, json={'package': package(
            state='retired')})
        self.requests.delete(href, status_code=409, json=base.error(
            409, 'Conflict', 'Package trove-guestagent 26.0.0 is in use: '
                             'desired version(s) X (blue).'))
        code, out, err = self.openstack(
            'database', 'package', 'set', PACKAGE_ID, '--state', 'retired',
            '-f', 'json')
        self.assertEqual(0, code, err)
        self.assertEqual('retired', json.loads(out)['state'])
        code, _out, err = self.openstack(
            'database', 'package', 'delete', PACKAGE_ID)
        self.assertEqual(1, code)
        self.assertIn('is in use: desired version(s) X (blue)', err)

    def test_fleet_json(self):
        rows = [{'version': '25.1.0', 'running': 3, 'targeted': 2,
                 'in_flight': 1, 'failed': 0, 'packages': []},
                {'version': '26.0.0', 'running': 1, 'targeted': 0,
                 'in_flight': 0, 'failed': 1,
                 'packages': [{'id': PACKAGE_ID, 'name': 'trove-guestagent',
                               'state': 'active'}]}]
        self.requests.get(PACKAGES + '/fleet', json={'versions': rows})
        code, out, err = self.openstack('database', 'package', 'fleet',
                                        '-f', 'json')
        self.assertEqual(0, code, err)
        self.assertEqual(
            [{'Version': '25.1.0', 'Running': 3, 'Targeted': 2,
              'In Flight': 1, 'Failed': 0, 'Packages': []},
             {'Version': '26.0.0', 'Running': 1, 'Targeted': 0,
              'In Flight': 0, 'Failed': 1,
              'Packages': [{'id': PACKAGE_ID, 'name': 'trove-guestagent',
                            'state': 'active'}]}],
            json.loads(out))
