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

"""A real trove-api serving trove-upgrade, set up as Trove sets itself up.

One class shares one real Keystone and one real ``trove-api`` (trove
25.1.0 from PyPI, its schema made by ``trove-manage db_sync`` on SQLite)
from a cached virtualenv where trove-upgrade is installed non-editable
from this checkout, its extension enabled by trove.conf alone; every
other option of trove.conf is Trove's default (secure RPC on) but where
it listens, its bus, database, log and Keystone. The catalog has Trove's
``database`` service only. The administrator is Keystone's ``admin`` in
the ``admin`` project; the customer's project holds the instances, which
Trove's own code creates (``trove_db``), and a member. trove-upgrade's
own tables are a SQLite file migrated by ``trove-upgrade-manage db
sync``, shared by the extension and the test's real conductor and agent,
on the local RabbitMQ under exchanges of the class's own. The extension
and the conductors read trove-api's own database as ``[trove]
connection``.
"""

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

from tools.testbed import conffile
from trove_upgrade.common import rpc_interface
from trove_upgrade.db import common as db_common
from trove_upgrade.tests.functional.agent import harness
from trove_upgrade.tests.functional import keystone
from trove_upgrade.tests.functional import servers
from trove_upgrade.tests.functional.trove import trove_db
from trove_upgrade.tests.functional.trove_api import venv

TROVE_VERSION = '25.1.0'
AMQP_URL = 'amqp://guest:guest@127.0.0.1:5672//'
TIMEOUT = 180
MEMBER_PASSWORD = 'member-secret'


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


class TroveAPITestCase(harness.AgentTestCase):
    """Keystone, trove-api and the customer's project, for the class."""

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
            cls.customer_project = cls.keystone.create_project()
            cls.member = 'member-' + uuidutils.generate_uuid(dashed=False)
            cls.keystone.create_user(cls.member, MEMBER_PASSWORD,
                                     cls.customer_project,
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
        # No trove-conductor runs here to record the guest agent's
        # heartbeats: Trove's health gate is tested where one does
        # (functional/trove/test_health_gate.py).
        conf['trove'] = {'connection': self.trove_db_url,
                         'health_gate': False}
        return conf

    def provision_key(self, instance_id):
        # No key of trove-upgrade's own: the one Trove gave is used.
        return None

    def setUp(self):
        super().setUp()
        # A conductor topic set in the configuration is used as it is.
        self.topics.update([rpc_interface.agent_topic(self.instance_id),
                            self.conductor_topic])
        self.addDetail('trove-api.log', content.content_from_file(
            self.trove_log, buffer_now=False))

    def create_trove_instance(self):
        """The test's instance, created by Trove in the customer's project.

        Returns the directory holding the guest_info.conf Trove injected.
        """
        if self.instance_id not in self.trove_rows.injected:
            self.trove_rows.add_instance(
                'db-%s' % self.instance_id[:8],
                tenant_id=self.customer_project,
                instance_id=self.instance_id)
        conf_dir = os.path.join(self.tmp, 'trove-conf.d')
        self.trove_rows.write_guest_info(self.instance_id, conf_dir)
        return conf_dir

    # Clients.

    def session(self, user='admin', password=None, project_id=None):
        if user == 'admin':
            return self.keystone.session(
                'admin', self.keystone.admin_password,
                self.keystone.admin_project_id)
        return self.keystone.session(user, password, project_id)

    def member_session(self):
        return self.session(self.member, MEMBER_PASSWORD,
                            self.customer_project)

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
