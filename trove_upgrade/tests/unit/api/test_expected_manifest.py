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

"""Upgrades bound to their package's manifest: by request or registry.

The API and the rollout reconciler on a real SQLite file and the
in-memory transport: what is stored, what is cast, and the upgrade that
an agent API capped below 1.2 cannot carry ends FAILED with the reason.
"""

import datetime
from unittest import mock

from trove_upgrade.common import context
from trove_upgrade.common import states
from trove_upgrade.conductor import reconciler
from trove_upgrade.db import agents as db_agents
from trove_upgrade.db import packages as package_db
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.services import agent_rpcapi
from trove_upgrade.tests.unit.api import base

SHA = '3b1d' * 16
OTHER_SHA = 'aa55' * 16
EXPECTED = {'sha256': SHA, 'package': 'trove-guestagent'}


class TestExpectedManifest(base.APITestCase):

    def setUp(self):
        super().setUp()
        self.ctx = context.get_admin_context()
        db_agents.register_agent(self.ctx, base.INSTANCE_ID, {
            'guest_version': 'v1.0.0', 'labels': {'group': 'blue'}})
        self.casts = []
        real = agent_rpcapi.AgentAPI._cast_upgrade

        def record(api, ctxt, version_cap, keys, values):
            self.casts.append(dict(values))
            return real(api, ctxt, version_cap, keys, values)

        patcher = mock.patch.object(
            agent_rpcapi.AgentAPI, '_cast_upgrade', autospec=True,
            side_effect=record)
        patcher.start()
        self.addCleanup(patcher.stop)

    def register(self, manifest_sha256=SHA, version='1.1.0'):
        created = datetime.datetime(2026, 11, 28, 12, 0, 0)
        return package_db.create_package(self.ctx, {
            'name': 'trove-guestagent', 'version': version,
            'strategy': 'swift', 'location': 'pkgs/agent-%s.pkg' % version,
            'state': 'active', 'size': 1024, 'sha256': '9f2c' * 16,
            'signer_key_ids': ['5b0e6a2f4c1d8e93'],
            'manifest_created_at': created,
            'manifest_expires_at': created + datetime.timedelta(days=365),
            'manifest_sha256': manifest_sha256,
            'manifest_package': 'trove-guestagent'})

    def create(self, **body):
        return self.request('POST', self.mgmt + '/upgrades',
                            dict({'instance_id': base.INSTANCE_ID}, **body))

    def test_a_registered_package_binds_its_upgrades(self):
        self.register()
        resp = self.create(instance_version='1.1.0',
                           package='trove-guestagent')
        self.assertEqual(202, resp.status_int, resp.text)
        self.assertEqual(EXPECTED, resp.json['upgrade']['expected_manifest'])
        stored = db_upgrades.get_upgrade(self.ctx,
                                         resp.json['upgrade']['id'])
        self.assertEqual(EXPECTED, stored['expected_manifest'])
        self.assertEqual([EXPECTED],
                         [c['expected_manifest'] for c in self.casts])

    def test_a_package_registered_before_binds_nothing(self):
        self.register(manifest_sha256=None)
        resp = self.create(instance_version='1.1.0',
                           package='trove-guestagent')
        self.assertEqual(202, resp.status_int, resp.text)
        self.assertIsNone(resp.json['upgrade']['expected_manifest'])

    def test_the_request_binds_an_unregistered_package(self):
        resp = self.create(**base.upgrade_body(
            expected_manifest={'sha256': SHA}))
        self.assertEqual(202, resp.status_int, resp.text)
        self.assertEqual({'sha256': SHA, 'package': None},
                         resp.json['upgrade']['expected_manifest'])
        self.assertEqual({'sha256': SHA, 'package': None},
                         self.casts[0]['expected_manifest'])

    def test_another_manifest_than_the_registered_one_is_refused(self):
        self.register()
        resp = self.create(instance_version='1.1.0',
                           package='trove-guestagent',
                           expected_manifest={'sha256': OTHER_SHA})
        self.assertError(resp, 400, 'differs from that of the registered '
                                    'package trove-guestagent 1.1.0')
        self.assertNothingRecorded()

    def test_a_malformed_expectation_is_refused(self):
        for expected in ({'sha256': 'ABC'}, {'package': 'no spaces'},
                         {'sha256': SHA, 'size': 1}, 'sha'):
            resp = self.create(**base.upgrade_body(
                expected_manifest=expected))
            self.assertEqual(400, resp.status_int, resp.text)
        self.assertNothingRecorded()

    def test_a_cap_below_1_2_fails_the_bound_upgrade_with_the_reason(self):
        self.flags(group='upgrade_levels', agent='1.1')
        resp = self.create(**base.upgrade_body(expected_manifest=EXPECTED))
        self.assertError(resp, 503, 'ArgumentNeedsNewerVersionError')
        upgrade, = db_upgrades.list_upgrades(self.ctx)
        self.assertEqual(states.FAILED, upgrade['status'])
        self.assertIn('Could not be sent to the agent: '
                      'ArgumentNeedsNewerVersionError: Cannot send upgrade '
                      'with expected_manifest: the agent RPC API is capped '
                      'at 1.1',
                      upgrade['status_detail'])
        # Unbound upgrades still go under the cap.
        resp = self.create(**base.upgrade_body())
        self.assertEqual(202, resp.status_int, resp.text)

    def test_the_conductor_fails_a_rollout_upgrade_the_cap_cannot_carry(self):
        self.register()
        resp = self.request('POST', self.mgmt + '/rollouts', {'rollout': {
            'name': 'r', 'instance_version': '1.1.0',
            'package': 'trove-guestagent', 'canary': 0,
            'selector': {'group': 'blue'}}})
        self.assertEqual(201, resp.status_int, resp.text)
        self.assertEqual(EXPECTED, resp.json['rollout']['expected_manifest'])
        self.flags(group='upgrade_levels', agent='1.1')
        reconciler.Reconciler('host-a').run(self.ctx)
        upgrade, = db_upgrades.list_upgrades(self.ctx)
        self.assertEqual(EXPECTED, upgrade['expected_manifest'])
        self.assertEqual(states.FAILED, upgrade['status'])
        self.assertIn('ArgumentNeedsNewerVersionError: Cannot send upgrade '
                      'with expected_manifest', upgrade['status_detail'])
        self.assertIn('raise [upgrade_levels] agent',
                      upgrade['status_detail'])

    def test_a_desired_version_binds_its_upgrades(self):
        self.register()
        resp = self.request('POST', self.mgmt + '/desired-versions', {
            'desired_version': {
                'name': 'blue', 'package': 'trove-guestagent',
                'version': '1.1.0', 'selector': {'group': 'blue'},
                'canary': 0}})
        self.assertEqual(201, resp.status_int, resp.text)
        reconciler.Reconciler('host-a').run(self.ctx)
        upgrade, = db_upgrades.list_upgrades(self.ctx)
        self.assertEqual((states.SENT, EXPECTED),
                         (upgrade['status'], upgrade['expected_manifest']))
        self.assertEqual([EXPECTED],
                         [c['expected_manifest'] for c in self.casts])
