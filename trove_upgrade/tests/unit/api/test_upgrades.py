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

"""/v1.0/{tenant_id}/mgmt/upgrades: create, list, show, cancel."""

import io
from unittest import mock

import oslo_messaging as messaging
from oslo_serialization import jsonutils
from oslo_utils import uuidutils
import webob

from trove_upgrade.api import deploy
from trove_upgrade.common import context
from trove_upgrade.common import states
from trove_upgrade.db import models
from trove_upgrade.db import transitions as db_transitions
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.services import agent_rpcapi
from trove_upgrade.tests.unit.api import base


class TestCreateUpgrade(base.APITestCase):

    def test_create_flat_body(self):
        resp = self.request('POST', self.mgmt + '/upgrades',
                            base.upgrade_body())
        self.assertEqual(202, resp.status_int, resp.text)
        upgrade = resp.json['upgrade']
        self.assertEqual(base.INSTANCE_ID, upgrade['instance_id'])
        self.assertEqual('v1.0.1', upgrade['instance_version'])
        self.assertEqual('swift', upgrade['strategy'])
        self.assertEqual(states.SENT, upgrade['status'])
        self.assertEqual({}, upgrade['metadata'])
        self.assertFalse(upgrade['allow_downgrade'])
        self.assertEqual(resp.headers['x-openstack-request-id'],
                         upgrade['request_id'])
        self.assertEqual('http://localhost%s/upgrades/%s'
                         % (self.mgmt, upgrade['id']),
                         resp.headers['Location'])
        self.assertEqual(resp.headers['Location'],
                         upgrade['links'][0]['href'])
        recorded = db_upgrades.get_upgrade(context.get_admin_context(),
                                           upgrade['id'], with_events=True)
        self.assertEqual(states.SENT, recorded['status'])
        self.assertEqual([states.PENDING, states.SENT],
                         [e['to_state'] for e in recorded['events']])
        self.assertEqual(self.project_id, recorded['project_id'])
        self.assertEqual('operator', recorded['user_id'])

    def test_create_wrapped_body_with_options(self):
        body = base.upgrade_body(
            instance_id=base.INSTANCE_ID.upper(), strategy='rsync',
            location='rsync://127.0.0.1/guest/', allow_downgrade=True,
            metadata={'checksum': 'sha256:00ff', 'size': 1024,
                      'signed': True, 'note': None})
        resp = self.request('POST', self.mgmt + '/upgrades',
                            {'upgrade': body})
        self.assertEqual(202, resp.status_int, resp.text)
        upgrade = resp.json['upgrade']
        # Instance ids are stored in their canonical lower-case form.
        self.assertEqual(base.INSTANCE_ID, upgrade['instance_id'])
        self.assertTrue(upgrade['allow_downgrade'])
        self.assertEqual(body['metadata'], upgrade['metadata'])
        self.assertEqual('rsync', upgrade['strategy'])

    def test_every_strategy_and_version_form_is_accepted(self):
        for strategy, version in (('swift', '1.0'), ('http', 'V2.0.0rc1'),
                                  ('local', 'v10.3.post2'),
                                  ('rsync', '2024.1')):
            resp = self.request('POST', self.mgmt + '/upgrades',
                                base.upgrade_body(strategy=strategy,
                                                  instance_version=version))
            self.assertEqual(202, resp.status_int, resp.text)
        self.assertEqual(4, self.count(models.Upgrade))

    def test_content_type_parameters_and_case_are_accepted(self):
        for content_type in ('application/json; charset=UTF-8',
                             'Application/JSON'):
            resp = self.request('POST', self.mgmt + '/upgrades',
                                base.upgrade_body(),
                                content_type=content_type)
            self.assertEqual(202, resp.status_int, resp.text)

    def test_dispatch_failure_is_503_and_recorded_failed(self):
        with mock.patch.object(
                agent_rpcapi.AgentAPI, 'upgrade_with_keys',
                side_effect=messaging.MessageDeliveryFailure('bus down')):
            resp = self.request('POST', self.mgmt + '/upgrades',
                                base.upgrade_body())
        self.assertError(resp, 503, 'could not be sent')
        self.assertIn('bus down', resp.json['errors'][0]['detail'])
        upgrade, = db_upgrades.list_upgrades(context.get_admin_context())
        self.assertEqual(states.FAILED, upgrade['status'])


