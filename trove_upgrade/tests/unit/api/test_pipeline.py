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

"""What every request goes through: routing, auth, policy, errors, ids."""

import re
from unittest import mock

import fixtures
from oslo_config import cfg
from oslo_db import exception as db_exc
from oslo_utils import uuidutils
import sqlalchemy as sa
import webob

from trove_upgrade.api import deploy
from trove_upgrade.api import handler
from trove_upgrade.common import exception
from trove_upgrade.common import rpc
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.tests.unit.api import base

# Every route and method of the management API.
MGMT_CALLS = (
    ('GET', '/upgrades'),
    ('POST', '/upgrades'),
    ('GET', '/upgrades/%s' % uuidutils.generate_uuid()),
    ('DELETE', '/upgrades/%s' % uuidutils.generate_uuid()),
    ('GET', '/agents'),
    ('GET', '/agents/%s' % base.INSTANCE_ID),
)


class TestVersions(base.APITestCase):

    def test_root_is_public(self):
        for path in ('', '/'):
            resp = self.request('GET', path, identity=False)
            self.assertEqual(200, resp.status_int, resp.text)
            self.assertEqual(
                {'versions': [{
                    'id': 'v1.0', 'status': 'CURRENT',
                    'links': [{'rel': 'self',
                               'href': 'http://localhost/v1.0/'}]}]},
                resp.json)

    def test_version_is_public(self):
        for path in ('/v1.0', '/v1.0/'):
            resp = self.request('GET', path, identity=False)
            self.assertEqual(200, resp.status_int, resp.text)
            self.assertEqual('v1.0', resp.json['version']['id'])

    def test_proxy_headers_set_the_links(self):
        self.flags(group='oslo_middleware', enable_proxy_headers_parsing=True)
        self.app = deploy.loadapp(self.conf)
        resp = self.request('GET', '/', identity=False, headers={
            'X-Forwarded-Proto': 'https',
            'X-Forwarded-Host': 'api.example.org'})
        self.assertEqual('https://api.example.org/v1.0/',
                         resp.json['versions'][0]['links'][0]['href'])

    def test_proxy_headers_are_ignored_unless_enabled(self):
        resp = self.request('GET', '/', identity=False, headers={
            'X-Forwarded-Proto': 'https',
            'X-Forwarded-Host': 'api.example.org',
            'Forwarded': 'proto=https;host=api.example.org'})
        self.assertEqual('http://localhost/v1.0/',
                         resp.json['versions'][0]['links'][0]['href'])


class TestHealthcheck(base.APITestCase):
    """oslo.middleware's health check, public on every auth strategy."""

    def test_healthcheck_is_public(self):
        resp = self.request('GET', '/healthcheck', identity=False)
        self.assertEqual(200, resp.status_int, resp.text)
        self.assertEqual('text/plain', resp.content_type)
        self.assertEqual('OK', resp.text)
        self.assertRegex(resp.headers['x-openstack-request-id'], '^req-')
        # The database backend answers, by default.
        resp = self.request('GET', '/healthcheck', identity=False,
                            headers={'Accept': 'application/json'})
        self.assertEqual({'detailed': False, 'reasons': ['OK']}, resp.json)
        resp = self.request('HEAD', '/healthcheck', identity=False)
        self.assertEqual(204, resp.status_int)

    def test_other_methods_are_405(self):
        resp = self.request('POST', '/healthcheck', identity=False)
        self.assertError(resp, 405, 'allowed: GET, HEAD, OPTIONS.')

    def test_disable_by_file_takes_the_node_out(self):
        tempdir = self.useFixture(fixtures.TempDir())
        flag = tempdir.join('disabled')
        # The backend's options exist once it is loaded: from a file, as in
        # a deployment, beside the database's.
        config = tempdir.join('api.conf')
        with open(config, 'w') as f:
            f.write('[api]\nauth_strategy = noauth2\n[healthcheck]\n'
                    'backends = trove_upgrade_database, disable_by_file\n'
                    'disable_by_file_path = %s\n' % flag)
        self.conf([], default_config_files=[config], default_config_dirs=[])
        self.app = deploy.loadapp(self.conf)
        resp = self.request('GET', '/healthcheck', identity=False)
        self.assertEqual(200, resp.status_int)
        self.assertEqual('OK\nOK', resp.text)
        open(flag, 'w').close()
        resp = self.request('GET', '/healthcheck', identity=False)
        self.assertEqual(503, resp.status_int)
        self.assertEqual('OK\nDISABLED BY FILE', resp.text)


