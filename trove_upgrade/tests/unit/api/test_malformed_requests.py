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

"""Malformed bodies and query strings on every route: 400, nothing kept.

Each of these once reached a handler or the database and came back 500.
"""

import io

from oslo_utils import uuidutils
import webob

from trove_upgrade.api.schemas import agents as agent_schemas
from trove_upgrade.api.schemas import desired_versions as dv_schemas
from trove_upgrade.api.schemas import packages as package_schemas
from trove_upgrade.api.schemas import rollouts as rollout_schemas
from trove_upgrade.api.schemas import upgrades as upgrade_schemas
from trove_upgrade.db import models
from trove_upgrade.tests.unit.api import base

_ID = uuidutils.generate_uuid()

# Every route that takes a JSON body.
BODY_CALLS = (
    ('POST', '/upgrades'),
    ('POST', '/instances/%s/upgrade' % _ID),
    ('POST', '/rollouts'),
    ('POST', '/packages'),
    ('PATCH', '/packages/%s' % _ID),
    ('POST', '/desired-versions'),
    ('PATCH', '/desired-versions/%s' % _ID),
)

# Every list route with a query string schema.
LIST_PATHS = ('/upgrades', '/agents', '/rollouts', '/packages',
              '/packages/fleet', '/desired-versions', '/targets')

# Every list route that pages.
PAGED_PATHS = ('/upgrades', '/agents', '/rollouts', '/packages/fleet',
               '/targets')

SCHEMA_MODULES = (agent_schemas, dv_schemas, package_schemas,
                  rollout_schemas, upgrade_schemas)


