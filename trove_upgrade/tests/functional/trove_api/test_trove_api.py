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

"""trove-upgrade served by a real trove-api, through Trove's endpoint.

The class's Keystone and trove-api are ``base.TroveAPITestCase``'s; each
test's instance is created by Trove's own code in the customer's project,
and the administrator, in the ``admin`` project, reaches it. The test's
agent runs the sample guest, keyed by the guest_info.conf Trove injected.
"""

import json
import os
import re
import subprocess
import textwrap

import fixtures
from oslo_serialization import jsonutils
from oslo_utils import uuidutils
import webob

from tools.testbed import conffile
from trove_upgrade.api import deploy
from trove_upgrade.api import handler
from trove_upgrade.common import states
from trove_upgrade.db import agents as db_agents
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.tests.functional.agent import harness
from trove_upgrade.tests.functional import keystone
from trove_upgrade.tests.functional.trove import trove_db
from trove_upgrade.tests.functional.trove_api import base

TIMEOUT = base.TIMEOUT


class TestTroveAPIExtension(base.TroveAPITestCase):

    # The methods checked on every mgmt path: HTTP's, but CONNECT, which
    # HTTP clients do not send to a path.
    METHODS = ('GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS',
               'TRACE')
    # 5.0.0 only for the package registry: no agent of the class runs it.
    packages = {'2.0.0': 'ok', '3.0.0': 'ok', '4.0.0': 'ok', '5.0.0': 'ok'}

    def setUp(self):
        super().setUp()
        self.trove_conf_dir = self.create_trove_instance()

    def agent_conf(self, **overrides):
        agent = super().agent_conf(**overrides)
        del agent['instance_key_file']
        del agent['require_sealed']  # the default requires seals
        return agent

    def start_agent(self, **overrides):
        """The sample guest's agent, keyed by Trove's guest_info.conf."""
        path = os.path.join(self.tmp, 'agent.conf')
        conffile.write_conf(path, {
            'DEFAULT': {'transport_url': harness.RABBIT_URL,
                        'control_exchange': self.exchange,
                        'state_path': self.tmp},
            'agent': self.agent_conf(**overrides),
            'trove_guest': {'config_dir': self.trove_conf_dir},
            'conductor': {'topic': self.conductor_topic},
        })
        proc = self._spawn('agent', [
            os.path.join(harness.BIN, 'trove-upgrade-agent'),
            '--config-file', path])
        self.addCleanup(self.stop_guest)
        return proc

    def standalone(self, method, path, body=None):
        """The same request to the standalone API, in this process."""
        if not hasattr(self, 'app'):
            self.conf([], default_config_files=[], default_config_dirs=[])
            self.flags(group='api', auth_strategy='noauth2')
            self.app = deploy.loadapp(self.conf)
        project_id = self.keystone.admin_project_id
        req = webob.Request.blank('/v1.0/%s/mgmt%s' % (project_id, path),
                                  method=method)
        req.headers.update({'X-User-Id': 'operator',
                            'X-Project-Id': project_id, 'X-Roles': 'admin'})
        if body is not None:
            req.body = jsonutils.dump_as_bytes(body)
            req.content_type = 'application/json'
        return req.get_response(self.app)

    def assertAnsweredAsStandalone(self, method, path):
        """Trove's answer has the standalone API's status, Allow, error.

        The error of a route (404, 405) only: trove-api gives a bodiless
        request a Content-Type of its own, which a 415 names.
        """
        resp = self.trove(method, path)
        expected = self.standalone(method, path)
        where = (method, path, resp.status_code, resp.text)
        self.assertEqual(
            (expected.status_int, expected.headers.get('Allow')),
            (resp.status_code, resp.headers.get('Allow')), where)
        if method == 'HEAD' or not expected.body:
            self.assertEqual(b'', resp.content, where)
        elif expected.status_int in (404, 405):
            error, = resp.json()['errors']
            self.assertEqual(resp.headers['x-openstack-request-id'],
                             error.pop('request_id'), where)
            error_alone, = expected.json['errors']
            del error_alone['request_id']
            self.assertEqual(error_alone, error, where)

    def openstack(self, *argv):
        env = {k: v for k, v in os.environ.items() if not k.startswith('OS_')}
        env['HOME'] = self.useFixture(fixtures.TempDir()).path
        proc = subprocess.run(
            [os.path.join(harness.BIN, 'openstack'),
             '--os-auth-url', self.keystone.auth_url,
             '--os-identity-api-version', '3',
             '--os-username', 'admin',
             '--os-password', self.keystone.admin_password,
             '--os-project-name', 'admin',
             '--os-user-domain-id', 'default',
             '--os-project-domain-id', 'default',
             '--os-region-name', keystone.REGION] + list(argv),
            capture_output=True, text=True, env=env, timeout=TIMEOUT)
        return proc.returncode, proc.stdout, proc.stderr

    def location(self, version):
        return os.path.join(self.repo, 'guest-%s.pkg' % version)

    def assert_completed(self, upgrade_id, version):
        done = self.wait_for_status(upgrade_id, states.FINAL_STATES)
        self.assertEqual(states.SUCCESS, done['status'], done['events'])
        self.assertEqual(version, self.running_guest_version())
        return done

    def test_cli_and_both_routes_record_upgrades_an_agent_completes(self):
        self.start_agent()
        self.wait_for_guest('1.0.0')
        # Until it registers, Trove's instance holds its upgrades DEFERRED.
        self.wait_for(self.registered, 'the agent to register')

        # The CLI finds no guest-upgrade service and uses Trove's.
        code, out, err = self.openstack(
            'database', 'upgrade', 'create', self.instance_id,
            '--instance-version', '2.0.0', '--strategy', 'local',
            '--location', self.location('2.0.0'), '-f', 'json')
        self.assertEqual(0, code, err)
        created = json.loads(out)
        self.assertEqual(('2.0.0', 'SENT'),
                         (created['instance_version'], created['status']))
        self.assert_completed(created['id'], '2.0.0')

        # Raw POST to the management collection, through Trove's endpoint.
        resp = self.post(self.session(), '/upgrades', {'upgrade': {
            'instance_id': self.instance_id, 'instance_version': '3.0.0',
            'strategy': 'local', 'location': self.location('3.0.0')}})
        self.assertEqual(202, resp.status_code, resp.text)
        upgrade = resp.json()['upgrade']
        self.assertTrue(resp.headers['Location'].startswith(
            '%s/v1.0/%s/mgmt/upgrades/' % (self.trove_url,
                                           self.keystone.admin_project_id)))
        self.assert_completed(upgrade['id'], '3.0.0')

        # Upstream Trove's own route, body as Trove defines it: the
        # absolute path location means the local strategy.
        resp = self.post(self.session(),
                         '/instances/%s/upgrade' % self.instance_id,
                         {'upgrade': {'instance_version': '4.0.0',
                                      'location': self.location('4.0.0'),
                                      'metadata': {'ticket': 'OPS-7'}}})
        self.assertEqual(202, resp.status_code, resp.text)
        upgrade = resp.json()['upgrade']
        self.assertEqual(('local', {'ticket': 'OPS-7'}, self.instance_id),
                         (upgrade['strategy'], upgrade['metadata'],
                          upgrade['instance_id']))
        done = self.assert_completed(upgrade['id'], '4.0.0')
        self.assertEqual('3.0.0', done['from_version'])

        # The agents and rollouts resources answer there too.
        agents = self.session().get(
            '/%s/mgmt/agents' % self.keystone.admin_project_id,
            endpoint_override=self.trove_url + '/v1.0').json()['agents']
        self.assertIn(self.instance_id, [a['instance_id'] for a in agents])
        rollouts = self.session().get(
            '/%s/mgmt/rollouts' % self.keystone.admin_project_id,
            endpoint_override=self.trove_url + '/v1.0')
        self.assertEqual((200, {'rollouts': []}),
                         (rollouts.status_code, rollouts.json()))

    def test_trove_knows_missing_and_busy_instances(self):
        missing = uuidutils.generate_uuid()
        for path, body in (
                ('/upgrades', {'upgrade': {
                    'instance_id': missing, 'instance_version': '2.0.0',
                    'strategy': 'local', 'location': self.location('2.0.0')}}),
                ('/instances/%s/upgrade' % missing,
                 {'upgrade': {'instance_version': '2.0.0',
                              'location': self.location('2.0.0')}})):
            resp = self.post(self.session(), path, body)
            self.assertEqual(404, resp.status_code, resp.text)
            error, = resp.json()['errors']
            self.assertEqual(
                (404, 'Trove has no instance %s: no instance has this id '
                      'or name.' % missing),
                (error['status'], error['detail']))
        self.assertEqual([], db_upgrades.list_upgrades(
            self.context, filters={'instance_id': missing}))

        # Busy in Trove's database: held DEFERRED by the extension, kept
        # by the conductor, sent once Trove is done.
        self.trove_rows.set_task(self.instance_id, trove_db.RESIZING)
        self.start_agent()
        self.wait_for(self.registered, 'the agent to register')
        resp = self.post(self.session(), '/upgrades', {'upgrade': {
            'instance_id': self.instance_id, 'instance_version': '2.0.0',
            'strategy': 'local', 'location': self.location('2.0.0')}})
        self.assertEqual(202, resp.status_code, resp.text)
        upgrade = resp.json()['upgrade']
        self.assertEqual(states.DEFERRED, upgrade['status'])
        self.assertIn('Trove is working on instance %s' % self.instance_id,
                      upgrade['status_detail'])
        self.wait_for_log('Upgrade %s still held: Trove is working'
                          % upgrade['id'], name='conductor')
        self.assertEqual('1.0.0', self.running_guest_version())
        self.trove_rows.set_task(self.instance_id, trove_db.NONE)
        done = self.assert_completed(upgrade['id'], '2.0.0')
        self.assertEqual(
            [states.PENDING, states.DEFERRED, states.DEFERRED],
            self.history(done)[:3])

    def test_non_admin_is_refused_and_errors_are_trove_upgrades(self):
        # A member of the instance's own project.
        member = self.member_session()
        for path, body in (
                ('/upgrades', {'upgrade': {
                    'instance_id': self.instance_id,
                    'instance_version': '2.0.0', 'strategy': 'local',
                    'location': self.location('2.0.0')}}),
                ('/instances/%s/upgrade' % self.instance_id,
                 {'upgrade': {'instance_version': '2.0.0',
                              'location': self.location('2.0.0')}})):
            resp = self.post(member, path, body,
                             project_id=self.customer_project)
            self.assertEqual(403, resp.status_code, resp.text)
            error, = resp.json()['errors']
            self.assertEqual(403, error['status'])
            self.assertIn('trove_upgrade:upgrades:create', error['detail'])
            self.assertEqual(resp.headers['x-openstack-request-id'],
                             error['request_id'])

        # An admin's malformed request gets the standalone API's answers.
        resp = self.post(self.session(),
                         '/instances/%s/upgrade' % self.instance_id,
                         {'upgrade': {'instance_version': '2.0.0',
                                      'location': 'no-scheme/guest.pkg'}})
        self.assertEqual(400, resp.status_code, resp.text)
        self.assertIn('cannot be told from location',
                      resp.json()['errors'][0]['detail'])
        resp = self.session().put(
            '/%s/mgmt/upgrades/%s' % (self.keystone.admin_project_id,
                                      uuidutils.generate_uuid()),
            endpoint_override=self.trove_url + '/v1.0', raise_exc=False)
        self.assertEqual((405, 'GET, HEAD, DELETE, OPTIONS'),
                         (resp.status_code, resp.headers.get('Allow')))
        self.assertEqual([], db_upgrades.list_upgrades(
            self.context, filters={'instance_id': self.instance_id}))

    def test_trove_mgmt_route_is_dropped_only_when_enabled(self):
        # In the installed virtualenv: Trove's Mgmt lists its upgrade route
        # until our extension loads enabled, so that ours serves the route
        # whichever of the two stevedore happens to load first.
        script = textwrap.dedent('''
            from oslo_config import cfg
            from trove.common import cfg as trove_cfg
            from trove.extensions.routes import mgmt
            from trove_upgrade.trove_extension import extension
            trove_cfg.CONF([], project='trove', default_config_files=[])
            route = extension.TROVE_UPGRADE_ROUTE
            extension.opts.register_opts(cfg.CONF)
            seen = []
            for enabled in (False, True):
                cfg.CONF.set_override('enabled', enabled, 'trove_upgrade')
                extension.TroveUpgradeExtension()
                seen.append(route in [r.collection for r in
                                      mgmt.Mgmt().get_resources()])
            print(seen)
        ''')
        proc = subprocess.run([self._bin('python'), '-c', script],
                              capture_output=True, text=True,
                              timeout=TIMEOUT, cwd=self.dir)
        self.assertEqual(0, proc.returncode, proc.stderr[-3000:])
        self.assertEqual('[True, False]', proc.stdout.strip().splitlines()[-1])

    def test_packages_and_desired_versions_as_on_the_standalone_api(self):
        project_id = self.keystone.admin_project_id
        unknown = uuidutils.generate_uuid()
        # Every method on every mgmt route the standalone API declares is
        # answered as there: bodiless, on unknown ids, by trove-upgrade's
        # router (405 with Allow, not Trove's 404; OPTIONS 204 with Allow,
        # not the bare 200 trove-api's CORS middleware makes of a 405).
        for path in handler.ROUTE_DECLARATIONS:
            if not path.startswith(handler.MGMT + '/'):
                continue
            path = re.sub(r'{\w+}', unknown, path[len(handler.MGMT):])
            for method in self.METHODS:
                self.assertAnsweredAsStandalone(method, path)
        # Trove's own routes keep Trove's answers.
        resp = self.trove('PUT', '/instances')
        self.assertEqual(404, resp.status_code, resp.text)
        self.assertNotIn('errors', resp.json())
        # A chunked body, which trove-api's server does not say it ends:
        # 411, not the "Malformed JSON" of a body read as empty.
        resp = self.session().request(
            '/%s/mgmt/packages' % project_id, 'POST', raise_exc=False,
            data=iter([b'{"package": {}}']),
            headers={'Content-Type': 'application/json'},
            endpoint_override=self.trove_url + '/v1.0')
        self.assertEqual(
            (411, 'A request body needs a Content-Length.'),
            (resp.status_code, resp.json()['errors'][0]['detail']),
            resp.text)

        # An agent the desired version finds ahead of it: nothing to send.
        db_agents.register_agent(self.context, self.instance_id, {
            'guest_version': '6.0.0', 'labels': {'group': 'blue'}})
        package_body = {'package': {
            'name': 'trove-guestagent', 'version': '5.0.0',
            'strategy': 'local', 'location': self.location('5.0.0')}}
        resp = self.trove('POST', '/packages', package_body)
        self.assertEqual(201, resp.status_code, resp.text)
        package = resp.json()['package']
        self.assertEqual(
            ('5.0.0', 'active', '%s/v1.0/%s/mgmt/packages/%s'
             % (self.trove_url, project_id, package['id'])),
            (package['version'], package['state'], resp.headers['Location']))
        # packages/fleet is the collection's action, not a package.
        resp = self.trove('GET', '/packages/fleet')
        self.assertEqual(200, resp.status_code, resp.text)
        fleet = {row['version']: row for row in resp.json()['versions']}
        self.assertEqual([package['id']],
                         [p['id'] for p in fleet['5.0.0']['packages']])
        self.assertEqual(1, fleet['6.0.0']['running'])

        desired_body = {'desired_version': {
            'name': 'blue runs 5.0.0', 'package': 'trove-guestagent',
            'version': '5.0.0',
            'selector': {'instance_ids': [self.instance_id]}}}
        resp = self.trove('POST', '/desired-versions', desired_body)
        self.assertEqual(201, resp.status_code, resp.text)
        desired = resp.json()['desired_version']
        dv_path = '/desired-versions/%s' % desired['id']
        resp = self.trove('GET', '/targets?instance_id=' + self.instance_id)
        self.assertEqual(200, resp.status_code, resp.text)
        target, = resp.json()['targets']
        self.assertEqual(
            (self.instance_id, '5.0.0', '6.0.0', desired['id']),
            (target['instance_id'], target['version'],
             target['running_version'], target['owner']['id']))
        for action, status in (('pause', 'PAUSED'), ('resume', 'ACTIVE')):
            resp = self.trove('POST', '%s/%s' % (dv_path, action))
            self.assertEqual((200, status), (
                resp.status_code,
                resp.json()['desired_version']['status']), resp.text)
        resp = self.trove('PATCH', dv_path,
                          {'desired_version': {'max_in_flight': 2}})
        self.assertEqual(
            (200, 2), (resp.status_code,
                       resp.json()['desired_version']['max_in_flight']),
            resp.text)
        package_path = '/packages/%s' % package['id']
        resp = self.trove('PATCH', package_path,
                          {'package': {'state': 'deprecated'}})
        self.assertEqual((200, 'deprecated'), (
            resp.status_code, resp.json()['package']['state']), resp.text)

        # Refusals: the standalone API's, body for body.
        for method, path, body, status in (
                ('GET', '/packages/' + unknown, None, 404),
                ('POST', '/packages', package_body, 409),
                ('PATCH', package_path, {'package': {'state': 'gone'}}, 400),
                # In use by the desired version.
                ('DELETE', package_path, None, 409),
                # The instance is the first desired version's already.
                ('POST', '/desired-versions', desired_body, 409),
                ('POST', '/desired-versions/%s/resume' % unknown, None, 404),
                ('PATCH', dv_path, {'desired_version': {}}, 400),
                ('DELETE', '/packages/fleet', None, 405),
                ('POST', '/packages/fleet', None, 405),
                ('PUT', '/packages', package_body, 405),
                ('GET', '/desired-versions/%s/pause' % unknown, None, 405),
                ('POST', dv_path, desired_body, 405)):
            resp = self.trove(method, path, body)
            expected = self.standalone(method, path, body)
            error, = resp.json()['errors']
            self.assertEqual(resp.headers['x-openstack-request-id'],
                             error.pop('request_id'))
            error_alone, = expected.json['errors']
            del error_alone['request_id']
            self.assertEqual(
                (status, error_alone, expected.headers.get('Allow')),
                (resp.status_code, error, resp.headers.get('Allow')),
                (method, path))

        for path in (dv_path, package_path):
            resp = self.trove('DELETE', path)
            self.assertEqual(204, resp.status_code, resp.text)
            self.assertEqual(404, self.trove('GET', path).status_code)
