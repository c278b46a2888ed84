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

"""/v1.0/{tenant_id}/mgmt/agents: what the registered agents reported."""

import datetime

from oslo_utils import timeutils
from oslo_utils import uuidutils

from trove_upgrade.common import context
from trove_upgrade.common import states
from trove_upgrade.conductor import manager
from trove_upgrade.db import agents as db_agents
from trove_upgrade.db import transitions as db_transitions
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.tests.unit.api import base


class TestAgents(base.APITestCase):

    def setUp(self):
        super().setUp()
        self.ctx = context.get_admin_context()
        self.instances = sorted(uuidutils.generate_uuid() for _ in range(3))
        for number, instance_id in enumerate(self.instances):
            db_agents.register_agent(self.ctx, instance_id, {
                'agent_version': '1.%d.0' % number,
                'guest_version': 'v1.0.%d' % (number % 2),
                'rpc_api_version': '1.0',
                'state': 'RUNNING' if number else 'UPGRADING',
                'labels': {'group': 'canary' if number else 'fleet'},
                'host': 'guest-%d' % number,
            })

    def _get(self, path):
        resp = self.request('GET', self.mgmt + '/agents' + path)
        self.assertEqual(200, resp.status_int, resp.text)
        return resp.json

    def test_list(self):
        agents = self._get('')['agents']
        self.assertEqual(self.instances, [a['instance_id'] for a in agents])
        first = agents[0]
        self.assertEqual('1.0.0', first['agent_version'])
        self.assertEqual('v1.0.0', first['guest_version'])
        self.assertEqual('1.0', first['rpc_api_version'])
        self.assertEqual('UPGRADING', first['state'])
        self.assertEqual({'group': 'fleet'}, first['labels'])
        self.assertTrue(first['reachable'])
        self.assertRegex(first['last_heartbeat'],
                         r'^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$')

    def test_filters(self):
        def ids(query):
            return [a['instance_id'] for a in self._get(query)['agents']]

        self.assertEqual([self.instances[1]],
                         ids('?guest_version=v1.0.1'))
        self.assertEqual(self.instances[1:], ids('?state=RUNNING'))
        self.assertEqual([self.instances[2]],
                         ids('?state=RUNNING&guest_version=v1.0.0'))
        self.assertEqual(self.instances, ids('?rpc_api_version=1.0'))
        self.assertEqual([], ids('?rpc_api_version=2.0'))

    def test_pagination(self):
        body = self._get('?limit=2')
        self.assertEqual(self.instances[:2],
                         [a['instance_id'] for a in body['agents']])
        href = body['links'][0]['href']
        self.assertIn('marker=' + self.instances[1], href)
        rest = self._get(href[href.index('?'):])
        self.assertEqual(self.instances[2:],
                         [a['instance_id'] for a in rest['agents']])
        self.assertNotIn('links', rest)

    def test_bad_queries(self):
        for query, detail in (
                ('?labels=xyz', "'xyz' does not match"),
                ('?colour=red', "('colour' was unexpected)"),
                ('?rpc_api_version=one', "'one' does not match"),
                ('?state=', "'' should be non-empty (at $.state)"),
                ('?limit=x', "limit must be a positive integer, not 'x'."),
                ('?marker=' + self.instances[0][:8], "is not a 'uuid'")):
            self.assertError(self.request('GET', self.mgmt + '/agents' +
                                          query), 400, detail)
        unknown = uuidutils.generate_uuid()
        self.assertError(
            self.request('GET', self.mgmt + '/agents?marker=' + unknown),
            400, 'Marker %s could not be found.' % unknown)

    def test_show(self):
        agent = self._get('/' + self.instances[2])['agent']
        self.assertEqual(self.instances[2], agent['instance_id'])
        self.assertEqual('guest-2', agent['host'])
        self.assertEqual('http://localhost%s/agents/%s'
                         % (self.mgmt, self.instances[2]),
                         agent['links'][0]['href'])

    def test_show_unknown_and_malformed(self):
        unknown = uuidutils.generate_uuid()
        self.assertError(
            self.request('GET', self.mgmt + '/agents/' + unknown), 404,
            'No agent is registered for instance %s.' % unknown)
        self.assertError(
            self.request('GET', self.mgmt + '/agents/guest-1'), 404,
            'No agent is registered for instance guest-1.')

    def test_silent_agent_is_unreachable(self):
        self.flags(group='conductor', agent_down_time=120)
        silent = uuidutils.generate_uuid()
        long_ago = timeutils.utcnow() - datetime.timedelta(minutes=10)
        timeutils.set_time_override(long_ago)
        self.addCleanup(timeutils.clear_time_override)
        db_agents.register_agent(self.ctx, silent, {'state': 'RUNNING'})
        timeutils.clear_time_override()
        agent = self._get('/' + silent)['agent']
        self.assertFalse(agent['reachable'])
        self.assertEqual(long_ago.isoformat() + 'Z', agent['last_heartbeat'])
        self.assertTrue(self._get('/' + self.instances[0])
                        ['agent']['reachable'])


