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

"""The package registry on real packages, a real HTTP server and real DBs.

Packages are built and signed with the real ``trove-upgrade-package``
command, served over HTTP on loopback and registered through the API
application in process, on MariaDB and on PostgreSQL: the control plane
fetches each manifest with the agents' ``http`` strategy and verifies it.
"""

import dataclasses
import datetime
import hashlib
import os
import shutil
import tempfile
import time

import fixtures
from oslo_serialization import jsonutils
from oslo_utils import uuidutils
import webob

from tools.testbed import sample_guest
from trove_upgrade.api import deploy
from trove_upgrade.common import context
from trove_upgrade.common import states
from trove_upgrade.db import agents as db_agents
from trove_upgrade.db import common
from trove_upgrade.db import migration
from trove_upgrade.db import transitions as db_transitions
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.package_format import manifest as manifest_mod
from trove_upgrade.tests import base
from trove_upgrade.tests.fixtures import database
from trove_upgrade.tests.fixtures import rpc as rpc_fixture
from trove_upgrade.tests.functional.agent import harness
from trove_upgrade.tests.functional import https_server
from trove_upgrade.tests.functional import servers


def _build(workdir, version, signing_keys, name=None, extra=()):
    wheel = sample_guest.build_wheel(
        os.path.join(workdir, 'wheels', version), version)
    path = os.path.join(workdir, 'repo', name or 'guest-%s.pkg' % version)
    args = ['build', wheel, '--version', version, '--output', path,
            '--encryption-key', os.path.join(workdir, 'enc.key')]
    for key in signing_keys:
        args += ['--signing-key', key]
    harness.package_tool(*(args + list(extra)))
    return path