class TestRouting(base.APITestCase):

    def test_unknown_paths_are_404(self):
        for path in ('/v2.0', '/v1.0/%s/mgmt' % self.project_id,
                     self.mgmt + '/upgrades/a/b', self.mgmt + '/rollouts/a/b',
                     '/v1.0/%s/instances' % self.project_id):
            self.assertError(self.request('GET', path), 404,
                             'No resource at %s.' % path)

    def test_wrong_methods_are_405_with_allow(self):
        for method, path, allowed in (
                ('PUT', '/upgrades', 'GET, HEAD, POST, OPTIONS'),
                ('DELETE', '/upgrades', 'GET, HEAD, POST, OPTIONS'),
                ('POST', '/upgrades/%s' % uuidutils.generate_uuid(),
                 'GET, HEAD, DELETE, OPTIONS'),
                ('PATCH', '/agents', 'GET, HEAD, OPTIONS'),
                ('PUT', '/agents/%s' % base.INSTANCE_ID,
                 'GET, HEAD, DELETE, OPTIONS')):
            resp = self.request(method, self.mgmt + path)
            self.assertError(resp, 405, '%s is not allowed on %s%s; '
                             'allowed: %s.' % (method, self.mgmt, path,
                                               allowed))
            self.assertEqual(allowed, resp.headers['Allow'])
        resp = self.request('POST', '/', identity=False)
        self.assertError(resp, 405, 'allowed: GET, HEAD, OPTIONS.')

    def _every_url(self):
        """Each declared URL, its ids unknown, with its declared methods."""
        unknown = uuidutils.generate_uuid()
        for route, targets in handler.ROUTE_DECLARATIONS.items():
            path = route.replace('{tenant_id}', self.project_id)
            yield re.sub(r'{\w+}', unknown, path), targets

    def test_head_is_get_without_the_body_on_every_url(self):
        for path, targets in self._every_url():
            if 'HEAD' in targets:
                continue  # the health check's own (204)
            head = self.request('HEAD', path)
            self.assertEqual(b'', head.body, path)
            if 'GET' not in targets:
                self.assertEqual(405, head.status_int, path)
                continue
            get = self.request('GET', path)
            self.assertEqual(
                (get.status_int, get.content_type, get.content_length),
                (head.status_int, head.content_type, head.content_length),
                path)
        self.assertNothingRecorded()

    def test_options_answers_allow_on_every_url(self):
        for path, targets in self._every_url():
            resp = self.request('OPTIONS', path)
            allowed = ', '.join(handler.allowed_methods(targets))
            self.assertEqual((204, allowed, b''),
                             (resp.status_int, resp.headers.get('Allow'),
                              resp.body), path)
            self.assertIn('OPTIONS', allowed)
            self.assertEqual('GET' in targets, 'HEAD' in allowed, path)
        self.assertNothingRecorded()

    def test_request_id_header_on_success_and_errors(self):
        ok = self.request('GET', self.mgmt + '/upgrades')
        self.assertRegex(ok.headers['x-openstack-request-id'], '^req-')
        error = self.request('GET', self.mgmt + '/nothing')
        self.assertRegex(error.headers['x-openstack-request-id'], '^req-')
        self.assertNotEqual(ok.headers['x-openstack-request-id'],
                            error.headers['x-openstack-request-id'])

    def test_each_accept_header_value_is_parsed_once(self):
        handler._accepts_json.cache_clear()
        self.addCleanup(handler._accepts_json.cache_clear)
        for accept in ('application/json', 'text/html', 'application/json',
                       'text/html', 'application/json'):
            self.request('GET', self.mgmt + '/agents',
                         headers={'Accept': accept})
        info = handler._accepts_json.cache_info()
        self.assertEqual((3, 2), (info.hits, info.misses))

    def test_the_kept_answers_are_webobs(self):
        for accept in (None, '', '*/*', 'application/*', 'text/html',
                       'application/json;q=0', ';;;q=x', 'APPLICATION/JSON',
                       'text/html;q=0.9, application/json'):
            req = webob.Request.blank('/')
            if accept is not None:
                req.headers['Accept'] = accept
            self.assertEqual(
                bool(req.accept.acceptable_offers(['application/json'])),
                handler._accepts_json(accept), accept)

    def test_the_request_id_header_is_sent_once(self):
        for resp in (self.request('POST', self.mgmt + '/upgrades',
                                  base.upgrade_body()),
                     self.request('GET', self.mgmt + '/nothing'),
                     self.request('GET', '/', identity=False)):
            self.assertEqual(1, [name.lower() for name, _value
                                 in resp.headerlist].count(
                                     'x-openstack-request-id'))

    def _created_context(self, headers):
        """The context of the upgrade a POST with ``headers`` created."""
        resp = self.request('POST', self.mgmt + '/upgrades',
                            base.upgrade_body(), headers=headers)
        self.assertEqual(202, resp.status_int, resp.text)
        [created] = [n for n in self.transport.notifications
                     if n['event_type'] == 'trove_upgrade.upgrade.create']
        self.assertEqual(resp.headers['x-openstack-request-id'],
                         created['context']['request_id'])
        return created['context']

    def test_a_well_formed_inbound_request_id_is_the_global_one(self):
        inbound = 'req-%s' % uuidutils.generate_uuid()
        ctxt = self._created_context({'X-OpenStack-Request-ID': inbound})
        self.assertEqual(inbound, ctxt['global_request_id'])
        self.assertNotEqual(inbound, ctxt['request_id'])

    def test_a_malformed_inbound_request_id_is_ignored(self):
        ctxt = self._created_context({'X-OpenStack-Request-ID': 'req-1'})
        self.assertIsNone(ctxt['global_request_id'])

    def test_each_request_is_logged_with_its_id(self):
        logger = self.useFixture(fixtures.FakeLogger(
            name='trove_upgrade.api.requestlog'))
        resp = self.request('GET', self.mgmt + '/upgrades?limit=1')
        self.assertIn('%s - "GET %s/upgrades?limit=1" status: 200'
                      % (resp.headers['x-openstack-request-id'], self.mgmt),
                      logger.output)


