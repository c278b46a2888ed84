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

"""``openstack database rollout ...`` against a faked API."""

import json

from trove_upgrade.tests.unit.osc import base

ROLLOUTS = base.MGMT + '/rollouts'
ROLLOUT_ID = '3c1d2e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f'


def rollout(**overrides):
    body = {
        'id': ROLLOUT_ID, 'name': 'blue', 'instance_version': 'v2.0.0',
        'strategy': 'http', 'location': 'https://repo/a.tar',
        'selector': {'group': 'blue'}, 'canary': 1, 'max_in_flight': '10%',
        'max_failures': 2, 'per_agent_retries': 0, 'agent_deadline': 3600,
        'start_at': None, 'status': 'RUNNING', 'status_detail': None,
        'failures_acknowledged': 0, 'project_id': base.PROJECT_ID,
        'user_id': 'admin', 'created_at': '2026-11-29T18:00:00Z',
        'updated_at': '2026-11-29T18:00:00Z', 'finished_at': None,
        'links': [{'rel': 'self', 'href': ROLLOUTS + '/' + ROLLOUT_ID}],
        'counters': {'targets': 4, 'waiting': 1, 'in_progress': 1,
                     'retrying': 0, 'succeeded': 1, 'current': 1,
                     'failed': 0, 'in_flight': 1, 'in_flight_limit': 1,
                     'failure_tolerance': 0},
        'agents': [{'instance_id': base.INSTANCE_ID, 'state': 'succeeded'}],
    }
    body.update(overrides)
    return body