class _RegistryTests:
    """Registration, queries, deploy by reference and deletion."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.workdir = tempfile.mkdtemp(prefix='registry-test-')
        os.makedirs(os.path.join(cls.workdir, 'repo'))
        cls.trusted = os.path.join(cls.workdir, 'sign.key')
        cls.untrusted = os.path.join(cls.workdir, 'other.key')
        harness.package_tool(
            'keygen', '--signing-key', cls.trusted, '--encryption-key',
            os.path.join(cls.workdir, 'enc.key'))
        harness.package_tool('keygen', '--signing-key', cls.untrusted)
        # One that expires seconds from now, built first: the test that
        # registers it waits until it expired.
        cls.expires = (datetime.datetime.now(datetime.timezone.utc)
                       + datetime.timedelta(seconds=10))
        _build(cls.workdir, '23.0.0', [cls.trusted], name='expired.pkg',
               extra=('--expires',
                      cls.expires.strftime('%Y-%m-%dT%H:%M:%SZ')))
        for version in ('24.0.0', '25.1.0', '26.0.0', '26.1.0'):
            extra = (('--min-upgrade-from', '25.0') if version == '26.1.0'
                     else ())
            _build(cls.workdir, version, [cls.trusted], extra=extra)
        _build(cls.workdir, '27.0.0', [cls.untrusted], name='untrusted.pkg')
        repo = os.path.join(cls.workdir, 'repo')
        # A manifest whose signed part was changed after signing.
        with open(os.path.join(repo, 'guest-26.0.0.pkg.manifest'),
                  'rb') as f:
            good = f.read()
        shutil.copy(os.path.join(repo, 'guest-26.0.0.pkg'),
                    os.path.join(repo, 'tampered.pkg'))
        parsed = manifest_mod.Manifest.from_bytes(good)
        tampered = parsed.to_bytes().replace(
            parsed.payload.sha256.encode(), b'0' * 64)
        with open(os.path.join(repo, 'tampered.pkg.manifest'), 'wb') as f:
            f.write(tampered)
        # The same manifest with every signature removed.
        with open(os.path.join(repo, 'unsigned.pkg.manifest'), 'wb') as f:
            f.write(manifest_mod.Manifest.to_bytes(
                _without_signatures(parsed)))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.workdir, ignore_errors=True)
        super().tearDownClass()

    def setUp(self):
        super().setUp()
        self.useFixture(rpc_fixture.FakeTransport())
        self.server = self.useFixture(https_server.HttpsFileServer(
            os.path.join(self.workdir, 'repo'), tls=False))
        strategy_dir = self.useFixture(fixtures.TempDir()).path
        servers.write_strategy_conf(strategy_dir, 'http',
                                    {'allow_insecure_http': True})
        self.conf([], default_config_files=[], default_config_dirs=[])
        self.flags(group='api', auth_strategy='noauth2')
        self.flags(group='packages', strategy_config_dir=strategy_dir,
                   trusted_key_files=[self.trusted + '.pub'],
                   fetch_retries=0)
        self.project_id = uuidutils.generate_uuid(dashed=False)
        self.mgmt = '/v1.0/%s/mgmt' % self.project_id
        self.app = deploy.loadapp(self.conf)
        self.ctx = context.get_admin_context()

    def request(self, method, path, body=None):
        req = webob.Request.blank(path, method=method)
        req.headers.update({'X-User-Id': 'operator',
                            'X-Project-Id': self.project_id,
                            'X-Roles': 'admin'})
        if body is not None:
            req.body = jsonutils.dump_as_bytes(body)
            req.headers['Content-Type'] = 'application/json'
        return req.get_response(self.app)

    def publish(self, version, name='guest-%s.pkg', expected=201,
                package='trove-guestagent'):
        resp = self.request('POST', self.mgmt + '/packages', {'package': {
            'name': package, 'version': version, 'strategy': 'http',
            'location': self.server.url(name % version if '%' in name
                                        else name)}})
        self.assertEqual(expected, resp.status_int, resp.text)
        return resp.json

    def refused(self, version, name, reason, status=400):
        body = self.publish(version, name, expected=status)
        self.assertIn(reason, body['errors'][0]['detail'])
        return body['errors'][0]['detail']

    def test_publish_records_the_manifest_facts(self):
        package = self.publish('26.1.0')['package']
        with open(os.path.join(self.workdir, 'repo',
                               'guest-26.1.0.pkg.manifest'), 'rb') as f:
            manifest_bytes = f.read()
        manifest = manifest_mod.Manifest.from_bytes(manifest_bytes)
        # The manifest file verified: what every upgrade to it expects.
        self.assertEqual(
            (hashlib.sha256(manifest_bytes).hexdigest(), manifest.package),
            (package['manifest_sha256'], package['manifest_package']))
        self.assertEqual(
            ('trove-guestagent', '26.1.0', 'active', manifest.payload.size,
             manifest.payload.sha256, '25.0',
             [s.key_id for s in manifest.signatures]),
            (package['name'], package['version'], package['state'],
             package['size'], package['sha256'],
             package['min_upgrade_from'], package['signer_key_ids']))
        shown = self.request('GET', package['links'][0]['href']).json
        self.assertEqual(package['id'], shown['package']['id'])
        self.assertEqual([], shown['package']['used_by'])
        # Only the manifest was fetched, never the payload.
        self.assertEqual(['guest-26.1.0.pkg.manifest'],
                         [r[1] for r in self.server.requests])
        self.refused('26.1.0', 'guest-%s.pkg', 'registered already', 409)

    def test_bad_packages_are_refused_with_the_reason(self):
        self.refused('26.0.0', 'tampered.pkg', 'BadSignatureError')
        self.refused('26.0.0', 'unsigned.pkg', 'UnknownSigningKeyError')
        self.refused('27.0.0', 'untrusted.pkg', 'no signature by a trusted')
        self.refused('26.0.1', 'guest-26.0.0.pkg', 'WrongVersionError')
        self.refused('26.0.0', 'missing.pkg',
                     'its manifest could not be fetched: ObjectNotFoundError')
        while datetime.datetime.now(datetime.timezone.utc) <= self.expires:
            time.sleep(0.2)
        self.refused('23.0.0', 'expired.pkg', 'ExpiredManifestError')
        self.assertEqual([], self.request(
            'GET', self.mgmt + '/packages').json['packages'])

    def test_unreachable_server_is_refused(self):
        resp = self.request('POST', self.mgmt + '/packages', {'package': {
            'name': 'trove-guestagent', 'version': '26.0.0',
            'strategy': 'http', 'location': 'http://127.0.0.1:%d/x.pkg'
                                            % servers.free_port()}})
        self.assertEqual(400, resp.status_int, resp.text)
        self.assertIn('could not be fetched: DownloadError',
                      resp.json['errors'][0]['detail'])
        self.assertIn('Connection refused', resp.json['errors'][0]['detail'])

    def versions(self, query):
        resp = self.request('GET', self.mgmt + '/packages?' + query)
        self.assertEqual(200, resp.status_int, resp.text)
        return [p['version'] for p in resp.json['packages']]

    def test_queries(self):
        for version in ('24.0.0', '25.1.0', '26.0.0', '26.1.0'):
            self.publish(version)
        self.assertEqual(['26.0.0'], self.versions('version=26.0.0'))
        self.assertEqual(['26.0.0'], self.versions('version=v26.0'))
        self.assertEqual(['26.0.0', '26.1.0'], self.versions('version=26.*'))
        self.assertEqual(['25.1.0', '26.0.0', '26.1.0'],
                         self.versions('version=%3E%3D25.1'))
        self.assertEqual(['25.1.0', '26.0.0'],
                         self.versions('version=%3E%3D25,%3C26.1'))
        self.assertEqual([], self.versions('version=27.*'))
        self.assertEqual(4, len(self.versions('name=trove-guestagent')))
        self.assertEqual([], self.versions('name=other'))
        resp = self.request('GET', self.mgmt + '/packages?version=%3E%3Dx')
        self.assertEqual(400, resp.status_int, resp.text)

    def test_deploy_by_reference_and_deletion_in_use(self):
        package = self.publish('26.1.0')['package']
        instance = uuidutils.generate_uuid()
        old = uuidutils.generate_uuid()
        db_agents.register_agent(self.ctx, instance, {
            'guest_version': '25.1.0', 'labels': {'group': 'blue'}})
        db_agents.register_agent(self.ctx, old, {
            'guest_version': '24.0.0', 'labels': {'group': 'red'}})
        upgrades = self.mgmt + '/upgrades'
        resp = self.request('POST', upgrades, {
            'instance_id': instance, 'instance_version': '26.1.0',
            'package': 'trove-guestagent'})
        self.assertEqual(202, resp.status_int, resp.text)
        upgrade = resp.json['upgrade']
        self.assertEqual(('http', package['location']),
                         (upgrade['strategy'], upgrade['location']))
        self.assertEqual({'sha256': package['manifest_sha256'],
                          'package': package['manifest_package']},
                         upgrade['expected_manifest'])
        for body, status, reason in (
                ({'instance_id': instance, 'instance_version': '26.2.0',
                  'package': 'trove-guestagent'}, 400,
                 'no such package is registered'),
                ({'instance_id': old, 'instance_version': '26.1.0',
                  'package': 'trove-guestagent'}, 409,
                 'installs only over 25.0 or later'),
                ({'instance_id': instance, 'instance_version': '26.1.0',
                  'package': 'trove-guestagent', 'strategy': 'http'}, 400,
                 'do not also give strategy')):
            resp = self.request('POST', upgrades, body)
            self.assertEqual(status, resp.status_int, resp.text)
            self.assertIn(reason, resp.json['errors'][0]['detail'])
        # The upgrade in flight holds the package.
        href = package['links'][0]['href']
        resp = self.request('DELETE', href)
        self.assertEqual(409, resp.status_int, resp.text)
        self.assertIn('1 upgrade(s) in flight (%s)' % upgrade['id'],
                      resp.json['errors'][0]['detail'])
        db_transitions.transition_upgrade(self.ctx, upgrade['id'],
                                          states.CANCELLED, 'api')
        # A rollout by reference holds it too; one below the floor is
        # refused before anything is recorded.
        rollouts = self.mgmt + '/rollouts'
        resp = self.request('POST', rollouts, {'rollout': {
            'name': 'red', 'instance_version': '26.1.0',
            'package': 'trove-guestagent', 'selector': {'group': 'red'}}})
        self.assertEqual(409, resp.status_int, resp.text)
        self.assertIn(old, resp.json['errors'][0]['detail'])
        resp = self.request('POST', rollouts, {'rollout': {
            'name': 'blue', 'instance_version': '26.1.0',
            'package': 'trove-guestagent', 'selector': {'group': 'blue'}}})
        self.assertEqual(201, resp.status_int, resp.text)
        rollout = resp.json['rollout']
        self.assertEqual(package['location'], rollout['location'])
        resp = self.request('DELETE', href)
        self.assertEqual(409, resp.status_int, resp.text)
        self.assertIn('active rollout(s) %s (blue)' % rollout['id'],
                      resp.json['errors'][0]['detail'])
        self.request('POST', rollout['links'][0]['href'] + '/abort')
        # Retired: shown, not deployable.
        resp = self.request('PATCH', href,
                            {'package': {'state': 'retired'}})
        self.assertEqual('retired', resp.json['package']['state'])
        resp = self.request('POST', upgrades, {
            'instance_id': instance, 'instance_version': '26.1.0',
            'package': 'trove-guestagent'})
        self.assertEqual(409, resp.status_int, resp.text)
        self.assertIn('is retired', resp.json['errors'][0]['detail'])
        # An instance running the version holds it.
        db_agents.register_agent(self.ctx, instance, {'guest_version': '26.1'})
        resp = self.request('DELETE', href)
        self.assertEqual(409, resp.status_int, resp.text)
        self.assertIn('1 instance(s) running version 26.1.0 (%s)' % instance,
                      resp.json['errors'][0]['detail'])
        db_agents.register_agent(self.ctx, instance, {'guest_version': '26.2'})
        self.assertEqual(204, self.request('DELETE', href).status_int)
        self.assertEqual(404, self.request('GET', href).status_int)

    def test_desired_version_holds_its_package(self):
        package = self.publish('26.0.0')['package']
        resp = self.request('POST', self.mgmt + '/desired-versions', {
            'desired_version': {
                'name': 'all blue', 'package': 'trove-guestagent',
                'version': '26.0.0', 'selector': {'group': 'blue'}}})
        self.assertEqual(201, resp.status_int, resp.text)
        desired = resp.json['desired_version']
        resp = self.request('DELETE', package['links'][0]['href'])
        self.assertEqual(409, resp.status_int, resp.text)
        self.assertIn('desired version(s) %s (all blue)' % desired['id'],
                      resp.json['errors'][0]['detail'])

    def pages(self, path, key, limit):
        """Every row of a list, following its next links."""
        rows, href = [], self.mgmt + path + '?limit=%d' % limit
        while href:
            resp = self.request('GET', href)
            self.assertEqual(200, resp.status_int, resp.text)
            self.assertLessEqual(len(resp.json[key]), limit)
            rows.extend(resp.json[key])
            href = next((link['href'] for link in resp.json.get('links', ())
                         if link['rel'] == 'next'), None)
        return rows

    def test_fleet_and_targets_page(self):
        self.publish('25.1.0')
        self.publish('26.0.0')
        blue = sorted(uuidutils.generate_uuid() for _ in range(5))
        for number, instance_id in enumerate(blue):
            db_agents.register_agent(self.ctx, instance_id, {
                'guest_version': '26.0' if number == 4 else '25.1.0',
                'labels': {'group': 'blue'}})
        other = uuidutils.generate_uuid()
        db_agents.register_agent(self.ctx, other, {
            'guest_version': '24.0.0', 'labels': {'group': 'red'}})
        resp = self.request('POST', self.mgmt + '/desired-versions', {
            'desired_version': {
                'name': 'blue', 'package': 'trove-guestagent',
                'version': '26.0.0', 'selector': {'group': 'blue'}}})
        self.assertEqual(201, resp.status_int, resp.text)
        # Newest upgrades: blue[0] in flight after an older failure,
        # blue[1] failed, blue[4] failed but runs the version: neither.
        for instance_id, final in ((blue[0], states.FAILED),
                                   (blue[0], None),
                                   (blue[1], states.FAILED),
                                   (blue[4], states.FAILED)):
            upgrade = db_upgrades.create_upgrade(self.ctx, {
                'instance_id': instance_id, 'instance_version': '26.0.0',
                'strategy': 'http', 'location': 'https://repo/x.pkg'})
            if final:
                db_transitions.transition_upgrade(self.ctx, upgrade['id'],
                                                  final, 'agent')
        self.assertEqual(blue, [t['instance_id'] for t in self.pages(
            '/targets', 'targets', 2)])
        fleet = self.pages('/packages/fleet', 'versions', 1)
        self.assertEqual(
            [('24.0.0', 1, 0, 0, 0), ('25.1.0', 4, 0, 0, 0),
             ('26.0.0', 1, 4, 1, 1)],
            [(r['version'], r['running'], r['targeted'], r['in_flight'],
              r['failed']) for r in fleet])
        self.assertEqual(fleet, self.request(
            'GET', self.mgmt + '/packages/fleet').json['versions'])
        # Another agent's id is a marker; an id no agent has is not.
        resp = self.request('GET', self.mgmt + '/targets?marker=' + other)
        self.assertEqual([i for i in blue if i > other],
                         [t['instance_id'] for t in resp.json['targets']])
        unknown = uuidutils.generate_uuid()
        resp = self.request('GET', self.mgmt + '/targets?marker=' + unknown)
        self.assertEqual(400, resp.status_int, resp.text)
        self.assertIn('Marker %s could not be found' % unknown,
                      resp.json['errors'][0]['detail'])


def _without_signatures(manifest):
    return dataclasses.replace(manifest, signatures=())


class _Opportunistic(database.OpportunisticDBTestMixin):

    def setUp(self):
        super().setUp()
        migration.upgrade('head', engine=common.get_engine())
        self.useFixture(database.ServiceFacade())


class TestRegistryMySQL(_RegistryTests, _Opportunistic, base.TestCase):
    FIXTURE = database.MySQLOpportunisticFixture


class TestRegistryPostgreSQL(_RegistryTests, _Opportunistic, base.TestCase):
    FIXTURE = database.PostgresqlOpportunisticFixture
