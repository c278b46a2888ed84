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

"""/v1.0/{tenant_id}/mgmt/rollouts: create, list, show, act on, delete."""

from oslo_utils import uuidutils

from trove_upgrade.common import context
from trove_upgrade.common import rollout_states as rs
from trove_upgrade.common import rpc_interface
from trove_upgrade.common import states
from trove_upgrade.db import agents as db_agents
from trove_upgrade.db import rollouts as db_rollouts
from trove_upgrade.db import transitions as db_transitions
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.services import rollouts
from trove_upgrade.tests.unit.api import base


def rollout_body(**overrides):
    body = {'name': 'blue to 2.0', 'instance_version': 'v2.0.0',
            'strategy': 'http',
            'location': 'https://repo.example/trove-guestagent-2.0.0.tar',
            'selector': {'group': 'blue'}}
    body.update(overrides)
    return {'rollout': body}


class TestRollouts(base.APITestCase):

    def setUp(self):
        super().setUp()
        self.ctx = context.get_admin_context()
        self.blue = sorted(uuidutils.generate_uuid() for _ in range(4))
        self.green = sorted(uuidutils.generate_uuid() for _ in range(2))
        for group, ids in (('blue', self.blue), ('green', self.green)):
            for instance_id in ids:
                db_agents.register_agent(self.ctx, instance_id, {
                    'guest_version': 'v1.0.0', 'state': 'RUNNING',
                    'labels': {'group': group, 'datastore': 'mysql'}})
        # One blue agent is already at the version.
        db_agents.register_agent(self.ctx, self.blue[0],
                                 {'guest_version': '2.0.0'})
        self.rollouts = self.mgmt + '/rollouts'

    def create(self, expected=201, **overrides):
        resp = self.request('POST', self.rollouts,
                            body=rollout_body(**overrides))
        self.assertEqual(expected, resp.status_int, resp.text)
        return resp

    def error(self, resp):
        return resp.json['errors'][0]['detail']

    def test_create_shows_counters_and_agents(self):
        resp = self.create(max_in_flight='50%', max_failures=1,
                           per_agent_retries=2, agent_deadline=600)
        rollout = resp.json['rollout']
        self.assertEqual(resp.headers['Location'], rollout['links'][0]['href'])
        self.assertEqual(
            (rs.RUNNING, 1, '50%', 1, 2, 600),
            (rollout['status'], rollout['canary'], rollout['max_in_flight'],
             rollout['max_failures'], rollout['per_agent_retries'],
             rollout['agent_deadline']))
        self.assertEqual(
            {'targets': 4, 'current': 1, 'waiting': 3, 'in_progress': 0,
             'retrying': 0, 'succeeded': 0, 'failed': 0, 'held': 0,
             'in_flight': 0, 'in_flight_limit': 2, 'failure_tolerance': 0},
            rollout['counters'])
        # Without [trove] connection there are no sets to follow.
        self.assertEqual([], rollout['sets'])
        self.assertEqual(
            [(self.blue[0], 'current')] + [(i, 'waiting')
                                           for i in self.blue[1:]],
            [(a['instance_id'], a['state']) for a in rollout['agents']])

    def test_defaults(self):
        rollout = self.create().json['rollout']
        self.assertEqual((1, 1, 0, 0, 3600, None, True, True),
                         (rollout['canary'], rollout['max_in_flight'],
                          rollout['max_failures'],
                          rollout['per_agent_retries'],
                          rollout['agent_deadline'], rollout['start_at'],
                          rollout['order_by_topology'],
                          rollout['hold_set_on_failure']))

    def test_topology_options(self):
        rollout = self.create(selector={'group': 'green'},
                              order_by_topology=False,
                              hold_set_on_failure=False).json['rollout']
        self.assertEqual((False, False), (rollout['order_by_topology'],
                                          rollout['hold_set_on_failure']))
        resp = self.create(expected=400, hold_set_on_failure='yes')
        self.assertIn('hold_set_on_failure', self.error(resp))

    def test_availability_zone_alone_or_with_a_group(self):
        # The zone the agents report, in their labels.
        zone = rpc_interface.AVAILABILITY_ZONE_LABEL
        for instance_id in (self.blue[1], self.green[0]):
            db_agents.register_agent(self.ctx, instance_id, {'labels': {
                'group': 'blue' if instance_id in self.blue else 'green',
                zone: 'az-2'}})
        rollout = self.create(selector={'availability_zone': 'az-2'}).json[
            'rollout']
        self.assertEqual(sorted([self.blue[1], self.green[0]]),
                         [a['instance_id'] for a in rollout['agents']])
        rollouts.abort_rollout(self.ctx, rollout['id'])
        rollout = self.create(selector={'group': 'blue',
                                        'availability_zone': 'az-2'}).json[
            'rollout']
        self.assertEqual([self.blue[1]],
                         [a['instance_id'] for a in rollout['agents']])
        self.create(expected=400, selector={'availability_zone': ''})

    def test_start_at_in_the_future_is_pending(self):
        rollout = self.create(start_at='2999-01-01T00:00:00Z').json[
            'rollout']
        self.assertEqual((rs.PENDING, '2999-01-01T00:00:00Z'),
                         (rollout['status'], rollout['start_at']))

    def test_overlapping_selector_is_a_conflict_naming_the_rollout(self):
        first = self.create().json['rollout']
        resp = self.create(expected=409,
                           selector={'instance_ids': [self.blue[2]]})
        detail = self.error(resp)
        self.assertIn(first['id'], detail)
        self.assertIn(self.blue[2], detail)
        self.assertEqual(1, len(db_rollouts.list_rollouts(self.ctx)))
        # Other agents are free; and once the first ended, so are these.
        self.create(selector={'group': 'green'})
        rollouts.abort_rollout(self.ctx, first['id'])
        self.create(selector={'instance_ids': [self.blue[2]]})

    def test_bad_input(self):
        cases = [
            ({'max_in_flight': 0}, 'max_in_flight'),
            ({'max_in_flight': '0%'}, 'max_in_flight'),
            ({'max_in_flight': '101%'}, 'max_in_flight'),
            ({'max_failures': '5'}, 'max_failures'),
            ({'max_failures': -1}, 'max_failures'),
            ({'canary': -1}, 'canary'),
            ({'selector': {}}, 'selector'),
            ({'selector': {'group': 'a', 'labels': {'b': 'c'}}},
             'selector'),
            ({'selector': {'instance_ids': ['nope']}},
             'Naming instances by name needs [trove] connection'),
            ({'selector': {'trove': {'datastore': 'mysql'}}},
             'Selecting by Trove facts needs [trove] connection'),
            ({'selector': {'trove': {'flavor': 'large'}}}, 'flavor'),
            ({'selector': {'group': 'a', 'trove': {}}}, 'trove'),
            ({'strategy': 'ftp'}, 'strategy'),
            ({'instance_version': 'not a version!'}, 'instance_version'),
            ({'instance_version': 'banana'}, 'instance_version'),
            ({'start_at': 'tomorrow'}, 'start_at'),
            # Years 1 and 9999, taken out of range by their offsets.
            ({'start_at': '0001-01-01T00:00:00+14:00'}, 'start_at'),
            ({'start_at': '9999-12-31T23:59:59-14:00'}, 'start_at'),
            ({'max_in_flight': '10%\n'}, 'max_in_flight'),
            ({'max_failures': '5%\n'}, 'max_failures'),
            ({'colour': 'red'}, 'colour'),
        ]
        for overrides, field in cases:
            resp = self.create(expected=400, **overrides)
            self.assertIn(field, self.error(resp), overrides)
        resp = self.request('POST', self.rollouts, body={'name': 'x'})
        self.assertEqual(400, resp.status_int)
        self.assertEqual([], db_rollouts.list_rollouts(self.ctx))

    def test_list_and_filter(self):
        first = self.create().json['rollout']
        second = self.create(selector={'group': 'green'},
                             name='green').json['rollout']
        self.request('POST', self.rollouts + '/%s/pause' % second['id'])
        resp = self.request('GET', self.rollouts)
        self.assertEqual([second['id'], first['id']],
                         [r['id'] for r in resp.json['rollouts']])
        self.assertNotIn('agents', resp.json['rollouts'][0])
        resp = self.request('GET', self.rollouts + '?status=PAUSED')
        self.assertEqual([second['id']],
                         [r['id'] for r in resp.json['rollouts']])
        resp = self.request('GET', self.rollouts + '?name=green')
        self.assertEqual([second['id']],
                         [r['id'] for r in resp.json['rollouts']])
        resp = self.request('GET', self.rollouts + '?status=DONE')
        self.assertEqual(400, resp.status_int)

    def test_pause_resume_abort_delete(self):
        rollout = self.create().json['rollout']
        url = self.rollouts + '/' + rollout['id']
        resp = self.request('POST', url + '/pause')
        self.assertEqual((200, rs.PAUSED, 'Paused by an operator.'),
                         (resp.status_int, resp.json['rollout']['status'],
                          resp.json['rollout']['status_detail']))
        resp = self.request('POST', url + '/pause')
        self.assertEqual(409, resp.status_int)
        self.assertIn('is PAUSED: it cannot be paused', self.error(resp))
        resp = self.request('DELETE', url)
        self.assertEqual(409, resp.status_int)
        self.assertIn('cannot be deleted', self.error(resp))
        resp = self.request('POST', url + '/resume')
        self.assertEqual((200, rs.RUNNING),
                         (resp.status_int, resp.json['rollout']['status']))
        resp = self.request('POST', url + '/resume')
        self.assertEqual(409, resp.status_int)
        resp = self.request('POST', url + '/abort')
        self.assertEqual((200, rs.ABORTED),
                         (resp.status_int, resp.json['rollout']['status']))
        self.assertIsNotNone(resp.json['rollout']['finished_at'])
        resp = self.request('POST', url + '/resume')
        self.assertEqual(409, resp.status_int)
        resp = self.request('DELETE', url)
        self.assertEqual(204, resp.status_int)
        resp = self.request('GET', url)
        self.assertEqual(404, resp.status_int)
        self.assertIn(rollout['id'], self.error(resp))

    def test_abort_cancels_unstarted_upgrades(self):
        rollout = db_rollouts.get_rollout(
            self.ctx, self.create().json['rollout']['id'])
        db_rollouts.lease_rollout(self.ctx, rollout['id'], 'me',
                                  rollout['created_at'].replace(
                                      year=2999))
        sent, claimed = db_rollouts.create_rollout_upgrades(
            self.ctx, rollout, [(self.blue[1], 1, True),
                                (self.blue[2], 1, False)], 'me')
        db_transitions.transition_upgrade(self.ctx, claimed['id'],
                                          states.DOWNLOADING, 'agent')
        self.request('POST', self.rollouts + '/%s/abort' % rollout['id'])
        self.assertEqual(
            (states.CANCELLED, states.DOWNLOADING),
            (db_upgrades.get_upgrade(self.ctx, sent['id'])['status'],
             db_upgrades.get_upgrade(self.ctx, claimed['id'])['status']))

    def test_unknown_and_malformed_ids(self):
        for rollout_id in ('nope', uuidutils.generate_uuid()):
            for method, suffix in (('GET', ''), ('DELETE', ''),
                                   ('POST', '/pause'), ('POST', '/resume'),
                                   ('POST', '/abort')):
                resp = self.request(method, '%s/%s%s' % (
                    self.rollouts, rollout_id, suffix))
                self.assertEqual(404, resp.status_int)
                self.assertIn(rollout_id, self.error(resp))

    def test_action_refuses_a_body(self):
        rollout = self.create().json['rollout']
        resp = self.request('POST', self.rollouts + '/%s/pause'
                            % rollout['id'], body={'reason': 'x'})
        self.assertEqual(400, resp.status_int)
        self.assertEqual(rs.RUNNING,
                         db_rollouts.get_rollout(self.ctx, rollout['id'])[
                             'status'])

    def test_policy(self):
        for method, suffix in (('GET', ''), ('POST', '')):
            resp = self.request(method, self.rollouts + suffix,
                                body=rollout_body() if method == 'POST'
                                else None, roles='member')
            self.assertEqual(403, resp.status_int)
        self.assertEqual([], db_rollouts.list_rollouts(self.ctx))


