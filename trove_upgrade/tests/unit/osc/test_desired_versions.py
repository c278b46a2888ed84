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

"""``openstack database desired version ...`` and ``target list``."""

import json

from trove_upgrade.tests.unit.osc import base

DESIRED = base.MGMT + '/desired-versions'
TARGETS = base.MGMT + '/targets'
DV_ID = '7e2f3a4b-5c6d-4e7f-8a9b-0c1d2e3f4a5b'
OTHER_INSTANCE = '1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f'


def desired(**overrides):
    body = {
        'id': DV_ID, 'name': 'blue', 'package_name': 'trove-guestagent',
        'version': '26.0.0', 'selector': {'group': 'blue'}, 'canary': 1,
        'max_in_flight': '10%', 'max_failures': 0, 'per_agent_retries': 1,
        'agent_deadline': 3600, 'status': 'ACTIVE', 'status_detail': None,
        'failures_acknowledged': 0, 'project_id': base.PROJECT_ID,
        'user_id': 'admin', 'created_at': '2026-11-29T18:00:00Z',
        'updated_at': '2026-11-29T18:00:00Z',
        'links': [{'rel': 'self', 'href': DESIRED + '/' + DV_ID}],
        'counters': {'targets': 1, 'succeeded': 0, 'ahead': 0,
                     'blocked': 0},
        'agents': [{'instance_id': base.INSTANCE_ID, 'state': 'waiting'}],
        'events': [{'created_at': '2026-11-29T18:00:00Z',
                    'action': 'created', 'detail': 'trove-guestagent 26.0.0',
                    'source': 'api', 'user_id': 'admin',
                    'project_id': base.PROJECT_ID, 'request_id': 'req-1'}],
    }
    body.update(overrides)
    return body


def target(instance_id, version='26.0.0'):
    owner = {'kind': 'desired_version', 'id': DV_ID, 'name': 'blue',
             'version': version, 'status': 'ACTIVE'}
    return {'instance_id': instance_id, 'running_version': '25.1.0',
            'version': version, 'owner': owner,
            'reason': 'selected by desired version %s' % DV_ID,
            'shadowed': []}


class TestDesiredVersionCommands(base.OSCTestCase):

    def test_create_sends_package_selector_and_thresholds(self):
        self.requests.post(DESIRED, status_code=201,
                           json={'desired_version': desired()})
        code, out, err = self.openstack(
            'database', 'desired', 'version', 'create', 'blue',
            '--package', 'trove-guestagent', '--package-version', '26.0.0',
            '--group', 'blue', '--max-in-flight', '10%',
            '--per-agent-retries', '2', '-f', 'json')
        self.assertEqual(0, code, err)
        (request,) = self.api_requests()
        self.assertEqual({'desired_version': {
            'name': 'blue', 'package': 'trove-guestagent',
            'version': '26.0.0', 'selector': {'group': 'blue'},
            'max_in_flight': '10%', 'per_agent_retries': 2}},
            request.json())
        shown = json.loads(out)
        self.assertNotIn('links', shown)
        self.assertEqual(
            (DV_ID, 'created',
             [{'instance_id': base.INSTANCE_ID, 'state': 'waiting'}]),
            (shown['id'], shown['events'][0]['action'], shown['agents']))

    def test_create_needs_a_selector_and_sends_nothing(self):
        code, _out, err = self.openstack(
            'database', 'desired', 'version', 'create', 'blue',
            '--package', 'trove-guestagent', '--package-version', '26.0.0')
        self.assertEqual(1, code)
        self.assertIn('--group', err)
        self.assertEqual([], self.api_requests())

    def test_overlap_is_the_apis_409(self):
        self.requests.post(DESIRED, status_code=409, json=base.error(
            409, 'Conflict', 'Desired version X (green) already selects 1 '
                             'of these agents: Y.'))
        code, _out, err = self.openstack(
            'database', 'desired', 'version', 'create', 'blue',
            '--package', 'g', '--package-version', '1', '--instance',
            base.INSTANCE_ID)
        self.assertEqual(1, code)
        self.assertIn('already selects 1 of these agents: Y. (HTTP 409)',
                      err)

    def test_list_filters_and_long_columns(self):
        self.requests.get(DESIRED, json={'desired_versions': [desired()]})
        code, out, err = self.openstack(
            'database', 'desired', 'version', 'list', '--status', 'paused',
            '--name', 'blue', '--long', '-f', 'json')
        self.assertEqual(0, code, err)
        (request,) = self.api_requests()
        self.assertEqual({'status': ['paused'], 'name': ['blue']},
                         request.qs)
        row, = json.loads(out)
        self.assertEqual(
            (DV_ID, '26.0.0', {'group': 'blue'}, '10%'),
            (row['ID'], row['Version'], row['Selector'],
             row['Max In Flight']))

    def test_set_sends_only_what_is_given(self):
        self.requests.patch(DESIRED + '/' + DV_ID, json={
            'desired_version': desired(version='26.1.0')})
        code, out, err = self.openstack(
            'database', 'desired', 'version', 'set', DV_ID,
            '--package-version', '26.1.0', '--max-failures', '5%',
            '-f', 'json')
        self.assertEqual(0, code, err)
        self.assertEqual({'desired_version': {'version': '26.1.0',
                                              'max_failures': '5%'}},
                         self.api_requests()[0].json())
        self.assertEqual('26.1.0', json.loads(out)['version'])

    def test_set_without_a_change_sends_nothing(self):
        code, _out, err = self.openstack(
            'database', 'desired', 'version', 'set', DV_ID)
        self.assertEqual(1, code)
        self.assertIn('Nothing to change', err)
        self.assertEqual([], self.api_requests())

    def test_show_pause_resume_delete(self):
        href = DESIRED + '/' + DV_ID
        self.requests.get(href, json={'desired_version': desired()})
        for action in ('pause', 'resume'):
            self.requests.post(href + '/' + action, json={
                'desired_version': desired(status='PAUSED')})
        self.requests.delete(href, status_code=204)
        for argv in (('show', DV_ID), ('pause', DV_ID), ('resume', DV_ID),
                     ('delete', DV_ID)):
            code, _out, err = self.openstack('database', 'desired',
                                             'version', *argv)
            self.assertEqual(0, code, err)
        self.assertEqual(
            [('GET', href), ('POST', href + '/pause'),
             ('POST', href + '/resume'), ('DELETE', href)],
            [(r.method, r.url) for r in self.api_requests()])

    def test_show_as_a_table_has_one_line_per_event(self):
        self.requests.get(DESIRED + '/' + DV_ID,
                          json={'desired_version': desired()})
        code, out, err = self.openstack('database', 'desired', 'version',
                                        'show', DV_ID)
        self.assertEqual(0, code, err)
        self.assertIn("action='created'", out)


