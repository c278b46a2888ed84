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

"""``openstack database agent list|show|delete`` against a faked API."""

import json

from trove_upgrade.tests.unit.osc import base

AGENTS = base.MGMT + '/agents'


class TestListAgents(base.OSCTestCase):

    def test_columns_and_filters(self):
        self.requests.get(AGENTS, json={'agents': [base.agent()]})

        code, out, err = self.openstack(
            'database', 'agent', 'list', '--guest-version', 'v1.0.0',
            '--state', 'RUNNING', '--rpc-api-version', '1.0',
            '--limit', '10', '--marker', base.UPGRADE_ID, '-f', 'json')

        self.assertEqual(0, code, err)
        (request,) = self.api_requests()
        self.assertEqual({'guest_version': ['v1.0.0'],
                          'state': ['running'],
                          'rpc_api_version': ['1.0'],
                          'limit': ['10'],
                          'marker': [base.UPGRADE_ID]}, request.qs)
        self.assertEqual([{'Instance ID': base.INSTANCE_ID,
                           'Agent Version': '1.0.0',
                           'Guest Version': 'v1.0.0',
                           'RPC API Version': '1.0',
                           'State': 'RUNNING',
                           'Reachable': True,
                           'Last Heartbeat': '2026-11-29T18:00:00Z'}],
                         json.loads(out))

    def test_long_shows_host_and_labels(self):
        self.requests.get(AGENTS, json={'agents': [base.agent()]})

        code, out, err = self.openstack('database', 'agent', 'list',
                                        '--long', '-f', 'json')

        self.assertEqual(0, code, err)
        (row,) = json.loads(out)
        self.assertEqual('guest-1', row['Host'])
        self.assertEqual({'group': 'canary'}, row['Labels'])

    def test_labels_are_readable_in_a_table(self):
        self.requests.get(AGENTS, json={'agents': [base.agent()]})

        code, out, err = self.openstack('database', 'agent', 'list',
                                        '--long', '-c', 'Labels')

        self.assertEqual(0, code, err)
        self.assertIn("| group='canary' |", out)


class TestShowAgent(base.OSCTestCase):

    def test_show(self):
        self.requests.get(AGENTS + '/' + base.INSTANCE_ID,
                          json={'agent': base.agent()})

        code, out, err = self.openstack('database', 'agent', 'show',
                                        base.INSTANCE_ID, '-f', 'json')

        self.assertEqual(0, code, err)
        expected = base.agent()
        del expected['links']
        self.assertEqual(expected, json.loads(out))

    def test_an_instance_without_agent_is_the_apis_404(self):
        message = 'No agent is registered for instance %s.' % (
            base.INSTANCE_ID)
        self.requests.get(AGENTS + '/' + base.INSTANCE_ID, status_code=404,
                          json=base.error(404, 'Not Found', message))

        code, out, err = self.openstack('database', 'agent', 'show',
                                        base.INSTANCE_ID)

        self.assertEqual(1, code)
        self.assertEqual('', out)
        self.assertEqual(message + ' (HTTP 404) (Request-ID: req-error)\n',
                         err)


class TestDeleteAgent(base.OSCTestCase):

    def test_delete_prints_nothing(self):
        self.requests.delete(AGENTS + '/' + base.INSTANCE_ID,
                             status_code=204)

        code, out, err = self.openstack('database', 'agent', 'delete',
                                        base.INSTANCE_ID)

        self.assertEqual(0, code, err)
        self.assertEqual(('', ''), (out, err))
        self.assertEqual(['DELETE'], [r.method for r in self.api_requests()])

    def test_each_agent_is_tried_and_failures_are_counted(self):
        busy = '11111111-2222-4333-8444-555555555555'
        gone = '22222222-3333-4444-8555-666666666666'
        busy_message = ('The agent of instance %s is being upgraded: '
                        'upgrade %s is DOWNLOADING.' % (busy,
                                                        base.UPGRADE_ID))
        gone_message = 'No agent is registered for instance %s.' % gone
        self.requests.delete(AGENTS + '/' + busy, status_code=409,
                             json=base.error(409, 'Conflict', busy_message))
        self.requests.delete(AGENTS + '/' + base.INSTANCE_ID,
                             status_code=204)
        self.requests.delete(AGENTS + '/' + gone, status_code=404,
                             json=base.error(404, 'Not Found', gone_message))

        code, out, err = self.openstack('database', 'agent', 'delete', busy,
                                        base.INSTANCE_ID, gone)

        self.assertEqual(1, code)
        self.assertEqual('', out)
        self.assertEqual([busy, base.INSTANCE_ID, gone],
                         [r.path.rsplit('/', 1)[1]
                          for r in self.api_requests()])
        self.assertEqual([
            'Failed to delete the agent of instance %s: %s (HTTP 409) '
            '(Request-ID: req-error)' % (busy, busy_message),
            'Failed to delete the agent of instance %s: %s (HTTP 404) '
            '(Request-ID: req-error)' % (gone, gone_message),
            '2 of 3 agents could not be deleted.'], err.splitlines())
