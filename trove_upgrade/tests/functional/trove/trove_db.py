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

"""A real Trove database for the Trove integration's functional tests.

Each test gets a new MariaDB database whose schema the real
``trove-manage db_sync`` of Trove 25.1.0 creates (from the cached
virtualenv of ``trove_release``). Instances are created by Trove's own
code (``create_instance.py``, run by the virtualenv's python as a process
of its own: nothing of Trove is imported here) with Trove's defaults,
secure RPC on, in a customer's project; the files Trove injects into the
guest (``guest_info.conf`` with the instance's RPC key) are kept for the
test to lay out. The test then changes a row's task, deleted flag or
backups as Trove would.
"""

import configparser
import io
import json
import os
import subprocess

import fixtures
from oslo_utils import timeutils
from oslo_utils import uuidutils
import sqlalchemy as sa

from tools.testbed import conffile
from tools.testbed import trove_release

RELEASE = '25.1.0'
_CITEST = 'openstack_citest'
_SERVER = 'mysql+pymysql://%s:%s@127.0.0.1' % (_CITEST, _CITEST)

# Trove's InstanceTasks codes (trove/instance/tasks.py).
NONE = 0x01
RESIZING = 0x04
BUILDING = 0x05

# The project the customers' instances are created in; the administrator
# calling trove-upgrade is in another.
CUSTOMER_PROJECT = 'customer-project-b'

# Where Trove's task manager injects guest_info.conf (its defaults
# injected_config_location and guest_info).
GUEST_INFO = '/etc/trove/conf.d/guest_info.conf'

# Read at import, before a test's fixtures point HOME at a temporary
# directory: the cache is the machine's, not the test's.
_CACHE = trove_release.cache_dir()

_CREATE = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                       'create_instance.py')


