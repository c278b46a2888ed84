"""trove-upgrade served by a real trove-api, through Trove's endpoint.

One class shares one real Keystone and one real ``trove-api`` (trove
25.1.0 from PyPI, its schema made by ``trove-manage db_sync`` on SQLite)
from a cached virtualenv where trove-upgrade is installed non-editable
from this checkout, its extension enabled by trove.conf alone. The catalog
has Trove's ``database`` service only. trove-upgrade's own tables are a
SQLite file migrated by ``trove-upgrade-manage db sync``, shared by the
extension, the test's real conductor and the test's real agent, on the
local RabbitMQ under exchanges of the class's own.
"""

import json
import os
import shutil
import socket
import subprocess
import tempfile
import uuid

import fixtures
import kombu
from oslo_utils import uuidutils
from testtools import content

from trove_upgrade.agent import rpcapi as agent_rpcapi
from trove_upgrade.db import common as db_common
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade import states
from trove_upgrade.tests import conffile
from trove_upgrade.tests.functional.agent import harness
from trove_upgrade.tests.functional import keystone
from trove_upgrade.tests.functional import servers
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


def _delete_from_broker(topic, exchanges=()):
    """The queues and exchanges a topic's RPC server left, and others.

    Its fanout queues have random names; they expire by themselves.
    """
    with kombu.Connection(AMQP_URL) as connection:
        channel = connection.default_channel
        for queue in (topic, '%s.%s' % (topic, socket.gethostname())):
            channel.queue_delete(queue)
        for exchange in (topic + '_fanout',) + tuple(exchanges):
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

    packages = {'2.0.0': 'ok', '3.0.0': 'ok', '4.0.0': 'ok'}

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.venv = venv.trove_upgrade_venv(TROVE_VERSION)
        cls.dir = os.path.realpath(tempfile.mkdtemp(prefix='trove-api-'))
        unique = uuid.uuid4().hex[:12]
        cls.bus = ('trove_upgrade_trove_api_test_%s' % unique,
                   'trove_upgrade_conductor_trove_api_test_%s' % unique)
        cls.trove_exchange = 'trove_api_test_%s' % unique
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
        cls.tu_conf = os.path.join(cls.dir, 'trove-upgrade.conf')
        conffile.write_conf(cls.tu_conf, {
            'DEFAULT': {'transport_url': harness.RABBIT_URL,
                        'control_exchange': exchange,
                        'state_path': cls.dir},
            'database': {'connection': cls.db_url},
            'conductor': {'topic': topic},
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
            'database': {'connection': 'sqlite:///%s/trove.sqlite'
                                       % cls.dir},
            'keystone_authtoken': authtoken,
            'trove_upgrade': {'enabled': True,
                              'config_files': cls.tu_conf},
        })
        _run(cls._bin('trove-manage'), '--config-file', cls.trove_conf,
             'db_sync', cwd=cls.dir)
        cls.trove_api = subprocess.Popen(
            [cls._bin('trove-api'), '--config-file', cls.trove_conf],
            cwd=cls.dir, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        servers.wait_for_port(port, timeout=120, process=cls.trove_api)

    @classmethod
    def _tear_down(cls):
        api = getattr(cls, 'trove_api', None)
        if api is not None and api.poll() is None:
            os.killpg(api.pid, 15)
            try:
                api.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(api.pid, 9)
                api.wait()
        cls.keystone.cleanUp()
        _delete_from_broker(cls.bus[1], (cls.bus[0], cls.trove_exchange))
        shutil.rmtree(cls.dir, ignore_errors=True)

    # The harness, on the class's bus and database.

    def bus_names(self):
        return self.bus

    def database_fixture(self):
        return SharedDatabase(self.db_url)

    def setUp(self):
        super().setUp()
        self.addCleanup(_delete_from_broker, '%s.%s' % (
            agent_rpcapi.TOPIC_PREFIX, self.instance_id))
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
        self.assertEqual((405, 'GET, DELETE'),
                         (resp.status_code, resp.headers.get('Allow')))
        self.assertEqual([], db_upgrades.list_upgrades(
            self.context, filters={'instance_id': self.instance_id}))