class TestCreateUpgradeBadInput(base.APITestCase):
    """Each bad request gets a 4xx naming the problem and records nothing."""

    def _post(self, body=None, **kwargs):
        return self.request('POST', self.mgmt + '/upgrades', body, **kwargs)

    def assertRejected(self, resp, detail, status=400):
        self.assertError(resp, status, detail)
        self.assertNothingRecorded()

    def test_unknown_field(self):
        self.assertRejected(
            self._post(base.upgrade_body(version='1.0')),
            "Additional properties are not allowed ('version' was "
            "unexpected) (at $)")

    def test_unknown_field_in_wrapped_body(self):
        self.assertRejected(
            self._post({'upgrade': base.upgrade_body(force=True)}),
            "('force' was unexpected) (at $.upgrade)")

    def test_wrapped_body_with_fields_beside_it(self):
        self.assertRejected(
            self._post(dict(base.upgrade_body(),
                            upgrade=base.upgrade_body())),
            "Additional properties are not allowed")

    def test_missing_field(self):
        body = base.upgrade_body()
        del body['location']
        self.assertRejected(
            self._post(body), 'give either package, or strategy and '
                              'location (location missing)')
        body = base.upgrade_body()
        del body['instance_version']
        self.assertRejected(
            self._post(body),
            "'instance_version' is a required property (at $)")

    def test_bad_uuid(self):
        self.assertRejected(
            self._post(base.upgrade_body(instance_id='not-a-uuid')),
            'Naming an instance by name needs [trove] connection')

    def test_uuid_without_dashes(self):
        self.assertRejected(
            self._post(base.upgrade_body(
                instance_id=base.INSTANCE_ID.replace('-', ''))),
            'Naming an instance by name needs [trove] connection')

    def test_instance_id_not_a_string(self):
        self.assertRejected(
            self._post(base.upgrade_body(instance_id=42)),
            "42 is not of type 'string' (at $.instance_id)")

    def test_empty_version(self):
        self.assertRejected(
            self._post(base.upgrade_body(instance_version='')),
            "'' should be non-empty (at $.instance_version)")

    def test_oversized_version(self):
        self.assertRejected(
            self._post(base.upgrade_body(instance_version='1' * 65)),
            "is too long (at $.instance_version)")

    def test_version_pip_cannot_parse(self):
        for version in ('latest', 'v', '1.0.x', '1..2'):
            resp = self._post(base.upgrade_body(instance_version=version))
            self.assertRejected(
                resp, 'instance_version %r is not a version' % version)

    def test_version_with_spaces(self):
        self.assertRejected(
            self._post(base.upgrade_body(instance_version='v 1')),
            "'v 1' does not match '^[^\\\\s\\\\x00-\\\\x1f\\\\x7f]+$' "
            "(at $.instance_version)")

    def test_empty_location(self):
        self.assertRejected(
            self._post(base.upgrade_body(location='')),
            "'' should be non-empty (at $.location)")

    def test_oversized_location(self):
        self.assertRejected(
            self._post(base.upgrade_body(location='x' * 2049)),
            "is too long (at $.location)")

    def test_control_characters_in_location(self):
        self.assertRejected(
            self._post(base.upgrade_body(location='http://a/\nb')),
            "'http://a/\\nb' does not match '^[^\\\\x00-\\\\x1f\\\\x7f]*$' "
            "(at $.location)")

    def test_unknown_strategy(self):
        self.assertRejected(
            self._post(base.upgrade_body(strategy='ftp')),
            "'ftp' is not one of ['http', 'local', 'rsync', 'swift'] "
            "(at $.strategy)")

    def test_metadata_not_an_object(self):
        self.assertRejected(
            self._post(base.upgrade_body(metadata=['a'])),
            "['a'] is not of type 'object' (at $.metadata)")

    def test_metadata_nested_value(self):
        self.assertRejected(
            self._post(base.upgrade_body(metadata={'a': {'b': 1}})),
            "is not of type 'string', 'number', 'boolean', 'null' "
            "(at $.metadata.a)")

    def test_metadata_oversized_value(self):
        self.assertRejected(
            self._post(base.upgrade_body(metadata={'a': 'x' * 1025})),
            "is too long (at $.metadata.a)")

    def test_allow_downgrade_not_a_boolean(self):
        self.assertRejected(
            self._post(base.upgrade_body(allow_downgrade='yes')),
            "'yes' is not of type 'boolean' (at $.allow_downgrade)")

    def test_malformed_json(self):
        self.assertRejected(self._post(raw_body=b'{"instance_id": '),
                            'Malformed JSON: ')

    def test_not_utf8(self):
        self.assertRejected(self._post(raw_body=b'{"a": "\xff"}'),
                            'Malformed JSON: ')

    def test_empty_body(self):
        self.assertRejected(self._post(raw_body=b''), 'Malformed JSON: ')

    def test_json_not_an_object(self):
        self.assertRejected(self._post([base.upgrade_body()]),
                            "is not of type 'object' (at $)")

    def test_wrong_content_type(self):
        self.assertRejected(
            self._post(base.upgrade_body(), content_type='text/plain'),
            "The request body must have Content-Type application/json, "
            "not 'text/plain'.", status=415)

    def test_missing_content_type(self):
        self.assertRejected(
            self._post(base.upgrade_body(), content_type=None),
            "The request body must have Content-Type application/json, "
            "not None.", status=415)

    def _limit_body_size(self, size):
        self.flags(group='api', max_request_body_size=size)
        self.app = deploy.loadapp(self.conf)

    def _blank(self, **headers):
        headers.update({'X-User-Id': 'operator',
                        'X-Project-Id': self.project_id, 'X-Roles': 'admin'})
        return webob.Request.blank(self.mgmt + '/upgrades', method='POST',
                                   headers=headers)

    def test_body_over_the_size_limit(self):
        self._limit_body_size(1024)
        resp = self._post(base.upgrade_body(metadata={'pad': 'x' * 1000}))
        self.assertRejected(
            resp, 'The request body is larger than 1024 bytes, the limit '
                  'set by [api] max_request_body_size.', status=413)

    def test_chunked_body_over_the_size_limit(self):
        self._limit_body_size(1024)
        body = jsonutils.dump_as_bytes(
            base.upgrade_body(metadata={'pad': 'x' * 1000}))
        req = self._blank(**{'Content-Type': 'application/json',
                             'Transfer-Encoding': 'chunked'})
        req.environ['wsgi.input'] = io.BytesIO(body)
        req.environ['wsgi.input_terminated'] = True
        req.environ.pop('CONTENT_LENGTH', None)
        self.assertRejected(req.get_response(self.app),
                            'The request body is larger than 1024 bytes',
                            status=413)

    def test_chunked_body_the_server_cannot_read_is_400(self):
        # gunicorn's InvalidChunkSize went up to the fault wrapper: 500.
        class BadChunks(io.BytesIO):
            def read(self, size=-1):
                raise ValueError("Invalid chunk size: b'zz'")

        req = self._blank(**{'Content-Type': 'application/json',
                             'Transfer-Encoding': 'chunked'})
        req.environ['wsgi.input'] = BadChunks()
        req.environ['wsgi.input_terminated'] = True
        req.environ.pop('CONTENT_LENGTH', None)
        self.assertRejected(req.get_response(self.app),
                            "The request body is malformed: Invalid chunk "
                            "size: b'zz'")

    def test_chunked_body_the_server_does_not_end_is_411(self):
        # webob read it as empty: "Malformed JSON" of a well-formed body.
        req = self._blank(**{'Content-Type': 'application/json',
                             'Transfer-Encoding': 'chunked'})
        req.environ['wsgi.input'] = io.BytesIO(
            jsonutils.dump_as_bytes(base.upgrade_body()))
        req.environ.pop('CONTENT_LENGTH', None)
        self.assertRejected(req.get_response(self.app),
                            'A request body needs a Content-Length.',
                            status=411)

    def test_malformed_content_length(self):
        req = self._blank(**{'Content-Type': 'application/json'})
        req.environ['CONTENT_LENGTH'] = 'ten'
        self.assertRejected(req.get_response(self.app),
                            "Content-Length must be a non-negative "
                            "integer, not 'ten'.")

    def test_content_length_int_refuses(self):
        # isdigit() took them and int() raised: 500, under a WSGI server
        # that passes such a header on.
        for length, detail, status in (
                ('\u00b2', "not '\u00b2'", 400),
                ('9' * 5000, 'larger than 65536 bytes', 413)):
            req = self._blank(**{'Content-Type': 'application/json'})
            req.environ['CONTENT_LENGTH'] = length
            self.assertRejected(req.get_response(self.app), detail,
                                status=status)

    def test_member_is_refused_before_the_body_is_read(self):
        self.assertRejected(
            self._post(base.upgrade_body(strategy='ftp'), roles='member'),
            'Policy does not allow trove_upgrade:upgrades:create to be '
            'performed.', status=403)


