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

"""The API reference's samples are what the API really sends and accepts.

Every call of the API reference is made here against the real application;
each response, with its ids, request ids and times replaced by fixed
values, must equal the checked-in sample under ``api-ref/source/samples``.
The request samples are what the calls send. After changing the API,
regenerate the samples with::

    TROVE_UPGRADE_GENERATE_SAMPLES=1 python -m testtools.run \\
        trove_upgrade.tests.unit.api.test_api_samples
"""

import datetime
import json
import os
import re

import fixtures
from oslo_utils import timeutils

from trove_upgrade.common import context
from trove_upgrade.common import states
from trove_upgrade.db import agents as db_agents
from trove_upgrade.db import packages as package_db
from trove_upgrade.services import topology
from trove_upgrade.services import upgrades
from trove_upgrade.tests.unit.api import base

SAMPLES = os.path.join(os.path.dirname(__file__), '..', '..', '..', '..',
                       'api-ref', 'source', 'samples')
GENERATE = os.environ.get('TROVE_UPGRADE_GENERATE_SAMPLES') == '1'

PROJECT_ID = '8a2e4c6f0b1d4e3f9a7c5b3d1e0f2a4c'
USER_ID = 'c0f3e1d2b4a54f6e8d7c9b0a1f2e3d4c'
INSTANCES = ['5f1c8e2a-9b3d-4c7e-8a6f-0d2b4e6c8a10',
             '7a3d9c1e-2b4f-4e6a-9c8d-1f3e5a7c9b20',
             '9c5e1a3f-4d6b-4f8c-8e0a-2b4d6f8a0c30']
# What generated values become in the samples, in order of appearance.
UPGRADE_IDS = ['2d6e8f1a-3b5c-4d7e-9f0a-1b2c3d4e5f60',
               '4f8a0c2e-5d7f-4b9a-8c1d-3e5f7a9b1c70',
               '6b0c2e4a-7f9b-4d1c-9e3f-5a7b9c1d3e80',
               '8d2e4a6c-9b1d-4f3e-8a5b-7c9d1e3f5a90']
REQUEST_IDS = ['req-%s' % r for r in (
    'e5b7c9d1-2f4a-4c6e-8b0d-1a3c5e7f9b21',
    '3c5e7a9b-1d3f-4a5c-9e7b-0d2f4a6c8e32',
    '7f9b1d3e-5a7c-4e9f-8b1d-2c4e6a8b0d43',
    'a1c3e5f7-9b0d-4f2a-8c4e-6b8d0f2a4c54',
    'b2d4f6a8-0c1e-4a3b-9d5f-7c9e1a3b5d65',
    'c3e5a7b9-1d2f-4b4c-8e6a-8d0f2b4c6e76',
    'd4f6b8c0-2e3a-4c5d-9f7b-9e1a3c5d7f87',
    'e5a7c9d1-3f4b-4d6e-8a8c-0f2b4d6e8a98',
    'f6b8d0e2-4a5c-4e7f-9b9d-1a3c5e7f9ba9',
    '07c9e1f3-5b6d-4f8a-8cae-2b4d6f8a0cba',
    '18d0f2a4-6c7e-4a9b-9dbf-3c5e7a9b1dcb',
    '29e1a3b5-7d8f-4bac-8ec0-4d6f8a0c2edc')]
BASE_TIME = datetime.datetime(2026, 11, 29, 18, 0, 0)

_ID = re.compile(r'(req-)?[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-'
                 r'[0-9a-f]{12}')
_TIME = re.compile(r'\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z')


