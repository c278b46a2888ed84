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

"""/mgmt/desired-versions, /mgmt/targets and /mgmt/packages/fleet."""

from oslo_utils import uuidutils

from trove_upgrade.common import context
from trove_upgrade.common import rpc_interface
from trove_upgrade.common import states
from trove_upgrade.db import agents as db_agents
from trove_upgrade.db import transitions as db_transitions
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.tests.fixtures import packages
from trove_upgrade.tests.unit.api import base


def _package(ctx, version, state='active', floor=None):
    return packages.create(ctx, 'trove-guestagent', version, state=state,
                           min_upgrade_from=floor)


class TestDesiredVersions(base.APITestCase):

    def setUp(self):
        super().setUp()
        self.ctx = context.get_admin_context()
        self.blue = sorted(uuidutils.generate_uuid() for _ in range(3))
        self.green = sorted(uuidutils.generate_uuid() for _ in range(2))
        for group, ids in (('blue', self.blue), ('green', self.green)):
            for instance_id in ids:
                db_agents.register_agent(self.ctx, instance_id, {
                    'guest_version': '1.0.0',
                    'labels': {'group': group, 'tier': 'db'}})
        db_agents.register_agent(self.ctx, self.blue[0],
                                 {'guest_version': '3.0.0'})
        self.p2 = _package(self.ctx, '2.0.0', floor='0.9')
        _package(self.ctx, '2.1.0')
        _package(self.ctx, '1.5.0', state='retired')
        self.url = self.mgmt + '/desired-versions'

    def create(self, expected=201, **overrides):
        body = {'name': 'blue', 'package': 'trove-guestagent',
                'version': '2.0.0', 'selector': {'group': 'blue'}}
        body.update(overrides)
        resp = self.request('POST', self.url, {'desired_version': body})
        self.assertEqual(expected, resp.status_int, resp.text)
        return resp.json

    def test_create_shows_agents_events_and_who(self):
        desired = self.create(canary=0, max_in_flight='50%')[
            'desired_version']
        self.assertEqual(('ACTIVE', '2.0.0', 0, '50%', 1),
                         (desired['status'], desired['version'],
                          desired['canary'], desired['max_in_flight'],
                          desired['per_agent_retries']))
        # The agent already past the version is ahead, not downgraded.
        self.assertEqual(
            [{'instance_id': i,
              'state': 'ahead' if i == self.blue[0] else 'waiting'}
             for i in self.blue], desired['agents'])
        self.assertEqual(1, desired['counters']['ahead'])
        event, = desired['events']
        self.assertEqual(('created', 'operator', 'api'),
                         (event['action'], event['user_id'],
                          event['source']))

    def test_refusals(self):
        self.create(expected=400, version='9.9.9')
        resp = self.create(expected=409, version='1.5.0')
        self.assertIn('is retired', resp['errors'][0]['detail'])
        self.create(expected=400, selector={})
        first = self.create()['desired_version']
        resp = self.create(expected=409, name='tier',
                           selector={'labels': {'tier': 'db'}})
        self.assertIn('Desired version %s (blue) already selects 3'
                      % first['id'], resp['errors'][0]['detail'])

    def test_availability_zone_narrows_any_selection(self):
        zone = rpc_interface.AVAILABILITY_ZONE_LABEL
        for instance_id in (self.blue[2], self.green[0]):
            db_agents.register_agent(self.ctx, instance_id, {'labels': {
                'group': 'blue' if instance_id in self.blue else 'green',
                'tier': 'db', zone: 'az-2'}})
        desired = self.create(selector={
            'instance_ids': [self.blue[1], self.blue[2]],
            'availability_zone': 'az-2'})['desired_version']
        self.assertEqual({'instance_ids': [self.blue[1], self.blue[2]],
                          'availability_zone': 'az-2'}, desired['selector'])
        self.assertEqual([self.blue[2]],
                         [a['instance_id'] for a in desired['agents']])
        desired = self.create(name='green-az-2', selector={
            'group': 'green', 'availability_zone': 'az-2'})[
            'desired_version']
        self.assertEqual([self.green[0]],
                         [a['instance_id'] for a in desired['agents']])

    def test_change_pause_resume_are_recorded(self):
        desired = self.create()['desired_version']
        href = desired['links'][0]['href']
        resp = self.request('PATCH', href, {'desired_version': {
            'version': '2.1.0', 'max_failures': 2}})
        self.assertEqual(200, resp.status_int, resp.text)
        self.assertEqual(('2.1.0', 2), (resp.json['desired_version'][
            'version'], resp.json['desired_version']['max_failures']))
        resp = self.request('PATCH', href, {'desired_version': {
            'version': '1.5.0'}})
        self.assertEqual(409, resp.status_int, resp.text)
        self.assertEqual(200, self.request('POST', href + '/pause')
                         .status_int)
        self.assertEqual(409, self.request('POST', href + '/pause')
                         .status_int)
        resp = self.request('POST', href + '/resume')
        self.assertEqual('ACTIVE', resp.json['desired_version']['status'])
        self.assertEqual(
            [('created', None), ('changed', 'version 2.0.0 -> 2.1.0; '
                                            'max_failures=2'),
             ('paused', 'Paused by an operator.'),
             ('resumed', '0 failure(s) acknowledged')],
            [(e['action'], e['detail'] if e['action'] != 'created'
              else None)
             for e in resp.json['desired_version']['events']])

    def test_targets_precedence_and_removal_of_an_owner(self):
        # Two desired versions that both select a late agent: the older
        # one owns it; deleting it hands the agent to the other.
        blue = self.create()['desired_version']
        green = self.create(name='green', version='2.1.0',
                            selector={'labels': {'also': 'green'}})[
            'desired_version']
        self.assertEqual([], green['agents'])
        late = uuidutils.generate_uuid()
        db_agents.register_agent(self.ctx, late, {
            'guest_version': '1.0.0',
            'labels': {'group': 'blue', 'also': 'green'}})
        targets = self.request('GET', self.mgmt + '/targets').json[
            'targets']
        self.assertEqual(sorted(self.blue + [late]),
                         [t['instance_id'] for t in targets])
        mine = {t['instance_id']: t for t in targets}
        self.assertEqual(('desired_version', blue['id'], '2.0.0',
                          [green['id']]),
                         (mine[late]['owner']['kind'],
                          mine[late]['owner']['id'], mine[late]['version'],
                          [o['id'] for o in mine[late]['shadowed']]))
        self.assertIn('the oldest desired version', mine[late]['reason'])
        self.assertEqual([], self.request(
            'GET', green['links'][0]['href']).json['desired_version'][
                'agents'])
        # A rollout over a blue agent takes precedence.
        resp = self.request('POST', self.mgmt + '/rollouts', {'rollout': {
            'name': 'hotfix', 'instance_version': '2.1.0',
            'package': 'trove-guestagent',
            'selector': {'instance_ids': [self.blue[1]]}}})
        self.assertEqual(201, resp.status_int, resp.text)
        rollout = resp.json['rollout']
        resp = self.request('GET', self.mgmt + '/targets?instance_id='
                            + self.blue[1])
        target, = resp.json['targets']
        self.assertEqual(('rollout', rollout['id'], '2.1.0', [blue['id']]),
                         (target['owner']['kind'], target['owner']['id'],
                          target['version'],
                          [o['id'] for o in target['shadowed']]))
        self.assertIn('active rollouts take precedence', target['reason'])
        self.assertNotIn(self.blue[1], [a['instance_id'] for a in self.request(
            'GET', blue['links'][0]['href']).json['desired_version'][
                'agents']])
        # Removing the blue owner removes only its own targets: the
        # rollout keeps its instance and the late agent goes to green.
        self.assertEqual(204, self.request(
            'DELETE', blue['links'][0]['href']).status_int)
        mine = {t['instance_id']: t for t in self.request(
            'GET', self.mgmt + '/targets').json['targets']}
        self.assertEqual(sorted([self.blue[1], late]), sorted(mine))
        self.assertEqual('rollout', mine[self.blue[1]]['owner']['kind'])
        self.assertEqual((green['id'], []),
                         (mine[late]['owner']['id'], mine[late]['shadowed']))

    def test_fleet_histogram(self):
        self.create(canary=0)
        upgrade = db_upgrades.create_upgrade(self.ctx, {
            'instance_id': self.green[0], 'instance_version': '2.1.0',
            'strategy': 'http', 'location': 'https://repo.example/x.pkg'})
        db_transitions.transition_upgrade(self.ctx, upgrade['id'],
                                          states.FAILED, 'agent',
                                          detail='broken')
        resp = self.request('GET', self.mgmt + '/packages/fleet')
        self.assertEqual(200, resp.status_int, resp.text)
        rows = {r['version']: r for r in resp.json['versions']}
        self.assertEqual(['1.0.0', '1.5.0', '2.0.0', '2.1.0', '3.0.0'],
                         [r['version'] for r in resp.json['versions']])
        self.assertEqual(
            {'1.0.0': (4, 0, 0), '1.5.0': (0, 0, 0), '2.0.0': (0, 2, 0),
             '2.1.0': (0, 0, 1), '3.0.0': (1, 0, 0)},
            {v: (r['running'], r['targeted'], r['failed'])
             for v, r in rows.items()})
        self.assertEqual(['retired'],
                         [p['state'] for p in rows['1.5.0']['packages']])

    def test_targets_pages_by_instance(self):
        self.create()
        self.create(name='green', selector={'group': 'green'})
        everyone = sorted(self.blue + self.green)
        resp = self.request('GET', self.mgmt + '/targets?limit=2')
        self.assertEqual(200, resp.status_int, resp.text)
        self.assertEqual(everyone[:2], [t['instance_id']
                                        for t in resp.json['targets']])
        seen, page = [], resp.json
        while page.get('links'):
            seen.extend(t['instance_id'] for t in page['targets'])
            href = page['links'][0]['href']
            self.assertIn('limit=2', href)
            page = self.request('GET', href).json
        seen.extend(t['instance_id'] for t in page['targets'])
        self.assertEqual(everyone, seen)
        last = self.request(
            'GET', self.mgmt + '/targets?marker=' + everyone[-1]).json
        self.assertEqual(([], None), (last['targets'], last.get('links')))
        # The running version is each page's own agents'.
        target, = self.request('GET', self.mgmt + '/targets?limit=1&marker='
                               + self.blue[0]).json['targets']
        self.assertEqual(
            (everyone[everyone.index(self.blue[0]) + 1], '1.0.0'),
            (target['instance_id'], target['running_version']))
        target, = self.request('GET', self.mgmt + '/targets?instance_id='
                               + self.blue[0] + '&limit=1').json['targets']
        self.assertEqual('3.0.0', target['running_version'])

    def test_fleet_pages_by_version(self):
        self.create(canary=0)
        first = self.request('GET', self.mgmt + '/packages/fleet?limit=2')
        self.assertEqual(200, first.status_int, first.text)
        self.assertEqual(['1.0.0', '1.5.0'],
                         [r['version'] for r in first.json['versions']])
        second = self.request('GET', first.json['links'][0]['href']).json
        self.assertEqual(['2.0.0', '2.1.0'],
                         [r['version'] for r in second['versions']])
        # The marker is compared as a version: v2.1 is 2.1.0.
        rest = self.request('GET', self.mgmt + '/packages/fleet?marker=v2.1')
        self.assertEqual((['3.0.0'], None),
                         ([r['version'] for r in rest.json['versions']],
                          rest.json.get('links')))

    def test_bad_limit_and_marker_are_400(self):
        for path in ('/targets?limit=0', '/targets?limit=x',
                     '/targets?marker=not-a-uuid',
                     '/targets?marker=' + uuidutils.generate_uuid(),
                     '/packages/fleet?limit=-1',
                     '/packages/fleet?marker=9.9.9',
                     '/packages/fleet?marker=1.0.0&marker=2.0.0'):
            resp = self.request('GET', self.mgmt + path)
            self.assertEqual(400, resp.status_int, path)
            error, = resp.json['errors']
            self.assertEqual(400, error['status'], path)
        self.assertIn('Marker 9.9.9 could not be found', self.request(
            'GET', self.mgmt + '/packages/fleet?marker=9.9.9').json[
                'errors'][0]['detail'])