class TestAuthorization(base.APITestCase):

    def test_no_identity_is_401(self):
        for method, path in MGMT_CALLS:
            resp = self.request(method, self.mgmt + path, identity=False)
            self.assertError(resp, 401, 'noauth2 needs the X-User-Id, '
                                        'X-Project-Id header(s)')
        self.assertNothingRecorded()

    def test_member_is_403_on_every_call(self):
        for method, path in MGMT_CALLS:
            body = base.upgrade_body() if method == 'POST' else None
            resp = self.request(method, self.mgmt + path, body,
                                roles='member,reader')
            self.assertError(resp, 403, 'Policy does not allow '
                                        'trove_upgrade:')
        self.assertNothingRecorded()

    def test_other_project_in_the_url_is_403(self):
        other = '/v1.0/%s/mgmt/upgrades' % uuidutils.generate_uuid()
        resp = self.request('POST', other, base.upgrade_body())
        self.assertError(resp, 403, 'The project in the URL')
        self.assertNothingRecorded()

    def test_policy_file_can_open_a_call(self):
        policy_file = self.useFixture(fixtures.TempDir()).join('policy.yaml')
        with open(policy_file, 'w') as f:
            f.write('"trove_upgrade:agents:list": "role:reader"\n')
        self.flags(group='oslo_policy', policy_file=policy_file)
        self.app = deploy.loadapp(self.conf)
        self.assertEqual(200, self.request('GET', self.mgmt + '/agents',
                                           roles='reader').status_int)
        self.assertEqual(403, self.request('GET', self.mgmt + '/upgrades',
                                           roles='reader').status_int)


