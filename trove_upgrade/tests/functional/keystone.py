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

"""A real Keystone on loopback, as a fixture.

Keystone (the PyPI package) runs in its own process with a SQLite database
and fernet keys in a temporary directory, served by a threaded stdlib WSGI
server on a free port of 127.0.0.1. Start-up takes seconds, so tests start
it once per class (``setUpClass``) and share it.

The fixture bootstraps the ``admin`` user, project and role, and creates
what trove-upgrade needs: a ``service`` project with a ``trove-upgrade``
service user for keystonemiddleware's auth_token. ``register_service``
adds trove-upgrade to the catalog under :data:`SERVICE_TYPE`, for clients
that find the API there.
"""

import getpass
import grp
import os
import subprocess
import sys
import textwrap

import fixtures
from keystoneauth1.identity import v3
from keystoneauth1 import session as ks_session
from oslo_utils import uuidutils

LOOPBACK = '127.0.0.1'

# The catalog's service type of trove-upgrade's management API.
SERVICE_TYPE = 'guest-upgrade'
SERVICE_NAME = 'trove-upgrade'
REGION = 'RegionOne'

# keystone parses sys.argv with oslo.config as it is imported, so the
# runner empties it first; it reports its port once it listens.
_RUNNER = textwrap.dedent('''
    import socketserver
    import sys
    from wsgiref import simple_server

    sys.argv = ['keystone']
    from keystone.wsgi import api


    class Server(socketserver.ThreadingMixIn, simple_server.WSGIServer):
        daemon_threads = True


    class Quiet(simple_server.WSGIRequestHandler):
        def log_message(self, *args):
            pass


    server = simple_server.make_server('127.0.0.1', 0, api.application,
                                       server_class=Server,
                                       handler_class=Quiet)
    print(server.server_address[1], flush=True)
    server.serve_forever()
''')

_CONF = textwrap.dedent('''
    [DEFAULT]
    log_file = {dir}/keystone.log

    [database]
    connection = sqlite:///{dir}/keystone.sqlite

    [fernet_tokens]
    key_repository = {dir}/fernet-keys

    [fernet_receipts]
    key_repository = {dir}/fernet-keys

    [credential]
    key_repository = {dir}/credential-keys

    [identity]
    # The cheapest bcrypt: these passwords protect nothing.
    password_hash_rounds = 4
''')


class Keystone(fixtures.Fixture):
    """Keystone on 127.0.0.1; ``url`` is its root, ``auth_url`` its /v3."""

    admin_password = 'admin-secret'
    service_user = 'trove-upgrade'
    service_password = 'service-secret'

    def _setUp(self):
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.conf_file = os.path.join(self.dir, 'keystone.conf')
        with open(self.conf_file, 'w') as f:
            f.write(_CONF.format(dir=self.dir))
        self._manage('db_sync')
        user = getpass.getuser()
        group = grp.getgrgid(os.getgid()).gr_name
        for setup in ('fernet_setup', 'credential_setup'):
            self._manage(setup, '--keystone-user', user,
                         '--keystone-group', group)
        self._start()
        self._manage('bootstrap',
                     '--bootstrap-password', self.admin_password,
                     '--bootstrap-public-url', self.auth_url,
                     '--bootstrap-internal-url', self.auth_url,
                     '--bootstrap-region-id', REGION)
        self.admin_project_id = self._project_id('admin')
        self.admin = self.session('admin', self.admin_password,
                                  self.admin_project_id)
        self.service_project_id = self.create_project('service')
        self.create_user(self.service_user, self.service_password,
                         self.service_project_id, roles=['service'])

    def _manage(self, *args):
        subprocess.run(
            [os.path.join(os.path.dirname(sys.executable), 'keystone-manage'),
             '--config-file', self.conf_file] + list(args),
            check=True, capture_output=True, cwd=self.dir)

    def _start(self):
        env = dict(os.environ, OS_KEYSTONE_CONFIG_FILES=self.conf_file)
        stderr = open(os.path.join(self.dir, 'keystone.stderr'), 'w')
        self.addCleanup(stderr.close)
        self.process = subprocess.Popen(
            [sys.executable, '-c', _RUNNER], env=env, cwd=self.dir,
            stdout=subprocess.PIPE, stderr=stderr, text=True)
        self.addCleanup(self._stop)
        port = self.process.stdout.readline().strip()
        if not port.isdigit():
            raise RuntimeError('Keystone did not start; see %s'
                               % os.path.join(self.dir, 'keystone.stderr'))
        self.url = 'http://%s:%s' % (LOOPBACK, port)
        self.auth_url = self.url + '/v3'

    def _stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process.stdout.close()

    def session(self, username, password, project_id):
        """A keystoneauth1 session of a Default-domain user in a project."""
        auth = v3.Password(auth_url=self.auth_url, username=username,
                           password=password, project_id=project_id,
                           user_domain_id='default')
        return ks_session.Session(auth=auth)

    def _project_id(self, name):
        """The id of a project, read with the admin's password."""
        auth = v3.Password(auth_url=self.auth_url, username='admin',
                           password=self.admin_password,
                           project_name=name, user_domain_id='default',
                           project_domain_id='default')
        return ks_session.Session(auth=auth).get_project_id()

    def _post(self, path, body):
        resp = self.admin.post(self.auth_url + path, json=body)
        return resp.json()

    def _role_id(self, name):
        resp = self.admin.get(self.auth_url + '/roles?name=' + name)
        role, = resp.json()['roles']
        return role['id']

    def create_project(self, name=None):
        """A new project in the Default domain; returns its id."""
        name = name or 'project-' + uuidutils.generate_uuid(dashed=False)
        return self._post('/projects', {'project': {
            'name': name, 'domain_id': 'default'}})['project']['id']

    def create_user(self, name, password, project_id, roles=('member',)):
        """A user holding ``roles`` on ``project_id``; returns its id."""
        user_id = self._post('/users', {'user': {
            'name': name, 'password': password, 'domain_id': 'default',
            'default_project_id': project_id}})['user']['id']
        for role in roles:
            self.admin.put('%s/projects/%s/users/%s/roles/%s' % (
                self.auth_url, project_id, user_id, self._role_id(role)))
        return user_id

    def register_service(self, endpoint_url, service_type=SERVICE_TYPE):
        """Put trove-upgrade's API at ``endpoint_url`` in the catalog.

        ``endpoint_url`` is the API's unversioned root (its versions
        document); clients append ``/v1.0/{project_id}/mgmt/...``.
        """
        service_id = self._post('/services', {'service': {
            'type': service_type, 'name': SERVICE_NAME,
            'description': 'Trove guest-agent upgrades'}})['service']['id']
        for interface in ('public', 'internal'):
            self._post('/endpoints', {'endpoint': {
                'service_id': service_id, 'interface': interface,
                'region_id': REGION, 'url': endpoint_url}})
        return service_id

    def authtoken_options(self):
        """``[keystone_authtoken]`` of an API that validates tokens here."""
        return {
            'www_authenticate_uri': self.auth_url,
            'auth_url': self.auth_url,
            'auth_type': 'password',
            'username': self.service_user,
            'password': self.service_password,
            'project_name': 'service',
            'user_domain_id': 'default',
            'project_domain_id': 'default',
            'region_name': REGION,
            'service_type': SERVICE_TYPE,
        }
