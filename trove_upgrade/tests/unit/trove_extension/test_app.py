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

"""The extension's application, loaded as trove-api loads it.

Each test runs a fresh Python, since the choice of ConfigOpts is made once
per process, before ``trove_upgrade.conf`` is imported: there a stand-in
for Trove's own registrations is on the global CONF first, as in
trove-api, then the application is loaded from trove-upgrade's own file.
"""

import http
import json
import os
import subprocess
import sys
import textwrap

import fixtures
from oslo_context import context as oslo_context
from oslo_middleware import request_id
import routes
import webob.exc

from tools.testbed import conffile
from trove_upgrade.api import handler
from trove_upgrade import hosted_conf
from trove_upgrade.tests import base
from trove_upgrade.tests.fixtures import database
from trove_upgrade.trove_extension import app

_SCRIPT = textwrap.dedent('''
    import json
    import sys

    from oslo_config import cfg
    from oslo_context import context as oslo_context
    from oslo_db import options as db_options
    import oslo_messaging as messaging
    import webob

    # What trove-api has done before it loads extensions.
    db_options.set_defaults(cfg.CONF, connection='sqlite://')
    messaging.TransportURL.parse(cfg.CONF)
    cfg.CONF([], project='trove', default_config_files=[])

    from trove_upgrade.trove_extension import app
    application = app.load([sys.argv[1]])
    from trove_upgrade import conf

    def call(method, path, roles, body=None, trove_context=True):
        req = webob.Request.blank(path, method=method,
                                  base_url='http://trove.test:8779/v1.0')
        req.environ['openstack.request_id'] = 'req-from-trove'
        if trove_context:
            req.environ['trove.context'] = oslo_context.RequestContext(
                user_id='u1', project_id='p1', roles=roles)
        if body is not None:
            req.json = body
            req.content_type = 'application/json'
        resp = req.get_response(application)
        return {'status': resp.status_int, 'body': resp.json,
                'location': resp.headers.get('Location'),
                'allow': resp.headers.get('Allow')}

    print(json.dumps({
        'global_exchange': cfg.CONF.control_exchange,
        'global_connection': cfg.CONF.database.connection,
        'global_pool': cfg.CONF.database.max_pool_size,
        'own_pool': conf.CONF.database.max_pool_size,
        'global_has_api': 'api' in cfg.CONF,
        'own_exchange': conf.CONF.control_exchange,
        'own_connection': conf.CONF.database.connection,
        'list': call('GET', '/p1/mgmt/upgrades', ['admin']),
        'create': call('POST', '/p1/mgmt/instances/'
                       '6a9b1d1e-3c4f-4f51-9d62-1a2b3c4d5e6f/upgrade',
                       ['admin'], {'upgrade': {
                           'instance_version': '2.0.0',
                           'location': 'swift://c/o.pkg'}}),
        'member': call('GET', '/p1/mgmt/agents', ['member']),
        'other_project': call('GET', '/p2/mgmt/agents', ['admin']),
        'anonymous': call('GET', '/p1/mgmt/agents', [],
                          trove_context=False),
        'wrong_method': call('PUT', '/p1/mgmt/agents', ['admin']),
    }))
''')


class TestHostedConf(base.TestCase):

    def test_too_late_once_the_options_are_on_the_global_conf(self):
        # This test process imported trove_upgrade.conf long ago.
        self.assertRaises(RuntimeError, hosted_conf.use_private_conf)
        self.assertFalse(hosted_conf.is_private())