class TestListUpgrades(base.APITestCase):

    def _create(self, **overrides):
        resp = self.request('POST', self.mgmt + '/upgrades',
                            base.upgrade_body(**overrides))
        self.assertEqual(202, resp.status_int, resp.text)
        return resp.json['upgrade']

    def _list(self, query=''):
        resp = self.request('GET', self.mgmt + '/upgrades' + query)
        self.assertEqual(200, resp.status_int, resp.text)
        return resp.json

    def test_empty(self):
        self.assertEqual({'upgrades': []}, self._list())

    def test_newest_first(self):
        created = [self._create(instance_version='1.0.%d' % i)['id']
                   for i in range(3)]
        listed = [u['id'] for u in self._list()['upgrades']]
        self.assertEqual(list(reversed(created)), listed)

    def test_filters(self):
        other = uuidutils.generate_uuid()
        first = self._create()
        second = self._create(instance_id=other, instance_version='2.0')
        self.request('DELETE', self.mgmt + '/upgrades/' + second['id'])

        def ids(query):
            return [u['id'] for u in self._list(query)['upgrades']]

        self.assertEqual([second['id']], ids('?instance_id=' + other))
        self.assertEqual([second['id']],
                         ids('?instance_id=' + other.upper()))
        self.assertEqual([first['id']], ids('?status=SENT'))
        self.assertEqual([second['id']], ids('?status=CANCELLED'))
        self.assertEqual([first['id']], ids('?instance_version=v1.0.1'))
        self.assertEqual([], ids('?status=SENT&instance_id=' + other))

    def test_pagination_follows_next_links(self):
        created = [self._create(instance_version='1.0.%d' % i)['id']
                   for i in range(5)]
        seen = []
        query = '?limit=2&status=SENT'
        pages = 0
        while True:
            body = self._list(query)
            pages += 1
            seen += [u['id'] for u in body['upgrades']]
            if 'links' not in body:
                break
            link, = body['links']
            self.assertEqual('next', link['rel'])
            self.assertIn('status=SENT', link['href'])
            query = link['href'][link['href'].index('?'):]
        self.assertEqual(list(reversed(created)), seen)
        # 2 + 2 + 1: the last page is short, so it has no next link.
        self.assertEqual(3, pages)

    def test_limit_is_capped_at_max_limit(self):
        self.flags(group='api', max_limit=2)
        for i in range(3):
            self._create(instance_version='1.0.%d' % i)
        body = self._list('?limit=1000')
        self.assertEqual(2, len(body['upgrades']))
        self.assertIn('limit=2', body['links'][0]['href'])
        self.assertEqual(2, len(self._list()['upgrades']))

    def assertBadQuery(self, query, detail):
        self.assertError(self.request('GET', self.mgmt + '/upgrades' + query),
                         400, detail)

    def test_bad_queries(self):
        self._create()
        self.assertBadQuery('?status=DONE', "'DONE' is not one of")
        self.assertBadQuery('?instance_id=42',
                            "'42' is not a 'uuid' (at $.instance_id)")
        self.assertBadQuery('?limit=0',
                            "limit must be a positive integer, not '0'.")
        self.assertBadQuery('?limit=-1',
                            "limit must be a positive integer, not '-1'.")
        self.assertBadQuery('?limit=ten',
                            "limit must be a positive integer, not 'ten'.")
        self.assertBadQuery('?marker=nope', "'nope' is not a 'uuid'")
        marker = uuidutils.generate_uuid()
        self.assertBadQuery('?marker=' + marker,
                            'Marker %s could not be found.' % marker)
        self.assertBadQuery('?sort=created_at',
                            "('sort' was unexpected)")
        self.assertBadQuery('?status=SENT&status=FAILED',
                            "Query parameter 'status' may be given only "
                            "once.")


