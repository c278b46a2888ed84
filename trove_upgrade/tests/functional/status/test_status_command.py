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

"""trove-upgrade-status run as operators run it.

Each test writes the configuration the install guide describes into a
directory of its own standing for ``/etc/trove-upgrade``, prepares a SQLite
file with the real ``trove-upgrade-manage db sync``, and runs the real
``trove-upgrade-status`` executable against it and the real RabbitMQ. The
commands of the install guide are read from the guide itself, so the guide
cannot drift from what is tested.
"""

import datetime
import json
import os
import re
import shlex
import socket
import subprocess
import sys
import uuid

import fixtures
import kombu
from oslo_utils import timeutils
from oslo_utils import uuidutils
import sqlalchemy as sa

from tools.testbed import conffile
from trove_upgrade.common import context
from trove_upgrade.common import states
from trove_upgrade.db import agents as db_agents
from trove_upgrade.db import common as db_common
from trove_upgrade.db import models
from trove_upgrade.db import transitions as db_transitions
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.services import agent_rpcapi
from trove_upgrade.tests import base
from trove_upgrade.tests.functional import rabbit

# What [upgrade_levels] agent = latest sends: an agent below it is old.
LATEST_AGENT_API = agent_rpcapi.AgentAPI.RPC_API_VERSION

BIN = os.path.dirname(sys.executable)
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..',
                                    '..', '..'))
INSTALL_GUIDE = os.path.join(REPO, 'doc', 'source', 'install',
                             'install-guide.rst')
ETC = '/etc/trove-upgrade'
CHECKS = ['Database schema', 'Policy file', 'Message bus',
          'Agent RPC versions', 'Agent heartbeats', 'Stuck upgrades']
SUCCESS, WARNING, FAILURE = 0, 1, 2
# The user, password and database tools/test-setup.sh creates on MariaDB.
CITEST = 'openstack_citest'


def guide_command(program):
    """The install guide's one console command running ``program``."""
    with open(INSTALL_GUIDE) as guide:
        text = guide.read().replace('\\\n', ' ')
    found = re.findall(r'^\s*[#$] (%s .*)$' % re.escape(program), text,
                       re.MULTILINE)
    if len(found) != 1:
        raise AssertionError('the install guide has %d "%s" commands, '
                             'not one: %s' % (len(found), program, found))
    return shlex.split(found[0])


def closed_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


class StatusCommandTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        rabbit.check_reachable()
        self.etc = self.useFixture(fixtures.TempDir()).path
        self.state = self.useFixture(fixtures.TempDir()).path
        self.db_url = 'sqlite:///' + os.path.join(self.state,
                                                  'trove_upgrade.sqlite')
        # An exchange of its own, so that parallel tests do not meet.
        self.exchange = 'trove_upgrade_status_test_%s' % uuid.uuid4().hex
        self.addCleanup(self._delete_exchange)
        self.write_conf('trove-upgrade.conf', {
            'DEFAULT': {'state_path': self.state,
                        'control_exchange': self.exchange},
            'oslo_messaging_rabbit': {'amqp_auto_delete': 'true'},
        })
        self.write_conf('trove-upgrade.conf.d/10-database.conf',
                        {'database': {'connection': self.db_url}})
        self.write_conf('trove-upgrade.conf.d/10-messaging.conf',
                        {'DEFAULT': {'transport_url': rabbit.TRANSPORT_URL}})

    def _delete_exchange(self):
        amqp_url = 'amqp://' + rabbit.TRANSPORT_URL.split('://', 1)[1]
        with kombu.Connection(amqp_url) as connection:
            connection.default_channel.exchange_delete(self.exchange)

    def write_conf(self, name, sections):
        path = os.path.join(self.etc, name)
        conffile.write_conf(path, sections)
        return path

    def run_command(self, argv):
        """Run a console script of this venv, with ETC standing for etc."""
        argv = [os.path.join(BIN, argv[0])] + [
            self.etc + arg[len(ETC):] if arg.startswith(ETC) else arg
            for arg in argv[1:]]
        return subprocess.run(argv, capture_output=True, text=True,
                              timeout=120, check=False)

    def db_sync(self):
        result = self.run_command(guide_command('trove-upgrade-manage'))
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertIn('Database is at revision', result.stdout)

    def status(self):
        """Exit status and {check: (result, details)} of a JSON run."""
        result = self.run_command(
            guide_command('trove-upgrade-status') + ['--json'])
        self.assertEqual('', result.stderr)
        checks = json.loads(result.stdout)['checks']
        self.assertEqual(CHECKS, [c['check'] for c in checks])
        return result.returncode, {c['check']: (c['result'], c['details'])
                                   for c in checks}

    def assertStatus(self, exit_code, expected, fragments=()):
        """Exactly the checks in ``expected`` did not succeed."""
        code, checks = self.status()
        self.assertEqual(exit_code, code, checks)
        for name in CHECKS:
            self.assertEqual(expected.get(name, SUCCESS), checks[name][0],
                             '%s: %s' % (name, checks[name][1]))
        details = ' '.join(d for _, d in checks.values())
        for fragment in fragments:
            self.assertIn(fragment, details)
        return details

    def use_database(self):
        """This process's db API on the file the command reads."""
        facade = db_common.new_facade(connection=self.db_url)
        self.addCleanup(db_common.context_manager.patch_factory(facade))
        self.addCleanup(facade.dispose_pool)
        self.engine = facade.writer.get_engine()
        return context.get_admin_context()

    def backdate(self, model, column, key, value, seconds):
        with self.engine.begin() as connection:
            connection.execute(
                sa.update(model).where(key == value).values(
                    {column: timeutils.utcnow()
                     - datetime.timedelta(seconds=seconds)}))


