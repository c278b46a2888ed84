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

"""Where the client sends requests, and how failures read."""

import json

import requests

from trove_upgrade.tests.unit.osc import base

OTHER = 'http://other.test:9000'


class TestEndpointOverride(base.OSCTestCase):

    def test_a_root_url_gets_the_project_of_the_token(self):
        url = '%s/v1.0/%s/mgmt/agents' % (OTHER, base.PROJECT_ID)
        self.requests.get(url, json={'agents': []})

        code, out, err = self.openstack(
            '--os-guest-upgrade-url', OTHER + '/', 'database', 'agent',
            'list')

        self.assertEqual(0, code, err)
        self.assertEqual(url, self.requests.last_request.url)
        self.assertEqual(base.TOKEN,
                         self.requests.last_request.headers['X-Auth-Token'])

    def test_a_project_scoped_url_is_used_as_it_is(self):
        self.requests.get(OTHER + '/v1.0/demo/mgmt/agents',
                          json={'agents': []})

        code, out, err = self.openstack(
            '--os-guest-upgrade-url', OTHER + '/v1.0/demo', 'database',
            'agent', 'list')

        self.assertEqual(0, code, err)
        self.assertEqual(OTHER + '/v1.0/demo/mgmt/agents',
                         self.requests.last_request.url)

    def test_the_environment_variable_works_too(self):
        self.useFixture(base.fixtures.EnvironmentVariable(
            'OS_GUEST_UPGRADE_URL', OTHER + '/v1.0/demo'))
        self.requests.get(OTHER + '/v1.0/demo/mgmt/agents',
                          json={'agents': []})

        code, out, err = self.openstack('database', 'agent', 'list')

        self.assertEqual(0, code, err)
        self.assertEqual(OTHER + '/v1.0/demo/mgmt/agents',
                         self.requests.last_request.url)

    def test_a_minor_api_version_selects_the_same_client(self):
        self.requests.get(base.MGMT + '/agents', json={'agents': []})

        code, out, err = self.openstack(
            '--os-guest-upgrade-api-version', '1.0', 'database', 'agent',
            'list')

        self.assertEqual(0, code, err)

    def test_an_unknown_major_version_has_no_commands(self):
        code, out, err = self.openstack(
            '--os-guest-upgrade-api-version', '2', 'database', 'agent',
            'list')

        self.assertNotEqual(0, code)
        self.assertIn('guest_upgrade API version 2 is not in supported '
                      'versions: 1', err)
        self.assertEqual([], self.api_requests())


class TestMalformedEndpointOverride(base.OSCTestCase):

    def test_the_option_and_the_value_are_named(self):
        # urllib's terse "Invalid IPv6 URL", or a request error about a URL
        # the client had built from it.
        for url, reason in (
                ('http://[::1', 'Invalid IPv6 URL'),
                ('upgrade.test:8790/v1.0/p',
                 'it must start with http:// or https://'),
                ('http:///v1.0/p', 'it names no host'),
                ('http://127.0.0.1:99999/v1.0/p',
                 'Port out of range 0-65535'),
                ('http://a b/v1.0/p', 'its host holds white space')):
            code, out, err = self.openstack(
                '--os-guest-upgrade-url', url, 'database', 'agent', 'list')
            self.assertEqual(1, code, err)
            self.assertEqual(
                '--os-guest-upgrade-url (or OS_GUEST_UPGRADE_URL) %r is not '
                'a URL of the API: %s.\n' % (url, reason), err)
            self.assertEqual([], self.api_requests())


class TestNoAuth(base.OSCTestCase):
    """``--os-auth-type none`` speaks to an API under noauth2."""

    def test_admin_identity_headers_name_the_project_of_the_url(self):
        self.requests.get(OTHER + '/v1.0/demo/mgmt/agents',
                          json={'agents': []})

        code, out, err = self.openstack(
            '--os-auth-type', 'none', '--os-guest-upgrade-url',
            OTHER + '/v1.0/demo', 'database', 'agent', 'list', auth=False)

        self.assertEqual(0, code, err)
        (request,) = self.requests.request_history
        self.assertEqual(('admin', 'demo', 'admin'),
                         (request.headers['X-User-Id'],
                          request.headers['X-Project-Id'],
                          request.headers['X-Roles']))

    def test_without_a_project_in_the_url_nothing_is_sent(self):
        code, out, err = self.openstack(
            '--os-auth-type', 'none', '--os-guest-upgrade-url', OTHER,
            'database', 'agent', 'list', auth=False)

        self.assertEqual(1, code)
        self.assertIn('The credentials name no project, so the API path '
                      'cannot be built', err)
        self.assertEqual([], self.requests.request_history)


class TestTroveStyleCatalog(base.OSCTestCase):
    """A catalog URL that already ends in /v1.0/<project> is kept."""

    catalog_url = 'http://upgrade.test:8790/v1.0/%s' % base.PROJECT_ID

    def test_catalog_url_with_the_project(self):
        self.requests.get(base.MGMT + '/agents', json={'agents': []})

        code, out, err = self.openstack('database', 'agent', 'list')

        self.assertEqual(0, code, err)
        self.assertEqual(base.MGMT + '/agents',
                         self.requests.last_request.url)


class TestNoCatalogEntry(base.OSCTestCase):

    catalog_url = None

    def test_the_missing_service_type_is_named(self):
        code, out, err = self.openstack('database', 'agent', 'list')

        self.assertEqual(1, code)
        self.assertEqual('No public endpoint of service type guest-upgrade '
                         'or database in the service catalog; register one '
                         'or pass --os-guest-upgrade-url.\n', err)
        self.assertEqual([], self.api_requests())