class _Normalizer:
    """Replace generated values by fixed ones.

    Ids and request ids keep their fixed value across the samples of a
    test; the times of one sample become whole seconds from BASE_TIME, in
    their order.
    """

    def __init__(self):
        self.ids = {}
        self.request_ids = {}

    def _fixed(self, match):
        value = match.group()
        if value in INSTANCES:
            return value
        seen, fixed = ((self.request_ids, REQUEST_IDS)
                       if value.startswith('req-') else
                       (self.ids, UPGRADE_IDS))
        if value not in seen:
            seen[value] = fixed[len(seen)]
        return seen[value]

    def __call__(self, text):
        text = _ID.sub(self._fixed, text)
        times = {value: (BASE_TIME + datetime.timedelta(seconds=number))
                 .isoformat() + '.000000Z'
                 for number, value in enumerate(sorted(set(
                     _TIME.findall(text))))}
        return _TIME.sub(lambda m: times[m.group()], text)


class TestAPISamples(base.APITestCase):

    def setUp(self):
        super().setUp()
        self.project_id = PROJECT_ID
        self.mgmt = '/v1.0/%s/mgmt' % PROJECT_ID
        self.normalize = _Normalizer()
        self.ctx = context.get_admin_context()

    def request(self, method, path, body=None, **kwargs):
        kwargs.setdefault('headers', {})['X-User-Id'] = USER_ID
        resp = super().request(method, path, body, **kwargs)
        resp.headers['X-User-Id'] = USER_ID
        return resp

    def _request_sample(self, name):
        with open(os.path.join(SAMPLES, name)) as f:
            return json.load(f)

    def assertSample(self, name, resp):
        text = self.normalize(json.dumps(resp.json, indent=4)) + '\n'
        path = os.path.join(SAMPLES, name)
        if GENERATE:
            with open(path, 'w') as f:
                f.write(text)
        with open(path) as f:
            self.assertEqual(f.read(), text,
                             '%s is stale: regenerate the samples (see %s)'
                             % (name, __name__))

    def _create(self, instance_id, version):
        body = dict(self._request_sample('upgrade-create-request.json'),
                    instance_id=instance_id, instance_version=version)
        resp = self.request('POST', self.mgmt + '/upgrades', body)
        self.assertEqual(202, resp.status_int, resp.text)
        return resp.json['upgrade']['id']

    def _run_as_agent(self, upgrade_id, instance_id):
        upgrades.claim_upgrade(self.ctx, instance_id, upgrade_id, 'v1.0.0')
        for state in (states.VERIFYING, states.INSTALLING,
                      states.RESTARTING, states.SUCCESS):
            upgrades.record_report(self.ctx, instance_id, upgrade_id, state,
                                   None, 'v1.0.0', 'v1.0.1')

    def test_versions(self):
        self.assertSample('versions-response.json',
                          self.request('GET', '/', identity=False))
        self.assertSample('version-response.json',
                          self.request('GET', '/v1.0', identity=False))

    def test_upgrades(self):
        resp = self.request('POST', self.mgmt + '/upgrades',
                            self._request_sample(
                                'upgrade-create-request.json'))
        self.assertEqual(202, resp.status_int, resp.text)
        self.assertSample('upgrade-create-response.json', resp)
        first = resp.json['upgrade']['id']
        self._run_as_agent(first, INSTANCES[0])
        self.assertSample('upgrade-show-response.json', self.request(
            'GET', self.mgmt + '/upgrades/' + first))

        self._create(INSTANCES[1], 'v1.0.1')
        third = self._create(INSTANCES[2], 'v1.0.1')
        self.assertSample('upgrade-cancel-response.json', self.request(
            'DELETE', self.mgmt + '/upgrades/' + third))
        self.assertSample('upgrades-list-response.json', self.request(
            'GET', self.mgmt + '/upgrades?instance_version=v1.0.1&limit=2'))

    def test_agents(self):
        now = timeutils.utcnow()
        for number, instance_id in enumerate(INSTANCES[:2]):
            timeutils.set_time_override(
                now - datetime.timedelta(seconds=30 * number))
            self.addCleanup(timeutils.clear_time_override)
            db_agents.register_agent(self.ctx, instance_id, {
                'agent_version': '1.0.1',
                'guest_version': 'v1.0.1',
                'rpc_api_version': '1.0',
                'state': 'RUNNING',
                'labels': {'group': 'canary', 'datastore': 'mysql'},
                'host': 'trove-guest-%d' % number,
            })
        timeutils.clear_time_override()
        self.assertSample('agents-list-response.json', self.request(
            'GET', self.mgmt + '/agents?state=RUNNING'))
        self.assertSample('agent-show-response.json', self.request(
            'GET', self.mgmt + '/agents/' + INSTANCES[0]))

    def test_error(self):
        body = dict(self._request_sample('upgrade-create-request.json'),
                    strategy='ftp')
        resp = self.request('POST', self.mgmt + '/upgrades', body)
        self.assertEqual(400, resp.status_int)
        self.assertSample('error-response.json', resp)

    def test_rollouts(self):
        # Trove's database records the last two instances as a replication
        # set: the third the primary, the second its replica.
        self.useFixture(fixtures.MockPatch(
            'trove_upgrade.services.topology.read',
            return_value=topology.Topology(
                [(INSTANCES[1], INSTANCES[2], None)])))
        for number, instance_id in enumerate(INSTANCES):
            db_agents.register_agent(self.ctx, instance_id, {
                'agent_version': '1.0.1',
                'guest_version': 'v1.0.1' if number else 'v1.1.0',
                'rpc_api_version': '1.0', 'state': 'RUNNING',
                'labels': {'group': 'blue', 'datastore': 'mysql'},
                'host': 'trove-guest-%d' % number})
        resp = self.request('POST', self.mgmt + '/rollouts',
                            self._request_sample(
                                'rollout-create-request.json'))
        self.assertEqual(201, resp.status_int, resp.text)
        self.assertSample('rollout-create-response.json', resp)
        rollout_id = resp.json['rollout']['id']
        url = self.mgmt + '/rollouts/' + rollout_id
        self.assertSample('rollout-pause-response.json',
                          self.request('POST', url + '/pause'))
        self.assertSample('rollout-show-response.json',
                          self.request('GET', url))
        self.assertSample('rollouts-list-response.json', self.request(
            'GET', self.mgmt + '/rollouts?status=PAUSED'))

    def _register(self, version, state='active'):
        """A package as registration records it (verification aside)."""
        created = datetime.datetime(2026, 11, 28, 12, 0, 0)
        return package_db.create_package(self.ctx, {
            'name': 'trove-guestagent', 'version': version,
            'strategy': 'swift',
            'location': 'guest-packages/trove-guestagent-%s.pkg' % version,
            'state': state, 'size': 18432031, 'sha256': '9f2c' * 16,
            'min_upgrade_from': '1.0.0',
            'signer_key_ids': ['5b0e6a2f4c1d8e93'],
            'manifest_created_at': created,
            'manifest_expires_at': created + datetime.timedelta(days=365),
            'manifest_sha256': '3b1d8f0e' * 8,
            'manifest_package': 'trove-guestagent'})

    def test_packages(self):
        self._request_sample('package-create-request.json')
        package = self._register('1.1.0')
        self._register('1.0.1', state='deprecated')
        self.assertSample('package-show-response.json', self.request(
            'GET', self.mgmt + '/packages/' + package['id']))
        self.assertSample('packages-list-response.json', self.request(
            'GET', self.mgmt + '/packages?version=%3E%3D1.0'))
        for number, instance_id in enumerate(INSTANCES):
            db_agents.register_agent(self.ctx, instance_id, {
                'guest_version': 'v1.0.1' if number else '1.1.0',
                'labels': {'group': 'blue'}})
        resp = self.request('POST', self.mgmt + '/desired-versions',
                            self._request_sample(
                                'desired-version-create-request.json'))
        self.assertEqual(201, resp.status_int, resp.text)
        self.assertSample('desired-version-create-response.json', resp)
        self.assertSample('targets-list-response.json', self.request(
            'GET', self.mgmt + '/targets'))
        self.assertSample('packages-fleet-response.json', self.request(
            'GET', self.mgmt + '/packages/fleet'))
