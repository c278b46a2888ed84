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

One class shares one real Keystone and one real ``trove-api`` (trove
25.1.0 from PyPI, its schema made by ``trove-manage db_sync`` on SQLite)
from a cached virtualenv where trove-upgrade is installed non-editable
from this checkout, its extension enabled by trove.conf alone. The catalog
has Trove's ``database`` service only. trove-upgrade's own tables are a
SQLite file migrated by ``trove-upgrade-manage db sync``, shared by the
extension, the test's real conductor and the test's real agent, on the
local RabbitMQ under exchanges of the class's own. The extension and the
conductors read trove-api's own database as ``[trove] connection``; each
test's instance is a row the test writes there as Trove would.
"""

import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import textwrap
import uuid

import fixtures
import kombu
from oslo_serialization import jsonutils
from oslo_utils import uuidutils
from testtools import content
import webob

from tools.testbed import conffile
from trove_upgrade.api import deploy
from trove_upgrade.api import handler
from trove_upgrade.db import agents as db_agents
from trove_upgrade.db import common as db_common
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade import rpc_interface
from trove_upgrade import states
from trove_upgrade.tests.functional.agent import harness
from trove_upgrade.tests.functional import keystone
from trove_upgrade.tests.functional import servers
from trove_upgrade.tests.functional.trove import trove_db
from trove_upgrade.tests.functional.trove_api import venv

TROVE_VERSION = '25.1.0'
AMQP_URL = 'amqp://guest:guest@127.0.0.1:5672//'
TIMEOUT = 180


def _run(*argv, cwd=None):
    proc = subprocess.run(argv, capture_output=True, text=True,
                          timeout=TIMEOUT, cwd=cwd)
    if proc.returncode != 0:
        raise RuntimeError('%s failed: %s' % (' '.join(argv),
                                              proc.stderr[-3000:]))


def _delete_from_broker(topics, exchanges):
    """The queues and exchanges the test's RPC servers and clients left.

    Their fanout queues have random names; they expire by themselves.
    """
    with kombu.Connection(AMQP_URL) as connection:
        channel = connection.default_channel
        for topic in topics:
            for queue in (topic, '%s.%s' % (topic, socket.gethostname())):
                channel.queue_delete(queue)
            channel.exchange_delete(topic + '_fanout')
        for exchange in exchanges:
            channel.exchange_delete(exchange)


class SharedDatabase(fixtures.Fixture):
    """The class's control-plane database, for this test's process."""

    def __init__(self, url):
        super().__init__()
        self.url = url

    def _setUp(self):
        facade = db_common.new_facade(connection=self.url)
        self.addCleanup(db_common.context_manager.patch_factory(facade))
        self.addCleanup(facade.dispose_pool)


class TestTroveAPIExtension(harness.AgentTestCase):

    # The methods checked on every mgmt path: HTTP's, but CONNECT, which
    # HTTP clients do not send to a path.
    METHODS = ('GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS',
               'TRACE')
    # 5.0.0 only for the package registry: no agent of the class runs it.
    packages = {'2.0.0': 'ok', '3.0.0': 'ok', '4.0.0': 'ok', '5.0.0': 'ok'}

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.venv = venv.trove_upgrade_venv(TROVE_VERSION)
        cls.dir = os.path.realpath(tempfile.mkdtemp(prefix='trove-api-'))
        unique = uuid.uuid4().hex[:12]
        cls.bus = ('trove_upgrade_trove_api_test_%s' % unique,
                   'trove_upgrade_conductor_trove_api_test_%s' % unique)
        cls.trove_exchange = 'trove_api_test_%s' % unique
        # The topics (queue names) of the conductors and agents, deleted
        # once every process is gone.
        cls.topics = set()
        cls.keystone = keystone.Keystone()
        cls.keystone.setUp()
        try:
            cls._start_trove_api()
            cls.keystone.register_service(
                cls.trove_url + '/v1.0/$(project_id)s',
                service_type='database')
            cls.member_project = cls.keystone.create_project()
            cls.member = 'member-' + uuidutils.generate_uuid(dashed=False)
            cls.keystone.create_user(cls.member, 'member-secret',
                                     cls.member_project,
                                     roles=['member', 'reader'])
        except Exception:
            cls._tear_down()
            raise

    @classmethod
    def tearDownClass(cls):
        cls._tear_down()
        super().tearDownClass()

    @classmethod
    def _bin(cls, name):
        return os.path.join(cls.venv, 'bin', name)

    @classmethod
    def _start_trove_api(cls):
        exchange, topic = cls.bus
        cls.db_url = 'sqlite:///%s/trove_upgrade.sqlite' % cls.dir
        cls.trove_db_url = 'sqlite:///%s/trove.sqlite' % cls.dir
        cls.tu_conf = os.path.join(cls.dir, 'trove-upgrade.conf')
        # The registry fetches manifests from the class's repository.
        strategy_dir = os.path.join(cls.dir, 'strategies.d')
        servers.write_strategy_conf(strategy_dir, 'local',
                                    {'allowed_dirs': [cls.repo]})
        conffile.write_conf(cls.tu_conf, {
            'DEFAULT': {'transport_url': harness.RABBIT_URL,
                        'control_exchange': exchange,
                        'state_path': cls.dir},
            'database': {'connection': cls.db_url},
            'conductor': {'topic': topic},
            'trove': {'connection': cls.trove_db_url},
            'packages': {'strategy_config_dir': strategy_dir,
                         'allowed_strategies': ['local'],
                         'trusted_key_files': [cls.signing_key + '.pub']},
        })
        _run(cls._bin('trove-upgrade-manage'), '--config-file', cls.tu_conf,
             'db', 'sync')
        port = servers.free_port()
        cls.trove_url = 'http://%s:%d' % (servers.LOOPBACK, port)
        paste = os.path.join(cls.dir, 'api-paste.ini')
        shutil.copy(os.path.join(cls.venv, 'etc', 'trove', 'api-paste.ini'),
                    paste)
        cls.trove_log = os.path.join(cls.dir, 'trove-api.log')
        authtoken = dict(cls.keystone.authtoken_options(),
                         service_type='database')
        cls.trove_conf = os.path.join(cls.dir, 'trove.conf')
        conffile.write_conf(cls.trove_conf, {
            'DEFAULT': {'bind_host': servers.LOOPBACK, 'bind_port': port,
                        'trove_api_workers': 1,
                        'api_paste_config': paste,
                        'transport_url': harness.RABBIT_URL,
                        'control_exchange': cls.trove_exchange,
                        'log_file': cls.trove_log},
            'database': {'connection': cls.trove_db_url},
            'keystone_authtoken': authtoken,
            'trove_upgrade': {'enabled': True,
                              'config_files': cls.tu_conf},
        })
        _run(cls._bin('trove-manage'), '--config-file', cls.trove_conf,
             'db_sync', cwd=cls.dir)
        cls.trove_rows = trove_db.TroveDatabase(cls.trove_db_url, cls.venv)
        cls.trove_rows.setUp()
        cls.trove_api = subprocess.Popen(
            [cls._bin('trove-api'), '--config-file', cls.trove_conf],
            cwd=cls.dir, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        servers.wait_for_port(port, timeout=120, process=cls.trove_api)

    @classmethod
    def _tear_down(cls):
        if getattr(cls, 'trove_rows', None) is not None:
            cls.trove_rows.cleanUp()
        api = getattr(cls, 'trove_api', None)
        if api is not None and api.poll() is None:
            os.killpg(api.pid, 15)
            try:
                api.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(api.pid, 9)
                api.wait()
        cls.keystone.cleanUp()
        _delete_from_broker(cls.topics, (cls.bus[0], cls.trove_exchange))
        shutil.rmtree(cls.dir, ignore_errors=True)

    # The harness, on the class's bus and database.

    def bus_names(self):
        return self.bus

    def database_fixture(self):
        return SharedDatabase(self.db_url)

    def conductor_conf(self):
        conf = super().conductor_conf()
        conf['DEFAULT']['debug'] = True
        conf['conductor']['rollout_interval'] = 0.3
        conf['trove'] = {'connection': self.trove_db_url}
        return conf

    def setUp(self):
        super().setUp()
        self.trove_rows.add_instance(
            'db-%s' % self.instance_id[:8],
            tenant_id=self.keystone.admin_project_id,
            instance_id=self.instance_id)
        # A conductor topic set in the configuration is used as it is.
        self.topics.update([rpc_interface.agent_topic(self.instance_id),
                            self.conductor_topic])
        self.addDetail('trove-api.log', content.content_from_file(
            self.trove_log, buffer_now=False))

    # Clients.

    def session(self, user='admin', password=None, project_id=None):
        if user == 'admin':
            return self.keystone.session(
                'admin', self.keystone.admin_password,
                self.keystone.admin_project_id)
        return self.keystone.session(user, password, project_id)

    def post(self, sess, path, body, project_id=None):
        """POST to Trove's endpoint, as found in the catalog."""
        project_id = project_id or self.keystone.admin_project_id
        return sess.post(
            '/%s/mgmt%s' % (project_id, path), json=body, raise_exc=False,
            endpoint_filter={'service_type': 'database',
                             'interface': 'public'},
            endpoint_override=self.trove_url + '/v1.0')

    def trove(self, method, path, body=None):
        """``method`` on Trove's endpoint, ``path`` below the mgmt prefix."""
        return self.session().request(
            '/%s/mgmt%s' % (self.keystone.admin_project_id, path), method,
            json=body, raise_exc=False,
            endpoint_override=self.trove_url + '/v1.0')

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
        member = self.session(self.member, 'member-secret',
                              self.member_project)
        for path, body in (
                ('/upgrades', {'upgrade': {
                    'instance_id': self.instance_id,
                    'instance_version': '2.0.0', 'strategy': 'local',
                    'location': self.location('2.0.0')}}),
                ('/instances/%s/upgrade' % self.instance_id,
                 {'upgrade': {'instance_version': '2.0.0',
                              'location': self.location('2.0.0')}})):
            resp = self.post(member, path, body,
                             project_id=self.member_project)
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