class TestAgentFilters(base.APITestCase):

    def setUp(self):
        super().setUp()
        self.ctx = context.get_admin_context()
        self.ids = sorted(uuidutils.generate_uuid() for _ in range(3))
        for number, instance_id in enumerate(self.ids):
            db_agents.register_agent(self.ctx, instance_id, {
                'guest_version': 'v1.0.%d' % number,
                'labels': {'group': 'g%d' % (number % 2),
                           'az': 'az%d' % number}})

    def ids_for(self, query):
        resp = self.request('GET', self.mgmt + '/agents' + query)
        self.assertEqual(200, resp.status_int, resp.text)
        return [a['instance_id'] for a in resp.json['agents']]

    def test_labels_and_group(self):
        self.assertEqual([self.ids[0], self.ids[2]], self.ids_for('?group=g0'))
        self.assertEqual([self.ids[2]],
                         self.ids_for('?labels=group:g0,az:az2'))
        self.assertEqual([], self.ids_for('?labels=group:g1,az:az2'))
        self.assertEqual([self.ids[1]],
                         self.ids_for('?group=g1&guest_version=v1.0.1'))
        resp = self.request('GET', self.mgmt + '/agents?labels=nocolon')
        self.assertEqual(400, resp.status_int)

    def test_health(self):
        self.flags(group='conductor', agent_down_time=60)
        with self.database.engine.begin() as connection:
            connection.exec_driver_sql(
                "UPDATE agents SET last_heartbeat_at = "
                "'2000-01-01 00:00:00' WHERE instance_id = '%s'"
                % self.ids[1])
        self.assertEqual([self.ids[1]],
                         self.ids_for('?health=unreachable'))
        self.assertEqual([self.ids[0], self.ids[2]],
                         self.ids_for('?health=reachable'))
        self.assertEqual([self.ids[0]],
                         self.ids_for('?health=reachable&limit=1'))
        self.assertEqual([self.ids[2]],
                         self.ids_for('?health=reachable&limit=1&marker=%s'
                                      % self.ids[0]))
        resp = self.request('GET', self.mgmt + '/agents?health=sick')
        self.assertEqual(400, resp.status_int)