def _patterns(schema):
    """Every ``pattern`` in a schema, however deep."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == 'pattern':
                yield value
            else:
                yield from _patterns(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _patterns(value)


class TestMalformedBodies(base.APITestCase):

    def assertNothingKept(self):
        self.assertNothingRecorded()
        for model in (models.Rollout, models.Package, models.DesiredVersion):
            self.assertEqual(0, self.count(model), model.__name__)

    def assertMalformed(self, raw_body, detail):
        for method, path in BODY_CALLS:
            resp = self.request(method, self.mgmt + path, raw_body=raw_body)
            self.assertError(resp, 400, detail)
        self.assertNothingKept()

    def test_a_body_shorter_than_its_content_length(self):
        # The client ended the body early: webob's DisconnectionError, the
        # API's 500 with a traceback in its log, on any server.
        bodiless = ('POST', '/rollouts/%s/pause' % _ID)
        for method, path in BODY_CALLS + (bodiless,):
            req = webob.Request.blank(self.mgmt + path, method=method,
                                      environ={
                                          'wsgi.input': io.BytesIO(b'{}'),
                                          'CONTENT_LENGTH': '100',
                                          'CONTENT_TYPE': 'application/json'})
            req.headers.update({'X-User-Id': 'operator', 'X-Roles': 'admin',
                                'X-Project-Id': self.project_id})
            self.assertError(req.get_response(self.app), 400,
                             'The request body ended before the 100 bytes '
                             'its Content-Length says.')
        self.assertNothingKept()

    def test_deeply_nested_json(self):
        self.assertMalformed(b'[' * 30000 + b']' * 30000,
                             'Malformed JSON: nested too deeply.')
        self.assertMalformed(b'{"a":' * 10000 + b'1' + b'}' * 10000,
                             'Malformed JSON: nested too deeply.')

    def test_nan_and_infinity(self):
        for constant in (b'NaN', b'Infinity', b'-Infinity'):
            self.assertMalformed(b'{"upgrade": {"metadata": {"a": %s}}}'
                                 % constant,
                                 'Malformed JSON: %s is not a JSON number'
                                 % constant.decode())

    def test_number_out_of_range(self):
        self.assertMalformed(b'{"a": -1e400}',
                             'Malformed JSON: -1e400 is out of the range '
                             'of a JSON number')

    def test_lone_surrogate(self):
        self.assertMalformed(b'{"a": "x\\ud800"}',
                             'Malformed JSON: a string holds a lone UTF-16 '
                             'surrogate')
        self.assertMalformed(b'{"\\uDFFF": 1}',
                             'a string holds a lone UTF-16 surrogate')

    def test_a_name_given_twice_in_an_object(self):
        # Read with its last value: a proxy reading the first saw another.
        self.assertMalformed(
            b'{"upgrade": {"instance_id": "x", "instance_id": "y"}}',
            "Malformed JSON: the name 'instance_id' is given twice in one "
            "object")
        body = ('{"instance_id": "x", "instance_id": "%s", '
                '"instance_version": "1.0", "strategy": "swift", '
                '"location": "swift://c/o"}' % base.INSTANCE_ID).encode()
        self.assertError(
            self.request('POST', self.mgmt + '/upgrades', raw_body=body),
            400, "the name 'instance_id' is given twice")
        self.assertNothingKept()

    def test_a_desired_version_selecting_an_id_that_is_no_uuid(self):
        # uuid.UUID raised ValueError in the handler: 500.
        resp = self.request('POST', self.mgmt + '/desired-versions', {
            'desired_version': {'name': 'd', 'package': 'p', 'version': '1',
                                'selector': {'instance_ids': ['db-1']}}})
        self.assertError(resp, 400, "'db-1' is not an instance id (a UUID)")
        self.assertNothingKept()

    def test_lone_surrogate_where_a_string_is_recorded(self):
        for version, location in (('1.0', '\\ud83d'), ('\\ud83d', 'c/o')):
            raw = ('{"instance_id": "%s", "instance_version": "%s", '
                   '"strategy": "swift", "location": "%s"}'
                   % (base.INSTANCE_ID, version, location)).encode()
            self.assertError(
                self.request('POST', self.mgmt + '/upgrades', raw_body=raw),
                400, 'lone UTF-16 surrogate')
        self.assertNothingKept()

    def test_a_surrogate_pair_is_a_character(self):
        raw = ('{"instance_id": "%s", "instance_version": "1.0", '
               '"strategy": "swift", "location": "swift://c/\\ud83d\\ude00"}'
               % base.INSTANCE_ID).encode()
        resp = self.request('POST', self.mgmt + '/upgrades', raw_body=raw)
        self.assertEqual(202, resp.status_int, resp.text)
        self.assertEqual('swift://c/\U0001F600',
                         resp.json['upgrade']['location'])

    def test_a_nul_in_a_version_is_refused(self):
        # Not a space to \\S: it reached PostgreSQL's queries (500).
        selector = {'group': 'g'}
        for method, path, body, where in (
                ('POST', '/upgrades',
                 base.upgrade_body(instance_version='1\x00'),
                 '$.instance_version'),
                ('POST', '/rollouts',
                 {'rollout': {'name': 'r', 'instance_version': '\x00',
                              'strategy': 'swift', 'location': 'swift://c/o',
                              'selector': selector}},
                 '$.rollout.instance_version'),
                ('POST', '/packages',
                 {'package': {'name': 'agent', 'version': '1\x00',
                              'strategy': 'swift', 'location': 'swift://c/o'}},
                 '$.package.version'),
                ('POST', '/desired-versions',
                 {'desired_version': {'name': 'd', 'package': 'agent',
                                      'version': '\x00',
                                      'selector': selector}},
                 '$.desired_version.version'),
                ('PATCH', '/desired-versions/%s' % _ID,
                 {'desired_version': {'version': 'a\x00b'}},
                 '$.desired_version.version')):
            self.assertError(self.request(method, self.mgmt + path, body),
                             400, '(at %s)' % where)
        self.assertNothingKept()


class TestTrailingNewlines(base.APITestCase):
    """A final newline once matched every pattern anchored with ``$``."""

    def test_patterns_anchor_only_at_their_end(self):
        # util._end_anchored makes a final "$" mean the very end; one
        # anywhere else would keep Python's looser meaning.
        for module in SCHEMA_MODULES:
            for name in dir(module):
                for pattern in _patterns(getattr(module, name)):
                    self.assertNotIn('$', pattern[:-1].replace('\\$', ''),
                                     '%s.%s' % (module.__name__, name))

    def test_a_final_newline_is_refused(self):
        by_package = {'instance_id': base.INSTANCE_ID,
                      'instance_version': '1.0', 'package': 'agent\n'}
        for body, where in (
                (base.upgrade_body(instance_version='v1.0.1\n'),
                 '$.instance_version'),
                (base.upgrade_body(location='swift://c/o\n'), '$.location'),
                (base.upgrade_body(instance_id=base.INSTANCE_ID + '\n'),
                 '$.instance_id'),
                (base.upgrade_body(metadata={'key\n': 'value'}),
                 '$.metadata'),
                (by_package, '$.package')):
            resp = self.request('POST', self.mgmt + '/upgrades', body)
            self.assertError(resp, 400, "\\n' does not match")
            self.assertError(resp, 400, '(at %s)' % where)
        self.assertNothingRecorded()

    def test_a_final_newline_in_a_query_is_refused(self):
        resp = self.request('GET', self.mgmt + '/agents?rpc_api_version='
                            '1.0%0A')
        self.assertError(resp, 400, '(at $.rpc_api_version)')


class TestMalformedQueries(base.APITestCase):

    def test_query_not_utf8(self):
        for path in LIST_PATHS:
            for query in ('?limit=%ff', '?%ff=1', '?name=%C3'):
                self.assertError(
                    self.request('GET', self.mgmt + path + query), 400,
                    'The query string is not UTF-8 once percent-decoded.')

    def test_path_not_utf8(self):
        # Once a 500: the path was decoded where it was first needed.
        for method, path in (('GET', '/upgrades/%FF'), ('GET', '/nothing%C3'),
                             ('DELETE', '/rollouts/%C3%28'),
                             ('PUT', '/upgrades%FF')):
            self.assertError(
                self.request(method, self.mgmt + path), 400,
                'The URL path is not UTF-8 once percent-decoded.')

    def test_an_error_quoting_a_huge_path_is_bounded(self):
        error = self.assertError(
            self.request('GET', self.mgmt + '/upgrades/' + 'a' * 100000),
            404, 'characters cut)')
        self.assertLessEqual(len(error['detail']), 1024)
        self.assertTrue(error['detail'].endswith('a could not be found.'))

    def test_ids_in_the_path_are_utf8(self):
        # Once matched as latin-1: "Upgrade \u00c3\u00a9 ..." for "é".
        for path, detail in (
                ('/upgrades/%C3%A9t%C3%A9', 'Upgrade \u00e9t\u00e9 could '
                                            'not be found.'),
                ('/rollouts/%C3%A9', 'Rollout \u00e9 could not be found.'),
                ('/agents/%E2%82%AC', 'No agent is registered for instance '
                                      '\u20ac.')):
            self.assertError(self.request('GET', self.mgmt + path), 404,
                             detail)

    def test_a_nul_in_a_query_is_refused(self):
        # PostgreSQL cannot hold a NUL in a string: the filter was a 500.
        for path, query in (('/upgrades', 'instance_version=1%00'),
                            ('/agents', 'guest_version=%00'),
                            ('/agents', 'state=a%00'),
                            ('/rollouts', 'name=%00'),
                            ('/packages', 'name=a%00b'),
                            ('/desired-versions', 'name=%00'),
                            ('/packages', '%00=1')):
            self.assertError(
                self.request('GET', self.mgmt + path + '?' + query), 400,
                'Query parameter %r holds a NUL character.'
                % query.split('=')[0].replace('%00', '\x00'))

    def test_a_body_in_another_charset_is_415(self):
        # It was decoded as UTF-8 whatever the header said.
        body = base.upgrade_body()
        for charset in ('latin-1', 'utf-16', 'x'):
            self.assertError(
                self.request('POST', self.mgmt + '/upgrades', body,
                             content_type='application/json; charset=%s'
                             % charset), 415,
                "A JSON request body is in UTF-8, not '%s'." % charset)
        self.assertNothingRecorded()
        for charset in ('utf-8', 'UTF-8', '"utf-8"', 'utf8'):
            resp = self.request('POST', self.mgmt + '/upgrades', body,
                                content_type='application/json; charset=%s'
                                % charset)
            self.assertEqual(202, resp.status_int, resp.text)

    def test_an_accept_header_refusing_json_is_406(self):
        # It was answered with JSON regardless, after doing the work.
        for accept in ('text/html', 'application/json;q=0',
                       'text/html, application/xml;q=0.9'):
            headers = {'Accept': accept}
            self.assertError(
                self.request('POST', self.mgmt + '/upgrades',
                             base.upgrade_body(), headers=headers), 406,
                'This API answers only application/json, which the Accept '
                'header %r refuses.' % accept)
            self.assertError(self.request('GET', self.mgmt + '/agents',
                                          headers=headers), 406, accept)
            self.assertError(self.request('GET', '/', headers=headers), 406,
                             accept)
        self.assertNothingRecorded()
        for accept in ('*/*', 'application/*', ';;;q=x',
                       'text/html;q=0.9, application/json'):
            resp = self.request('GET', self.mgmt + '/agents',
                                headers={'Accept': accept})
            self.assertEqual(200, resp.status_int, accept)
        # The health check answers HTML or text as asked.
        resp = self.request('GET', '/healthcheck',
                            headers={'Accept': 'text/html'})
        self.assertEqual(200, resp.status_int, resp.text)

    def test_limit_of_other_digits(self):
        # Digits to str.isdigit(), not to int(), or not ASCII.
        for limit in ('%C2%B2', '%EF%BC%91', '%D9%A1'):
            for path in PAGED_PATHS:
                self.assertError(
                    self.request('GET', self.mgmt + path + '?limit=' + limit),
                    400, 'limit must be a positive integer')

    def test_limit_of_thousands_of_digits_is_capped(self):
        self.flags(group='api', max_limit=3)
        for path in PAGED_PATHS:
            resp = self.request('GET', self.mgmt + path + '?limit='
                                + '9' * 5000)
            self.assertEqual(200, resp.status_int, resp.text)
        self.assertError(self.request('GET', self.mgmt + '/upgrades?limit='
                                      + '0' * 5000), 400,
                         'limit must be a positive integer')