class TroveDatabase(fixtures.Fixture):
    """A MariaDB database holding Trove's schema, dropped at the end.

    ``url`` is its URL; ``add_instance``, ``set_task`` and ``add_backup``
    write what Trove would. Given a ``url``, the fixture writes into that
    database instead, whose schema a trove-api's own ``trove-manage
    db_sync`` made, and leaves it in place; given a ``venv``, Trove's code
    is run from that virtualenv, not from ``trove_release``'s.
    ``injected[instance_id]`` holds the files Trove injected into each
    instance's guest.
    """

    def __init__(self, url=None, venv=None):
        super().__init__()
        self.url = url
        self.venv = venv
        self.injected = {}

    def _setUp(self):
        if self.venv is None:
            self.useFixture(fixtures.EnvironmentVariable(
                'TROVE_UPGRADE_TEST_CACHE', _CACHE))
            self.venv = trove_release.trove_venv(RELEASE)
        if self.url is None:
            self._create()
        self.engine = sa.create_engine(self.url)
        self.addCleanup(self.engine.dispose)
        self.datastore_version_id = self._add_datastore('mysql', '8.0')

    def _create(self):
        name = 'trove_%s' % uuidutils.generate_uuid(dashed=False)
        admin = sa.create_engine(_SERVER + '/')
        self.addCleanup(admin.dispose)
        with admin.connect() as connection:
            connection.execute(sa.text('CREATE DATABASE %s' % name))
        self.addCleanup(self._drop, admin, name)
        self.url = '%s/%s' % (_SERVER, name)
        directory = self.useFixture(fixtures.TempDir()).path
        config = os.path.join(directory, 'trove.conf')
        conffile.write_conf(config, {'database': {'connection': self.url}})
        subprocess.run(
            [os.path.join(self.venv, 'bin', 'trove-manage'),
             '--config-file', config, 'db_sync'],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    @staticmethod
    def _drop(admin, name):
        with admin.connect() as connection:
            connection.execute(sa.text('DROP DATABASE IF EXISTS %s' % name))

    def _write(self, sql, **params):
        with self.engine.begin() as connection:
            connection.execute(sa.text(sql), params)

    def _add_datastore(self, datastore, version):
        ds_id = uuidutils.generate_uuid()
        dsv_id = uuidutils.generate_uuid()
        self._write('INSERT INTO datastores (id, name) VALUES (:id, :name)',
                    id=ds_id, name=datastore)
        # registry_ext and repl_strategy: what trove-manage
        # datastore_version_update writes for MySQL.
        self._write('INSERT INTO datastore_versions (id, datastore_id, name, '
                    'version, manager, active, registry_ext, repl_strategy) '
                    'VALUES (:id, :ds, :name, :name, :ds_name, 1, :ext, '
                    ':repl)', id=dsv_id, ds=ds_id, name=version,
                    ds_name=datastore,
                    ext='trove.guestagent.datastore.mysql.manager.Manager',
                    repl='trove.guestagent.strategies.replication.'
                    'mysql_gtid.MysqlGTIDReplication')
        return dsv_id

    def _trove_conf(self, secure_rpc):
        """A trove.conf of Trove's defaults but the database (and RPC)."""
        if not hasattr(self, '_conf_dir'):
            self._conf_dir = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(self._conf_dir, 'trove-%s.conf' % secure_rpc)
        values = {'database': {'connection': self.url}}
        if not secure_rpc:
            values['DEFAULT'] = {'enable_secure_rpc_messaging': False}
        conffile.write_conf(path, values)
        return path

    def add_instance(self, name, tenant_id=CUSTOMER_PROJECT, task_id=NONE,
                     deleted=False, instance_id=None, secure_rpc=True,
                     slave_of_id=None, cluster_id=None):
        """Create an instance by Trove's code; its id.

        ``secure_rpc=False`` is a Trove that turned its default
        ``enable_secure_rpc_messaging`` off: the instance has no key.
        ``slave_of_id`` is its replication source, ``cluster_id`` its
        cluster (``add_cluster``), written as Trove records them.
        """
        proc = subprocess.run(
            [os.path.join(self.venv, 'bin', 'python'), _CREATE,
             self._trove_conf(secure_rpc), tenant_id, name,
             self.datastore_version_id] + ([instance_id] if instance_id
                                           else []),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if proc.returncode != 0:
            raise RuntimeError('Trove could not create instance %s: %s'
                               % (name, proc.stderr[-3000:]))
        created = json.loads(proc.stdout.splitlines()[-1])
        instance_id = created['id']
        self.injected[instance_id] = created['files']
        if slave_of_id or cluster_id:
            self._write('UPDATE instances SET slave_of_id = :source, '
                        'cluster_id = :cluster WHERE id = :id',
                        source=slave_of_id, cluster=cluster_id,
                        id=instance_id)
        if task_id != NONE:
            self.set_task(instance_id, task_id)
        if deleted:
            self._write('UPDATE instances SET deleted = 1, deleted_at = '
                        ':now WHERE id = :id', now=timeutils.utcnow(),
                        id=instance_id)
        return instance_id

    def guest_info(self, instance_id):
        """The ``[DEFAULT]`` of the guest_info.conf Trove injected."""
        parser = configparser.ConfigParser()
        parser.read_file(io.StringIO(self.injected[instance_id][GUEST_INFO]))
        return dict(parser['DEFAULT'])

    def instance_key(self, instance_id):
        """The RPC key Trove gave the instance, as its guest reads it."""
        return self.guest_info(instance_id).get('instance_rpc_encr_key')

    def write_guest_info(self, instance_id, conf_dir):
        """Write guest_info.conf into ``conf_dir`` as Trove injected it."""
        os.makedirs(conf_dir, exist_ok=True)
        path = os.path.join(conf_dir, os.path.basename(GUEST_INFO))
        with open(path, 'w') as f:
            f.write(self.injected[instance_id][GUEST_INFO])
        return path

    def add_cluster(self, name, tenant_id=CUSTOMER_PROJECT):
        """Insert a cluster, as Trove's cluster create does; its id."""
        cluster_id = uuidutils.generate_uuid()
        now = timeutils.utcnow()
        self._write(
            'INSERT INTO clusters (id, created, updated, name, task_id, '
            'tenant_id, datastore_version_id, deleted) VALUES (:id, :now, '
            ':now, :name, :task, :tenant, :dsv, 0)', id=cluster_id, now=now,
            name=name, task=NONE, tenant=tenant_id,
            dsv=self.datastore_version_id)
        return cluster_id

    def set_replication_source(self, instance_id, source_id):
        """What Trove's promote-to-replica-source writes for one instance."""
        self._write('UPDATE instances SET slave_of_id = :source WHERE id = '
                    ':id', source=source_id, id=instance_id)

    def set_task(self, instance_id, task_id):
        self._write('UPDATE instances SET task_id = :task, task_description '
                    '= :description WHERE id = :id', task=task_id,
                    description='task %d' % task_id, id=instance_id)

    def add_backup(self, instance_id, state):
        backup_id = uuidutils.generate_uuid()
        self._write('INSERT INTO backups (id, name, state, instance_id, '
                    'deleted, tenant_id) VALUES (:id, :name, :state, '
                    ':instance, 0, :tenant)', id=backup_id, name='b',
                    state=state, instance=instance_id,
                    tenant=CUSTOMER_PROJECT)
        return backup_id

    def set_backup_state(self, backup_id, state):
        self._write('UPDATE backups SET state = :state WHERE id = :id',
                    state=state, id=backup_id)
