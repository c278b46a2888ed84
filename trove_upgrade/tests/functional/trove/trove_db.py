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
virtualenv of ``trove_release``), and rows the test writes as Trove would.
Trove's own encryption of an instance key runs in Trove's virtualenv, as
a process: nothing of Trove is imported here.
"""

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

# Trove's default [DEFAULT] inst_rpc_key_encr_key: this test's Trove keeps
# it, as many deployments do, so the control plane's default matches.
ENCR_KEY = 'emYjgHFqfXNB1NGehAFIUeoyw4V4XwWHEaKP'

# Read at import, before a test's fixtures point HOME at a temporary
# directory: the cache is the machine's, not the test's.
_CACHE = trove_release.cache_dir()

_ENCRYPT = ('import sys\n'
            'from trove.common import crypto_utils as cu\n'
            'print(cu.encode_data(cu.encrypt_data(sys.argv[1], '
            'sys.argv[2])))\n')


class TroveDatabase(fixtures.Fixture):
    """A MariaDB database holding Trove's schema, dropped at the end.

    ``url`` is its URL; ``add_instance``, ``set_task`` and ``add_backup``
    write what Trove would. Given a ``url``, the fixture writes into that
    database instead, whose schema a trove-api's own ``trove-manage
    db_sync`` made, and leaves it in place; given a ``venv``, Trove's code
    is run from that virtualenv, not from ``trove_release``'s.
    """

    def __init__(self, url=None, venv=None):
        super().__init__()
        self.url = url
        self.venv = venv

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

    def trove_encrypt(self, key):
        """``instances.encrypted_key`` of ``key``, by Trove's own code."""
        return subprocess.run(
            [os.path.join(self.venv, 'bin', 'python'), '-c', _ENCRYPT, key,
             ENCR_KEY], check=True, stdout=subprocess.PIPE,
            text=True).stdout.strip()

    def add_instance(self, name, tenant_id='tenant-a', task_id=NONE,
                     deleted=False, key=None, instance_id=None):
        """Insert an instance; ``key`` is its RPC key, stored encrypted."""
        instance_id = instance_id or uuidutils.generate_uuid()
        self._write(
            'INSERT INTO instances (id, name, tenant_id, task_id, '
            'task_description, deleted, datastore_version_id, '
            'encrypted_key, created) VALUES (:id, :name, :tenant, :task, '
            ':description, :deleted, :dsv, :key, :created)',
            id=instance_id, name=name, tenant=tenant_id, task=task_id,
            description='task %d' % task_id, deleted=deleted,
            dsv=self.datastore_version_id,
            key=self.trove_encrypt(key) if key else None,
            created=timeutils.utcnow())
        return instance_id

    def set_task(self, instance_id, task_id):
        self._write('UPDATE instances SET task_id = :task, task_description '
                    '= :description WHERE id = :id', task=task_id,
                    description='task %d' % task_id, id=instance_id)

    def add_backup(self, instance_id, state):
        backup_id = uuidutils.generate_uuid()
        self._write('INSERT INTO backups (id, name, state, instance_id, '
                    'deleted, tenant_id) VALUES (:id, :name, :state, '
                    ':instance, 0, :tenant)', id=backup_id, name='b',
                    state=state, instance=instance_id, tenant='tenant-a')
        return backup_id

    def set_backup_state(self, backup_id, state):
        self._write('UPDATE backups SET state = :state WHERE id = :id',
                    state=state, id=backup_id)