class TestLoad(base.TestCase):

    def test_served_on_its_own_conf_without_touching_troves(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        db = self.useFixture(database.Database())
        path = os.path.join(tmp, 'trove-upgrade.conf')
        conffile.write_conf(path, {
            'DEFAULT': {'transport_url': 'fake:/', 'state_path': tmp},
            'database': {'connection': db.url},
            # No instance key here: sealing is for the functional tests.
            'conductor': {'require_sealed': False},
        })

        proc = subprocess.run([sys.executable, '-c', _SCRIPT, path],
                              capture_output=True, text=True, timeout=120)

        self.assertEqual(0, proc.returncode, proc.stderr)
        seen = json.loads(proc.stdout.splitlines()[-1])
        # Trove's options keep their values and defaults.
        self.assertEqual(('openstack', 'sqlite://', False),
                         (seen['global_exchange'], seen['global_connection'],
                          seen['global_has_api']))
        self.assertEqual(('trove_upgrade', db.url, 64),
                         (seen['own_exchange'], seen['own_connection'],
                          seen['own_pool']))
        self.assertEqual(5, seen['global_pool'])
        self.assertEqual((200, {'upgrades': []}),
                         (seen['list']['status'], seen['list']['body']))
        created = seen['create']
        self.assertEqual(202, created['status'], created)
        upgrade = created['body']['upgrade']
        self.assertEqual(('swift', 'p1', 'u1', 'req-from-trove'),
                         (upgrade['strategy'], upgrade['project_id'],
                          upgrade['user_id'], upgrade['request_id']))
        self.assertEqual('http://trove.test:8779/v1.0/p1/mgmt/upgrades/%s'
                         % upgrade['id'], created['location'])
        for name, status in (('member', 403), ('other_project', 403),
                             ('anonymous', 401)):
            error, = seen[name]['body']['errors']
            self.assertEqual((status, 'req-from-trove'),
                             (error['status'], error['request_id']), name)
        wrong = seen['wrong_method']
        error, = wrong['body']['errors']
        self.assertEqual(
            (405, 'GET, HEAD, OPTIONS', 'req-from-trove',
             'PUT is not allowed on /v1.0/p1/mgmt/agents; allowed: GET, '
             'HEAD, OPTIONS.'),
            (wrong['status'], wrong['allow'], error['request_id'],
             error['detail']))


class TestLoadRefusals(base.TestCase):
    """A configuration that cannot work stops trove-api at start."""

    def load(self, *config_files, config_dirs=()):
        home = self.useFixture(fixtures.TempDir()).path
        script = ('from trove_upgrade.trove_extension import app\n'
                  'app.load(%r, %r)\n' % (list(config_files),
                                          list(config_dirs)))
        return subprocess.run([sys.executable, '-c', script],
                              capture_output=True, text=True, timeout=120,
                              cwd=home, env=dict(os.environ, HOME=home))

    def test_a_missing_file_is_named(self):
        proc = self.load('/nonexistent/trove-upgrade.conf')

        self.assertNotEqual(0, proc.returncode)
        self.assertIn('/nonexistent/trove-upgrade.conf', proc.stderr)

    def test_a_connection_no_driver_serves_is_refused(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'trove-upgrade.conf')
        conffile.write_conf(path, {'database': {'connection':
                                                'nosuchdb://h/d'}})

        proc = self.load(path)

        self.assertNotEqual(0, proc.returncode)
        self.assertIn('[database] connection names a database driver that '
                      'is not installed', proc.stderr)

    def test_a_drop_in_directory_is_read_after_the_files(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(tmp, 'trove-upgrade.conf')
        conffile.write_conf(path, {'database': {
            'connection': 'sqlite:///%s/empty.sqlite' % tmp}})
        drop_in = os.path.join(tmp, 'trove-upgrade.conf.d')
        conffile.write_conf(os.path.join(drop_in, 'db.conf'), {
            'database': {'connection': 'nosuchdb://h/d'}})

        for files in ([path], []):
            proc = self.load(*files, config_dirs=[drop_in])

            self.assertNotEqual(0, proc.returncode)
            self.assertIn('[database] connection names a database driver '
                          'that is not installed', proc.stderr)

    def test_a_database_without_the_schema_is_refused(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(tmp, 'trove-upgrade.conf')
        conffile.write_conf(path, {'database': {
            'connection': 'sqlite:///%s/empty.sqlite' % tmp}})

        proc = self.load(path)

        self.assertNotEqual(0, proc.returncode)
        self.assertIn('The database schema is not current: the database has '
                      'no schema; run: trove-upgrade-manage db sync',
                      proc.stderr)

    def test_no_file_at_all_is_refused(self):
        if os.path.exists('/etc/trove-upgrade/trove-upgrade.conf'):
            self.skipTest('this machine has a trove-upgrade configuration')

        proc = self.load()

        self.assertNotEqual(0, proc.returncode)
        self.assertIn('RuntimeError: The trove-upgrade API extension is '
                      'enabled but no trove-upgrade configuration file was '
                      'found', proc.stderr)


def trove_mapper(resources):
    """A mapper built as trove 25.1.0's TroveExtensionMiddleware builds it.

    Each resource's collection actions first, then routes' resource
    mapper, then Trove's PATCH route on the member; the controller is the
    collection's name here. Last, a stand-in for one of Trove's own mgmt
    routes.
    """
    mapper = routes.Mapper()
    for collection, collection_actions in resources.items():
        for action, method in collection_actions.items():
            mapper.connect('/%s/%s' % (collection, action),
                           controller=collection, action=action,
                           conditions={'method': [method]})
        mapper.resource(collection, collection, controller=collection,
                        collection=dict(collection_actions))
        mapper.connect('/%s/{id}' % collection, controller=collection,
                       action='edit', conditions={'method': ['PATCH']})
    return mapper


def _url(path):
    """``path`` as Trove's router hands it on: below /v1.0, ids filled."""
    return path[len(app.API_PREFIX):].replace(
        '{tenant_id}', 'p1').replace('{', '').replace('}', '')


class TestResources(base.TestCase):
    """Trove's resources, derived from the standalone API's routes."""

    def setUp(self):
        super().setUp()
        mapper = trove_mapper(app.resources())

        def match(method, path):
            return mapper.match(environ={'PATH_INFO': path,
                                         'REQUEST_METHOD': method})
        self.match = match

    def test_every_mgmt_path_is_a_collection(self):
        resources = app.resources()
        self.assertEqual(sorted(
            path[len(app.API_PREFIX) + 1:]
            for path in handler.ROUTE_DECLARATIONS
            if path.startswith(handler.MGMT + '/')), sorted(resources))
        self.assertIn('{tenant_id}/mgmt/packages/fleet', resources)
        self.assertEqual({'put': 'PUT', 'patch': 'PATCH',
                          'delete': 'DELETE', 'head': 'HEAD',
                          'options': 'OPTIONS', 'trace': 'TRACE',
                          'connect': 'CONNECT'},
                         resources['{tenant_id}/mgmt/upgrades'])

    def test_trove_routes_every_method_of_every_mgmt_path(self):
        # Declared or not: the router answers a method a path does not
        # serve with 405, which Trove, not routing it, would answer 404.
        # Every resource has the same controller, which hands the request
        # to the router as it came: which resource matched is no matter.
        mgmt = [path for path in handler.ROUTE_DECLARATIONS
                if path.startswith(handler.MGMT + '/')]
        self.assertIn(handler.MGMT + '/packages/{package_id}', mgmt)
        for path in mgmt:
            url = _url(path)
            for method in http.HTTPMethod:
                self.assertIsNotNone(self.match(method.value, url),
                                     (method, url))
        self.assertEqual('put', self.match('PUT', '/p1/mgmt/upgrades')[
            'action'])

    def test_troves_own_routes_stay_troves(self):
        for method, url in (('GET', '/p1/mgmt/instances'),
                            ('PUT', '/p1/mgmt/instances'),
                            ('GET', '/p1/mgmt/instances/x'),
                            ('DELETE', '/p1/mgmt/instances/x'),
                            ('POST', '/p1/mgmt/instances/x/action'),
                            ('GET', '/p1/mgmt/instances/x/root'),
                            ('GET', '/p1/mgmt/quotas/x'),
                            ('PUT', '/p1/mgmt'),
                            ('GET', '/p1/instances'),
                            ('DELETE', '/p1/instances/x')):
            self.assertIsNone(self.match(method, url), (method, url))


class TestTroveContextAdapter(base.TestCase):
    """The caller's scope is what Trove's ContextMiddleware decided."""

    def context_of(self, **trove_context):
        environ = {app.TROVE_CONTEXT_KEY: oslo_context.RequestContext(
            user_id='u1', project_id='p1', overwrite=False, **trove_context),
            request_id.ENV_REQUEST_ID: 'req-from-trove'}
        return app.TroveContextAdapter.context_from(environ)

    def test_troves_admin_acts_on_every_project(self):
        ctx = self.context_of(roles=['admin', ''], is_admin=True)

        self.assertEqual(
            (True, 'p1', 'u1', ['admin'], 'req-from-trove'),
            (ctx.is_admin, ctx.project_id, ctx.user_id, ctx.roles,
             ctx.request_id))

    def test_anyone_else_acts_on_the_requests_project_only(self):
        # An admin role Trove did not take for one (its admin_roles or
        # context_is_admin say otherwise) gives no wider scope here.
        for roles in (['member', 'reader'], ['admin']):
            ctx = self.context_of(roles=roles, is_admin=False)
            self.assertEqual((False, 'p1'), (ctx.is_admin, ctx.project_id))

    def test_no_authenticated_user_is_refused(self):
        self.assertRaises(webob.exc.HTTPUnauthorized,
                          app.TroveContextAdapter.context_from, {})