class TestDeleteAgent(base.APITestCase):

    def setUp(self):
        super().setUp()
        self.ctx = context.get_admin_context()
        self.instance_id = uuidutils.generate_uuid()
        self.url = self.mgmt + '/agents/' + self.instance_id
        db_agents.register_agent(self.ctx, self.instance_id,
                                 {'state': 'RUNNING', 'host': 'guest-1'})

    def _upgrade(self, status):
        upgrade = db_upgrades.create_upgrade(self.ctx, base.upgrade_body(
            instance_id=self.instance_id))
        if status != states.PENDING:
            db_transitions.transition_upgrade(self.ctx, upgrade['id'], status,
                                              'agent')
        return upgrade

    def test_delete(self):
        resp = self.request('DELETE', self.url)
        self.assertEqual(204, resp.status_int, resp.text)
        self.assertEqual(b'', resp.body)
        self.assertError(self.request('GET', self.url), 404,
                         'No agent is registered for instance %s.'
                         % self.instance_id)

    def test_unknown_and_malformed_instances(self):
        for instance_id in (uuidutils.generate_uuid(), 'guest-1'):
            self.assertError(
                self.request('DELETE', self.mgmt + '/agents/' + instance_id),
                404, 'No agent is registered for instance %s.' % instance_id)
        self.assertError(self.request('DELETE', self.url + '-'), 404,
                         self.instance_id)
        self.assertEqual(204, self.request('DELETE', self.url).status_int)
        self.assertError(self.request('DELETE', self.url), 404,
                         self.instance_id)

    def test_unfinished_upgrade_is_a_conflict(self):
        upgrade = self._upgrade(states.DOWNLOADING)
        error = self.assertError(self.request('DELETE', self.url), 409,
                                 'upgrade %s is DOWNLOADING' % upgrade['id'])
        self.assertIn('Cancel the upgrade', error['detail'])
        self.assertIn('or wait for it to end', error['detail'])
        self.assertEqual(200, self.request('GET', self.url).status_int)

    def test_upgrades_and_their_events_are_kept(self):
        upgrade = self._upgrade(states.FAILED)
        self.assertEqual(204, self.request('DELETE', self.url).status_int)
        resp = self.request('GET', self.mgmt + '/upgrades/' + upgrade['id'])
        self.assertEqual(200, resp.status_int, resp.text)
        self.assertEqual(states.FAILED, resp.json['upgrade']['status'])
        self.assertEqual([None, states.PENDING],
                         [e['from_state'] for e in resp.json['upgrade'][
                             'events']])

    def test_heartbeat_after_deletion_registers_again(self):
        self.assertEqual(204, self.request('DELETE', self.url).status_int)
        manager.ConductorManager().heartbeat(
            self.ctx, self.instance_id, agent_version='1.0.0',
            guest_version='v1.0.0', rpc_api_version='1.0', state='RUNNING',
            labels={}, host='guest-2')
        resp = self.request('GET', self.url)
        self.assertEqual(200, resp.status_int, resp.text)
        self.assertEqual('guest-2', resp.json['agent']['host'])

    def test_only_an_admin_may_delete(self):
        self.assertError(self.request('DELETE', self.url, roles='member'),
                         403, 'trove_upgrade:agents:delete')
        self.assertEqual(200, self.request('GET', self.url).status_int)