class TestShowAndCancelUpgrade(base.APITestCase):

    def setUp(self):
        super().setUp()
        resp = self.request('POST', self.mgmt + '/upgrades',
                            base.upgrade_body())
        self.upgrade_id = resp.json['upgrade']['id']
        self.url = self.mgmt + '/upgrades/' + self.upgrade_id

    def test_show_with_events(self):
        resp = self.request('GET', self.url)
        self.assertEqual(200, resp.status_int, resp.text)
        upgrade = resp.json['upgrade']
        self.assertEqual(self.upgrade_id, upgrade['id'])
        events = upgrade['events']
        self.assertEqual([(None, states.PENDING),
                          (states.PENDING, states.SENT)],
                         [(e['from_state'], e['to_state']) for e in events])
        self.assertEqual({'api'}, {e['source'] for e in events})
        for event in events:
            self.assertRegex(event['created_at'],
                             r'^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$')

    def test_show_unknown(self):
        unknown = uuidutils.generate_uuid()
        self.assertError(self.request('GET', self.mgmt + '/upgrades/' +
                                      unknown),
                         404, 'Upgrade %s could not be found.' % unknown)

    def test_an_id_in_upper_case_is_the_same_upgrade(self):
        # Found on MariaDB, which compares case-insensitively; 404 on
        # SQLite, as here, and so was a marker 400.
        upper = self.url.replace(self.upgrade_id, self.upgrade_id.upper())
        resp = self.request('GET', upper)
        self.assertEqual(200, resp.status_int, resp.text)
        self.assertEqual(self.upgrade_id, resp.json['upgrade']['id'])
        self.request('POST', self.mgmt + '/upgrades', base.upgrade_body(
            instance_version='2.0'))
        resp = self.request('GET', self.mgmt + '/upgrades?marker='
                            + self.upgrade_id.upper())
        self.assertEqual(200, resp.status_int, resp.text)
        self.assertEqual([], resp.json['upgrades'])
        resp = self.request('DELETE', upper)
        self.assertEqual(200, resp.status_int, resp.text)

    def test_show_malformed_id_is_404(self):
        self.assertError(self.request('GET', self.mgmt + '/upgrades/x%20y'),
                         404, 'Upgrade x y could not be found.')

    def test_cancel(self):
        resp = self.request('DELETE', self.url)
        self.assertEqual(200, resp.status_int, resp.text)
        self.assertEqual(states.CANCELLED, resp.json['upgrade']['status'])
        self.assertIsNotNone(resp.json['upgrade']['finished_at'])
        events = self.request('GET', self.url).json['upgrade']['events']
        self.assertEqual((states.SENT, states.CANCELLED),
                         (events[-1]['from_state'], events[-1]['to_state']))
        # Cancelling again changes nothing and says so without an error.
        again = self.request('DELETE', self.url)
        self.assertEqual(200, again.status_int, again.text)
        self.assertEqual(3, len(self.request('GET', self.url)
                                .json['upgrade']['events']))

    def test_cancel_after_the_agent_started_is_409(self):
        db_transitions.transition_upgrade(context.get_admin_context(),
                                          self.upgrade_id, states.DOWNLOADING,
                                          'agent')
        self.assertError(self.request('DELETE', self.url), 409,
                         'cannot go from DOWNLOADING to CANCELLED')
        self.assertEqual(states.DOWNLOADING,
                         self.request('GET', self.url)
                         .json['upgrade']['status'])

    def test_cancel_unknown_and_malformed(self):
        unknown = uuidutils.generate_uuid()
        self.assertError(self.request('DELETE',
                                      self.mgmt + '/upgrades/' + unknown),
                         404, 'Upgrade %s could not be found.' % unknown)
        self.assertError(self.request('DELETE',
                                      self.mgmt + '/upgrades/1'),
                         404, 'Upgrade 1 could not be found.')