class TestRolloutCommands(base.OSCTestCase):

    def test_create_sends_the_selector_and_thresholds(self):
        self.requests.post(ROLLOUTS, json={'rollout': rollout()},
                           status_code=201)
        code, out, err = self.openstack(
            'database', 'rollout', 'create', 'blue',
            '--instance-version', 'v2.0.0',
            '--strategy', 'http', '--location', 'https://repo/a.tar',
            '--label', 'group=blue', '--label', 'az=nova',
            '--max-in-flight', '10%', '--max-failures', '2',
            '--canary', '1', '-f', 'json')
        self.assertEqual(0, code, err)
        (request,) = self.api_requests()
        self.assertEqual({'rollout': {
            'name': 'blue', 'instance_version': 'v2.0.0',
            'strategy': 'http', 'location': 'https://repo/a.tar',
            'selector': {'labels': {'group': 'blue', 'az': 'nova'}},
            'canary': 1, 'max_in_flight': '10%', 'max_failures': 2}},
            request.json())
        self.assertEqual(ROLLOUT_ID, json.loads(out)['id'])

    def test_create_by_availability_zone(self):
        self.requests.post(ROLLOUTS, json={'rollout': rollout()},
                           status_code=201)
        for selection, selector in (
                (['--availability-zone', 'az-1'],
                 {'availability_zone': 'az-1'}),
                (['--group', 'blue', '--availability-zone', 'az-1'],
                 {'group': 'blue', 'availability_zone': 'az-1'})):
            code, _out, err = self.openstack(
                'database', 'rollout', 'create', 'blue',
                '--instance-version', 'v2.0.0', '--package', 'guest',
                *selection)
            self.assertEqual(0, code, err)
            self.assertEqual(selector,
                             self.api_requests()[-1].json()['rollout'][
                                 'selector'])
        code, _out, err = self.openstack(
            'database', 'rollout', 'create', 'blue',
            '--instance-version', 'v2.0.0', '--package', 'guest')
        self.assertEqual(1, code)
        self.assertIn('Select agents with --group, --label, --instance or '
                      '--availability-zone.', err)
        self.assertEqual(2, len(self.api_requests()))

    def test_create_with_the_topology_options(self):
        self.requests.post(ROLLOUTS, json={'rollout': rollout()},
                           status_code=201)
        for given, sent in (
                ([], {}),
                (['--no-hold-set-on-failure'],
                 {'hold_set_on_failure': False}),
                (['--no-order-by-topology', '--hold-set-on-failure'],
                 {'order_by_topology': False, 'hold_set_on_failure': True})):
            code, _out, err = self.openstack(
                'database', 'rollout', 'create', 'blue',
                '--instance-version', 'v2.0.0', '--package', 'guest',
                '--group', 'blue', *given)
            self.assertEqual(0, code, err)
            body = self.api_requests()[-1].json()['rollout']
            self.assertEqual(sent, {k: v for k, v in body.items() if k in (
                'order_by_topology', 'hold_set_on_failure')})

    def test_show_lists_the_sets_in_upgrade_order(self):
        primary, replica = base.INSTANCE_ID, ROLLOUT_ID
        sets = [{'kind': 'replication', 'id': primary, 'members': [
            {'instance_id': replica, 'role': 'replica',
             'state': 'in_progress'},
            {'instance_id': primary, 'role': 'primary', 'state': None}]}]
        self.requests.get(ROLLOUTS + '/' + ROLLOUT_ID,
                          json={'rollout': rollout(sets=sets)})
        code, out, err = self.openstack('database', 'rollout', 'show',
                                        ROLLOUT_ID, '-c', 'sets',
                                        '--max-width', '0')
        self.assertEqual(0, code, err)
        self.assertIn(
            'replication %s: %s (replica, in_progress) -> %s (primary, '
            'not in this rollout)' % (primary, replica, primary), out)
        code, out, err = self.openstack('database', 'rollout', 'show',
                                        ROLLOUT_ID, '-f', 'json')
        self.assertEqual(sets, json.loads(out)['sets'])

    def test_create_refuses_a_bad_threshold_before_any_request(self):
        code, _out, err = self.openstack(
            'database', 'rollout', 'create', 'blue',
            '--instance-version', 'v2.0.0',
            '--strategy', 'http', '--location', 'x', '--group', 'blue',
            '--max-in-flight', 'ten')
        self.assertEqual(2, code)
        self.assertIn('neither a count nor a percent', err)
        self.assertEqual([], self.api_requests())

    def test_conflict_is_reported_with_the_api_message(self):
        self.requests.post(ROLLOUTS, status_code=409, json=base.error(
            409, 'Conflict', 'Active rollout X (blue) already selects 1 of '
                             'these agents: Y.'))
        code, _out, err = self.openstack(
            'database', 'rollout', 'create', 'b',
            '--instance-version', 'v2.0.0',
            '--strategy', 'http', '--location', 'x', '--instance',
            base.INSTANCE_ID)
        self.assertEqual(1, code)
        self.assertIn('Active rollout X (blue) already selects', err)
        self.assertIn('(HTTP 409)', err)

    def test_list(self):
        self.requests.get(ROLLOUTS, json={'rollouts': [rollout()]})
        code, out, err = self.openstack('database', 'rollout', 'list',
                                        '--status', 'running', '-f', 'json')
        self.assertEqual(0, code, err)
        (request,) = self.api_requests()
        self.assertEqual({'status': ['running']}, request.qs)
        self.assertEqual([{'ID': ROLLOUT_ID, 'Name': 'blue',
                           'Instance Version': 'v2.0.0',
                           'Status': 'RUNNING',
                           'Created At': '2026-11-29T18:00:00Z'}],
                         json.loads(out))

    def test_show_wait_prints_progress_until_it_ends(self):
        done = rollout(status='COMPLETED', counters=dict(
            rollout()['counters'], waiting=0, in_progress=0, succeeded=3,
            in_flight=0))
        self.requests.get(ROLLOUTS + '/' + ROLLOUT_ID,
                          [{'json': {'rollout': rollout()}},
                           {'json': {'rollout': done}}])
        code, out, err = self.openstack(
            'database', 'rollout', 'show', ROLLOUT_ID, '--wait',
            '--interval', '0', '-f', 'json')
        self.assertEqual(0, code, err)
        self.assertIn('RUNNING: 2/4 settled (1 succeeded, 1 current, '
                      '0 failed), 1 in flight', err)
        self.assertIn('COMPLETED: 4/4 settled', err)
        self.assertEqual('COMPLETED', json.loads(out)['status'])

    def test_actions_and_delete(self):
        for action in ('pause', 'resume', 'abort'):
            self.requests.post(ROLLOUTS + '/%s/%s' % (ROLLOUT_ID, action),
                               json={'rollout': rollout()})
            code, _out, err = self.openstack('database', 'rollout', action,
                                             ROLLOUT_ID)
            self.assertEqual(0, code, err)
        self.requests.delete(ROLLOUTS + '/' + ROLLOUT_ID, status_code=204)
        code, _out, err = self.openstack('database', 'rollout', 'delete',
                                         ROLLOUT_ID)
        self.assertEqual(0, code, err)
        self.assertEqual(
            ['POST', 'POST', 'POST', 'DELETE'],
            [r.method for r in self.api_requests()])

    def test_show_wait_refuses_seconds_that_cannot_work(self):
        # NaN as --timeout waited forever; NaN or a negative --interval
        # ended in time.sleep's error once the rollout was read.
        self.requests.get(ROLLOUTS + '/' + ROLLOUT_ID,
                          json={'rollout': rollout()})
        # The --interval cases first: old code failed them at once, and
        # waited forever on the --timeout ones.
        for option, value in (('--interval', 'nan'), ('--interval', '-1'),
                              ('--interval', 'soon'), ('--timeout', 'nan'),
                              ('--timeout', 'inf')):
            code, _out, err = self.openstack(
                'database', 'rollout', 'show', ROLLOUT_ID, '--wait', option,
                value)
            self.assertEqual(2, code, err)
            self.assertIn("argument %s: '%s' is not a number of seconds "
                          "from 0 to 31622400" % (option, value), err)
        self.assertEqual([], self.api_requests())
