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

"""``2.0`` and ``2.0.0`` are one version in every view of the API.

The fleet, a desired version and a rollout, through the API in process on
SQLite, MariaDB and PostgreSQL: agents reporting either spelling count as
running the version whichever spelling the operator asked for.
"""

from oslo_utils import uuidutils

from trove_upgrade.common import context
from trove_upgrade.db import agents as db_agents
from trove_upgrade.tests.fixtures import database
from trove_upgrade.tests.fixtures import packages
from trove_upgrade.tests.unit.api import base


class _SameVersionTests:

    def setUp(self):
        super().setUp()
        ctx = context.get_admin_context()
        self.agents = {}
        for group in ('blue', 'green'):
            ids = sorted(uuidutils.generate_uuid() for _ in range(3))
            for instance_id, version in zip(ids, ('2.0', '2.0.0', '1.0')):
                db_agents.register_agent(ctx, instance_id, {
                    'guest_version': version, 'state': 'RUNNING',
                    'labels': {'group': group}})
            self.agents[group] = ids
        packages.create(ctx, 'trove-guestagent', '2.0.0')

    def post(self, path, body):
        resp = self.request('POST', self.mgmt + path, body)
        self.assertEqual(201, resp.status_int, resp.text)
        return resp.json

    def states(self, group, found):
        return [found[i] for i in self.agents[group]]

    def test_one_version_in_fleet_desired_version_and_rollout(self):
        desired = self.post('/desired-versions', {'desired_version': {
            'name': 'blue', 'package': 'trove-guestagent', 'version': '2.0',
            'selector': {'group': 'blue'}, 'canary': 0}})['desired_version']
        self.assertEqual(
            ['current', 'current', 'waiting'],
            self.states('blue', {a['instance_id']: a['state']
                                 for a in desired['agents']}))

        rollout = self.post('/rollouts', {'rollout': {
            'name': 'green', 'instance_version': 'v2.0', 'strategy': 'http',
            'location': 'https://repo.example/guest-2.0.0.pkg',
            'selector': {'group': 'green'}}})['rollout']
        self.assertEqual(
            ['current', 'current', 'waiting'],
            self.states('green', {a['instance_id']: a['state']
                                  for a in rollout['agents']}))
        self.assertEqual(2, rollout['counters']['current'])

        resp = self.request('GET', self.mgmt + '/packages/fleet')
        self.assertEqual(200, resp.status_int, resp.text)
        rows = {r['version']: r for r in resp.json['versions']}
        self.assertEqual(['1.0.0', '2.0.0'], sorted(rows))
        # Four agents run 2.0.0 under either name; the two behind are
        # the desired version's and the rollout's targets.
        self.assertEqual((4, 2, ['trove-guestagent']), (
            rows['2.0.0']['running'], rows['2.0.0']['targeted'],
            [p['name'] for p in rows['2.0.0']['packages']]))
        self.assertEqual(2, rows['1.0.0']['running'])


class TestSameVersionSQLite(_SameVersionTests, base.APITestCase):
    pass


class TestSameVersionMariaDB(_SameVersionTests, base.APITestCase):
    database_fixture = database.MariaDBDatabase


class TestSameVersionPostgreSQL(_SameVersionTests, base.APITestCase):
    database_fixture = database.PostgresqlDatabase