class TestArgumentsNotUTF8(base.OSCTestCase):
    """Bytes that are not UTF-8 reach a command as surrogates."""

    def test_the_argument_is_named(self):
        # It ended with the codec's message, naming nothing.
        for argv in (('upgrade', 'show', '\udcff'),
                     ('upgrade', 'list', '--instance', 'x\udcff')):
            code, _out, err = self.openstack('database', *argv)
            self.assertEqual(1, code, err)
            self.assertEqual("The argument %r is not UTF-8 text.\n"
                             % argv[-1], err)
        self.assertEqual([], self.api_requests())


TROVE_ROOT = 'http://trove.test:8779/v1.0/%s' % base.PROJECT_ID


class TestTroveEndpoint(base.OSCTestCase):
    """trove-api with the extension, under Trove's service type."""

    catalog_url = None
    trove_catalog_url = TROVE_ROOT

    def test_without_guest_upgrade_the_database_endpoint_is_used(self):
        self.requests.get(TROVE_ROOT + '/mgmt/agents', json={'agents': []})

        code, out, err = self.openstack('database', 'agent', 'list')

        self.assertEqual(0, code, err)
        self.assertEqual(TROVE_ROOT + '/mgmt/agents',
                         self.requests.last_request.url)

    def test_a_service_type_absent_from_the_catalog_is_named(self):
        code, out, err = self.openstack(
            '--os-guest-upgrade-service-type', 'guest-upgrade',
            'database', 'agent', 'list')

        self.assertEqual(1, code)
        self.assertIn('No public endpoint of service type guest-upgrade in',
                      err)


class TestBothEndpoints(base.OSCTestCase):
    """Both services in the catalog: guest-upgrade unless told otherwise."""

    trove_catalog_url = TROVE_ROOT

    def test_guest_upgrade_comes_first(self):
        self.requests.get(base.MGMT + '/agents', json={'agents': []})

        code, out, err = self.openstack('database', 'agent', 'list')

        self.assertEqual(0, code, err)
        self.assertEqual(base.MGMT + '/agents',
                         self.requests.last_request.url)

    def test_the_option_chooses_trove(self):
        self.requests.get(TROVE_ROOT + '/mgmt/agents', json={'agents': []})

        code, out, err = self.openstack(
            '--os-guest-upgrade-service-type', 'database',
            'database', 'agent', 'list')

        self.assertEqual(0, code, err)
        self.assertEqual(TROVE_ROOT + '/mgmt/agents',
                         self.requests.last_request.url)


class TestFailures(base.OSCTestCase):

    def list_agents(self):
        return self.openstack('database', 'agent', 'list')

    def test_a_non_json_error_shows_the_http_reason(self):
        self.requests.get(base.MGMT + '/agents', status_code=502,
                          reason='Bad Gateway',
                          text='<html><body>upstream down</body></html>')

        code, out, err = self.list_agents()

        self.assertEqual(1, code)
        self.assertEqual('Bad Gateway (HTTP 502)\n', err)

    def test_a_keystonemiddleware_style_error_shows_its_message(self):
        self.requests.get(base.MGMT + '/agents', status_code=401, json={
            'error': {'code': 401, 'title': 'Unauthorized',
                      'message': 'The request you have made requires '
                                 'authentication.'}})

        code, out, err = self.list_agents()

        self.assertEqual(1, code)
        self.assertEqual('The request you have made requires '
                         'authentication. (HTTP 401)\n', err)

    def test_an_unreachable_api_is_one_line(self):
        self.requests.get(base.MGMT + '/agents',
                          exc=requests.exceptions.ConnectionError(
                              'Connection refused'))

        code, out, err = self.list_agents()

        self.assertEqual(1, code)
        self.assertTrue(err.startswith(
            'Cannot reach the guest-upgrade API: '), err)
        self.assertIn('Connection refused', err)
        self.assertNotIn('Traceback', err)

    def test_a_success_that_is_not_json_is_an_error(self):
        self.requests.get(base.MGMT + '/agents', text='<html></html>')

        code, out, err = self.list_agents()

        self.assertEqual(1, code)
        self.assertEqual('The guest-upgrade API answered GET %s/agents with '
                         'a body that is not JSON.\n' % base.MGMT, err)

    def test_a_success_nested_too_deeply_is_one_line(self):
        # json's RecursionError ended the command with Python's message.
        self.requests.get(base.MGMT + '/agents', text='[' * 100000)

        code, out, err = self.list_agents()

        self.assertEqual(1, code)
        self.assertEqual('The guest-upgrade API answered GET %s/agents with '
                         'JSON nested too deeply to read.\n' % base.MGMT,
                         err)

    def test_an_error_nested_too_deeply_shows_the_http_reason(self):
        self.requests.get(base.MGMT + '/agents', status_code=400,
                          reason='Bad Request', text='{"a":' * 100000)

        code, out, err = self.list_agents()

        self.assertEqual(1, code)
        self.assertEqual('Bad Request (HTTP 400)\n', err)

    def test_every_error_of_a_multi_error_body_is_shown(self):
        body = base.error(400, 'Bad Request', 'first')
        body['errors'].append({'status': 400, 'title': 'Bad Request',
                               'detail': 'second'})
        self.requests.get(base.MGMT + '/agents', status_code=400,
                          text=json.dumps(body))

        code, out, err = self.list_agents()

        self.assertEqual(1, code)
        self.assertEqual('first; second (HTTP 400) (Request-ID: req-error)\n',
                         err)