class TestFaultWrapper(base.APITestCase):

    def test_unexpected_exception_is_500_without_a_traceback(self):
        logger = self.useFixture(fixtures.FakeLogger(
            name='trove_upgrade.api.fault_wrap'))
        with mock.patch.object(db_upgrades, 'list_upgrades',
                               side_effect=RuntimeError('secret detail')):
            resp = self.request('GET', self.mgmt + '/upgrades')
        error = self.assertError(resp, 500, 'An unexpected error occurred.')
        self.assertNotIn('secret detail', resp.text)
        self.assertNotIn('RuntimeError', resp.text)
        # The operator finds it in the log, under the same request id.
        self.assertIn('secret detail', logger.output)
        self.assertIn('Traceback', logger.output)
        self.assertTrue(error['request_id'].startswith('req-'))

    def _assert_unavailable(self, error):
        logger = self.useFixture(fixtures.FakeLogger(
            name='trove_upgrade.api.fault_wrap'))
        with mock.patch.object(db_upgrades, 'list_upgrades',
                               side_effect=error):
            resp = self.request('GET', self.mgmt + '/upgrades')
        self.assertError(resp, 503, 'The database is unavailable.')
        self.assertNotIn('secret-host', resp.text)
        self.assertIn('GET %s/upgrades: ' % self.mgmt, logger.output)
        self.assertIn('secret-host refused\n', logger.output)
        self.assertNotIn('Traceback', logger.output)

    def test_lost_database_connection_is_503(self):
        # Only its first line is logged.
        self._assert_unavailable(db_exc.DBConnectionError(
            '(psycopg2.OperationalError) secret-host refused\nmore'))

    def test_database_refusing_connections_is_503(self):
        # oslo.db leaves a failed connect of PostgreSQL unwrapped.
        self._assert_unavailable(sa.exc.OperationalError(
            None, None, Exception('secret-host refused')))


class TestLoadApp(base.APITestCase):

    def test_bad_version_cap_stops_the_api_at_start(self):
        self.flags(group='upgrade_levels', agent='newest')
        error = self.assertRaises(exception.InvalidRPCVersionCapError,
                                  deploy.loadapp, self.conf)
        self.assertIn('[upgrade_levels] agent = newest', str(error))

    def test_bad_option_value_stops_the_api_at_start(self):
        # Once found by the first request that read it: 500 to every one.
        config = self.useFixture(fixtures.TempDir()).join('api.conf')
        with open(config, 'w') as f:
            f.write('[api]\nauth_strategy = noauth2\nmax_limit = -3\n')
        self.conf([], default_config_files=[config], default_config_dirs=[])
        error = self.assertRaises(cfg.ConfigFileValueError, deploy.loadapp,
                                  self.conf)
        self.assertIn('max_limit', str(error))

    def test_builds_the_notifier_at_start(self):
        # Built at the first POST, its driver's loading delayed it.
        with mock.patch.object(rpc, 'init_notifier') as init:
            deploy.loadapp(self.conf)
        init.assert_called_once_with()

    def test_a_connection_no_driver_serves_stops_the_api_at_start(self):
        # Every request was a 500 with a traceback.
        self.flags(group='database', connection='nosuchdb://h/d')
        error = self.assertRaises(exception.InvalidInputError, deploy.loadapp,
                                  self.conf)
        self.assertIn('nosuchdb', str(error))

    def test_bad_policy_file_stops_the_api_at_start(self):
        policy_file = self.useFixture(fixtures.TempDir()).join('policy.yaml')
        with open(policy_file, 'w') as f:
            f.write('"trove_upgrade:agents:list": [unclosed\n')
        self.flags(group='oslo_policy', policy_file=policy_file)
        self.assertRaises(exception.InvalidPolicyFileError, deploy.loadapp,
                          self.conf)