class TestStatusCommand(StatusCommandTestCase):

    def test_the_install_guide_commands_on_a_new_installation(self):
        self.db_sync()

        result = self.run_command(guide_command('trove-upgrade-status'))

        self.assertEqual(0, result.returncode, result.stdout)
        self.assertEqual(6, result.stdout.count('Result: Success'),
                         result.stdout)
        for name in CHECKS:
            self.assertIn('Check: %s' % name, result.stdout)
        self.assertEqual('', result.stderr)

    def test_database_not_migrated_then_synced(self):
        details = self.assertStatus(
            FAILURE, {'Database schema': FAILURE,
                      'Agent RPC versions': FAILURE,
                      'Agent heartbeats': FAILURE,
                      'Stuck upgrades': FAILURE},
            ['has no schema. Run: trove-upgrade-manage db sync'])
        self.assertIn(self.db_url, details)

        self.db_sync()

        self.assertStatus(SUCCESS, {})

    def test_database_unreachable(self):
        url = 'mysql+pymysql://trove_upgrade:s3cret@127.0.0.1:%d/tu' % (
            closed_port())
        self.write_conf('trove-upgrade.conf.d/10-database.conf',
                        {'database': {'connection': url}})

        details = self.assertStatus(
            FAILURE, {'Database schema': FAILURE,
                      'Agent RPC versions': FAILURE,
                      'Agent heartbeats': FAILURE,
                      'Stuck upgrades': FAILURE},
            ['Cannot connect to the database at '
             'mysql+pymysql://trove_upgrade:***@127.0.0.1'])
        self.assertNotIn('s3cret', details)

    def test_database_refuses_the_password(self):
        """The real MariaDB of the tests, with a password it refuses."""
        right = 'mysql+pymysql://%s:%s@127.0.0.1:3306/%s' % ((CITEST,) * 3)
        engine = sa.create_engine(right)
        try:
            with engine.connect():
                pass
        except sa.exc.OperationalError as exc:
            if os.environ.get('TROVE_UPGRADE_TEST_REQUIRE_DATABASES') == '1':
                raise
            self.skipTest('MariaDB is not reachable: %s' % exc)
        finally:
            engine.dispose()
        wrong = right.replace(':%s@' % CITEST, ':not-the-s3cret@')
        self.write_conf('trove-upgrade.conf.d/10-database.conf',
                        {'database': {'connection': wrong}})

        details = self.assertStatus(
            FAILURE, {'Database schema': FAILURE,
                      'Agent RPC versions': FAILURE,
                      'Agent heartbeats': FAILURE,
                      'Stuck upgrades': FAILURE},
            ['Cannot connect to the database at mysql+pymysql://'
             '%s:***@127.0.0.1:3306/%s' % (CITEST, CITEST),
             'Access denied for user', '[database] connection (its user, '
             'password and database)'])
        self.assertNotIn('not-the-s3cret', details)
        self.assertNotIn('Traceback', details)

    def test_rabbitmq_unreachable(self):
        self.db_sync()
        port = closed_port()
        self.write_conf('trove-upgrade.conf.d/10-messaging.conf', {
            'DEFAULT': {'transport_url':
                        'rabbit://guest:s3cret@127.0.0.1:%d/' % port}})

        details = self.assertStatus(
            FAILURE, {'Message bus': FAILURE},
            ['Cannot send a message on rabbit://guest@127.0.0.1:%d/' % port,
             'Connection refused'])
        self.assertNotIn('s3cret', details)

    def test_rabbitmq_refuses_the_credentials(self):
        self.db_sync()
        self.write_conf('trove-upgrade.conf.d/10-messaging.conf', {
            'DEFAULT': {'transport_url':
                        'rabbit://guest:wrong@127.0.0.1:5672/'}})

        self.assertStatus(FAILURE, {'Message bus': FAILURE},
                          ['ACCESS_REFUSED'])

    def test_invalid_policy_file(self):
        self.db_sync()
        policy = os.path.join(self.etc, 'policy.yaml')
        with open(policy, 'w') as policy_file:
            policy_file.write('admin_api: "role:admin or"\n'
                              'trove_upgrade:upgrades:lsit: "role:reader"\n')
        self.write_conf('trove-upgrade.conf.d/30-policy.conf',
                        {'oslo_policy': {'policy_file': policy}})

        self.assertStatus(FAILURE, {'Policy file': FAILURE}, [
            policy, 'do not parse, and so deny everyone: admin_api',
            'trove_upgrade:upgrades:lsit'])

    def test_stale_agent(self):
        self.db_sync()
        ctxt = self.use_database()
        stale = uuidutils.generate_uuid()
        alive = uuidutils.generate_uuid()
        for instance_id in (stale, alive):
            db_agents.register_agent(ctxt, instance_id, {
                'rpc_api_version': LATEST_AGENT_API, 'state': 'RUNNING'})
        self.write_conf('trove-upgrade.conf.d/30-conductor.conf',
                        {'conductor': {'agent_down_time': '300'}})
        self.backdate(models.Agent, 'last_heartbeat_at',
                      models.Agent.instance_id, stale, 301)

        details = self.assertStatus(WARNING, {'Agent heartbeats': WARNING}, [
            '1 agent(s) sent no heartbeat in the last 300 seconds',
            stale])
        self.assertNotIn(alive, details)

    def test_agent_older_than_the_rpc_cap(self):
        self.db_sync()
        ctxt = self.use_database()
        old = uuidutils.generate_uuid()
        db_agents.register_agent(ctxt, old, {'rpc_api_version': '0.9',
                                             'state': 'RUNNING'})

        self.assertStatus(WARNING, {'Agent RPC versions': WARNING}, [
            'older than %s' % LATEST_AGENT_API, '%s (0.9)' % old])

        self.write_conf('trove-upgrade.conf.d/30-upgrade-levels.conf',
                        {'upgrade_levels': {'agent': 'auto'}})

        self.assertStatus(SUCCESS, {})

    def test_stuck_upgrade(self):
        self.db_sync()
        ctxt = self.use_database()
        self.write_conf('trove-upgrade.conf.d/30-conductor.conf', {
            'conductor': {'upgrade_timeout': '600',
                          'periodic_interval': '30'}})
        stuck = db_upgrades.create_upgrade(ctxt, {
            'instance_id': uuidutils.generate_uuid(),
            'instance_version': '1.0.1', 'strategy': 'local',
            'location': '/srv/packages/guest-1.0.1.tar'})
        db_transitions.transition_upgrade(ctxt, stuck['id'], states.SENT,
                                          'api')
        self.backdate(models.Upgrade, 'created_at', models.Upgrade.id,
                      stuck['id'], 631)

        self.assertStatus(WARNING, {'Stuck upgrades': WARNING}, [
            '%s (SENT)' % stuck['id'], 'Is trove-upgrade-conductor running?'])

    def test_table_output_of_a_failure(self):
        result = self.run_command(guide_command('trove-upgrade-status'))

        self.assertEqual(2, result.returncode, result.stdout)
        self.assertIn('Result: Failure', result.stdout)
        self.assertIn('trove-upgrade-manage db sync', result.stdout)
