"""Run the real ``openstack`` shell in process against faked HTTP.

Only the network is fake: Keystone's token response (with a service
catalog holding the guest-upgrade endpoint) and the API's responses come
from requests-mock; argument parsing, the plugin hooks, the keystoneauth
session, the client and the output formatters are the real ones.
"""

import io
import logging
import os
import sys
from unittest import mock
import warnings

import fixtures
from keystoneauth1 import fixture as ksa_fixture
from openstackclient import shell
from osc_lib import clientmanager
from requests_mock.contrib import fixture as rm_fixture

from trove_upgrade.tests import base

AUTH_URL = 'http://keystone.test/identity/v3'
API_ROOT = 'http://upgrade.test:8790'
PROJECT_ID = 'a1b2c3d4e5f60718293a4b5c6d7e8f90'
MGMT = '%s/v1.0/%s/mgmt' % (API_ROOT, PROJECT_ID)
TOKEN = 'gAAAAA-test-token'
UPGRADE_ID = '6a9a3c3e-7e8f-4a77-9a4c-3f0f6c1d2e11'
INSTANCE_ID = '0b1b5c12-4c5d-4f6e-8a9b-0c1d2e3f4a5b'


def upgrade(**overrides):
    """An upgrade as the API renders it."""
    body = {
        'id': UPGRADE_ID,
        'instance_id': INSTANCE_ID,
        'instance_version': 'v1.0.1',
        'from_version': None,
        'strategy': 'swift',
        'location': 'guest-packages/guest-agent-v1.0.1.tar.gz',
        'metadata': {},
        'allow_downgrade': False,
        'status': 'SENT',
        'status_detail': None,
        'rollout_id': None,
        'project_id': PROJECT_ID,
        'user_id': 'admin-user',
        'request_id': 'req-create',
        'created_at': '2026-11-29T18:00:00Z',
        'updated_at': '2026-11-29T18:00:00Z',
        'finished_at': None,
        'links': [{'rel': 'self', 'href': MGMT + '/upgrades/' + UPGRADE_ID}],
    }
    body.update(overrides)
    return body


def event(from_state, to_state, detail=None, source='conductor',
          second=0):
    return {'created_at': '2026-11-29T18:00:%02dZ' % second,
            'source': source, 'from_state': from_state,
            'to_state': to_state, 'detail': detail,
            'request_id': 'req-%s' % to_state.lower()}


def agent(**overrides):
    body = {
        'instance_id': INSTANCE_ID,
        'agent_version': '1.0.0',
        'guest_version': 'v1.0.0',
        'rpc_api_version': '1.0',
        'state': 'RUNNING',
        'labels': {'group': 'canary'},
        'host': 'guest-1',
        'last_heartbeat': '2026-11-29T18:00:00Z',
        'reachable': True,
        'created_at': '2026-11-29T17:00:00Z',
        'updated_at': '2026-11-29T18:00:00Z',
        'links': [{'rel': 'self', 'href': MGMT + '/agents/' + INSTANCE_ID}],
    }
    body.update(overrides)
    return body


def error(status, title, detail):
    return {'errors': [{'status': status, 'title': title, 'detail': detail,
                        'request_id': 'req-error'}]}


class _IsolateLogging(fixtures.Fixture):
    """The shell configures logging and warnings; undo it after each test.

    The root logger's own handlers (oslo.log's early stderr handler) are
    detached meanwhile, or the shell's DEBUG level would reach them.
    """

    NAMES = ('', 'cliff', 'stevedore', 'requests', 'iso8601', 'keystoneauth')

    def _setUp(self):
        root = logging.getLogger()
        saved = {name: logging.getLogger(name).level for name in self.NAMES}
        handlers = list(root.handlers)
        warning_filters = list(warnings.filters)
        for handler in handlers:
            root.removeHandler(handler)

        def restore():
            for handler in list(root.handlers):
                root.removeHandler(handler)
            for handler in handlers:
                root.addHandler(handler)
            for name, level in saved.items():
                logging.getLogger(name).setLevel(level)
            warnings.filters[:] = warning_filters
        self.addCleanup(restore)


class OSCTestCase(base.TestCase):
    """Runs ``openstack`` commands; the catalog lists the API at API_ROOT."""

    catalog_url = API_ROOT
    # Trove's endpoint (service type database), when the catalog has one.
    trove_catalog_url = None

    def setUp(self):
        super().setUp()
        for name in list(os.environ):
            if name.startswith('OS_'):
                self.useFixture(fixtures.EnvironmentVariable(name))
        home = self.useFixture(fixtures.TempDir()).path
        self.useFixture(fixtures.EnvironmentVariable('HOME', home))
        self.useFixture(fixtures.EnvironmentVariable(
            'OS_CLIENT_CONFIG_FILE', os.path.join(home, 'clouds.yaml')))
        self.useFixture(_IsolateLogging())
        self.requests = self.useFixture(rm_fixture.Fixture())
        self._fake_keystone()

    def _fake_keystone(self):
        self.requests.get(AUTH_URL, json=ksa_fixture.V3Discovery(AUTH_URL))
        token = ksa_fixture.V3Token(project_id=PROJECT_ID,
                                    project_name='admin',
                                    user_name='admin')
        token.add_role(name='admin')
        if self.catalog_url:
            service = token.add_service('guest-upgrade')
            service.add_standard_endpoints(public=self.catalog_url,
                                           region='RegionOne')
        if self.trove_catalog_url:
            service = token.add_service('database')
            service.add_standard_endpoints(public=self.trove_catalog_url,
                                           region='RegionOne')
        self.requests.post(AUTH_URL + '/auth/tokens', json=token,
                           headers={'X-Subject-Token': TOKEN})

    def auth_args(self):
        return ['--os-auth-url', AUTH_URL, '--os-username', 'admin',
                '--os-password', 'secret', '--os-project-name', 'admin',
                '--os-user-domain-id', 'default',
                '--os-project-domain-id', 'default',
                '--os-region-name', 'RegionOne']

    def openstack(self, *argv, auth=True):
        """Run one command; return (exit code, stdout, stderr)."""
        stdout, stderr = io.StringIO(), io.StringIO()
        args = (self.auth_args() if auth else []) + list(argv)
        with mock.patch.object(sys, 'stdout', stdout), \
                mock.patch.object(sys, 'stderr', stderr):
            try:
                code = shell.OpenStackShell().run(args)
            except SystemExit as exc:
                code = exc.code
            finally:
                self._forget_client()
        return code, stdout.getvalue(), stderr.getvalue()

    @staticmethod
    def _forget_client():
        # OSC caches each plugin's client on the ClientManager class, which
        # outlives one shell when several run in one process.
        cache = vars(clientmanager.ClientManager).get('guest_upgrade')
        if cache is not None:
            cache._handle = None

    def api_requests(self):
        """The requests that reached the API (not Keystone)."""
        return [r for r in self.requests.request_history
                if r.url.startswith(API_ROOT)]