class TestTargetAndFleetPaging(base.OSCTestCase):

    def test_target_list_follows_the_next_links(self):
        self.requests.get(TARGETS, [
            {'json': {'targets': [target(base.INSTANCE_ID)], 'links': [
                {'rel': 'next', 'href': TARGETS + '?limit=1&marker=' +
                 base.INSTANCE_ID}]}},
            {'json': {'targets': [target(OTHER_INSTANCE)]}}])
        code, out, err = self.openstack('database', 'target', 'list',
                                        '--long', '-f', 'json')
        self.assertEqual(0, code, err)
        self.assertEqual([{}, {'marker': [base.INSTANCE_ID]}],
                         [r.qs for r in self.api_requests()])
        rows = json.loads(out)
        self.assertEqual([base.INSTANCE_ID, OTHER_INSTANCE],
                         [r['Instance ID'] for r in rows])
        self.assertEqual(('25.1.0', '26.0.0', 'blue', []),
                         (rows[0]['Running Version'], rows[0]['Version'],
                          rows[0]['Owner']['name'], rows[0]['Shadowed']))

    def test_target_list_one_page(self):
        self.requests.get(TARGETS, json={'targets': [target(
            base.INSTANCE_ID)], 'links': [{'rel': 'next', 'href': 'x'}]})
        code, out, err = self.openstack(
            'database', 'target', 'list', '--instance', base.INSTANCE_ID,
            '--limit', '1', '--marker', OTHER_INSTANCE, '-f', 'json')
        self.assertEqual(0, code, err)
        (request,) = self.api_requests()
        self.assertEqual({'instance_id': [base.INSTANCE_ID], 'limit': ['1'],
                          'marker': [OTHER_INSTANCE]}, request.qs)
        self.assertEqual(1, len(json.loads(out)))

    def test_fleet_pages(self):
        fleet = base.MGMT + '/packages/fleet'
        row = {'version': '25.1.0', 'running': 3, 'targeted': 0,
               'in_flight': 0, 'failed': 0, 'packages': []}
        self.requests.get(fleet, [
            {'json': {'versions': [row], 'links': [
                {'rel': 'next', 'href': fleet + '?limit=1&marker=25.1.0'}]}},
            {'json': {'versions': [dict(row, version='26.0.0')]}}])
        code, out, err = self.openstack('database', 'package', 'fleet',
                                        '-f', 'json')
        self.assertEqual(0, code, err)
        self.assertEqual([{}, {'marker': ['25.1.0']}],
                         [r.qs for r in self.api_requests()])
        self.assertEqual(['25.1.0', '26.0.0'],
                         [r['Version'] for r in json.loads(out)])
        code, out, err = self.openstack('database', 'package', 'fleet',
                                        '--limit', '1', '--marker', '25.0',
                                        '-f', 'json')
        self.assertEqual(0, code, err)
        self.assertEqual({'limit': ['1'], 'marker': ['25.0']},
                         self.api_requests()[-1].qs)
