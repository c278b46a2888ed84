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

"""The real ``openstack`` command against the real API and a real Keystone.

One class shares one Keystone and one ``trove-upgrade-api`` process
(``auth_strategy = keystone``, its SQLite database created by
``trove-upgrade-manage db sync``, casting over the local RabbitMQ on an
exchange of its own). The API's root is registered in Keystone's catalog
under the ``guest-upgrade`` service type, so every command finds it there
exactly as an operator's would. No conductor or agent runs: an upgrade the
API sends stays SENT until it is cancelled.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import uuid

import fixtures
from keystoneauth1 import exceptions as ks_exc
import kombu
from oslo_db.sqlalchemy import enginefacade
from oslo_utils import uuidutils
from testtools import content

from tools.testbed import conffile
from trove_upgrade.common import context as tu_context
from trove_upgrade.common import exception
from trove_upgrade.db import agents as db_agents
from trove_upgrade.db import common as db_common
from trove_upgrade.db import desired_versions as dv_db
from trove_upgrade.db import transitions as db_transitions
from trove_upgrade.tests import base
from trove_upgrade.tests.fixtures import packages
from trove_upgrade.tests.functional import keystone
from trove_upgrade.tests.functional import servers

BIN = os.path.dirname(sys.executable)
RABBIT_URL = 'rabbit://guest:guest@127.0.0.1:5672/'
# The same broker, as kombu names it, to delete the test's exchange.
AMQP_URL = 'amqp://guest:guest@127.0.0.1:5672//'
TIMEOUT = 120
# The events of an upgrade the API recorded and cast, which RabbitMQ
# returned: no agent runs here.
SENT_EVENTS = [(None, 'PENDING'), ('PENDING', 'SENT'), ('SENT', 'SENT')]


def _run(*argv):
    proc = subprocess.run(argv, capture_output=True, text=True,
                          timeout=TIMEOUT)
    if proc.returncode != 0:
        raise RuntimeError('%s failed: %s' % (' '.join(argv), proc.stderr))


class TestOpenStackCLI(base.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.dir = tempfile.mkdtemp(prefix='osc-test-')
        cls.exchange = 'trove_upgrade_osc_test_%s' % uuid.uuid4().hex[:12]
        cls.keystone = keystone.Keystone()
        cls.keystone.setUp()
        try:
            cls._start_api()
            cls.keystone.register_service(cls.api_url)
            # Authenticated after the registration: its catalog has the API.
            cls.admin = cls.keystone.session(
                'admin', cls.keystone.admin_password,
                cls.keystone.admin_project_id)
            cls.member = 'member-' + uuidutils.generate_uuid(dashed=False)
            cls.member_project = cls.keystone.create_project()
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
    def _start_api(cls):
        cls.db_url = 'sqlite:///%s/trove_upgrade.sqlite' % cls.dir
        port = servers.free_port()
        cls.api_url = 'http://%s:%d' % (servers.LOOPBACK, port)
        cls.api_conf = os.path.join(cls.dir, 'trove-upgrade.conf')
        cls.api_log = os.path.join(cls.dir, 'api.log')
        conffile.write_conf(cls.api_conf, {
            'DEFAULT': {'transport_url': RABBIT_URL,
                        'control_exchange': cls.exchange,
                        'state_path': cls.dir,
                        'log_file': cls.api_log},
            'api': {'bind_host': servers.LOOPBACK, 'bind_port': port,
                    'auth_strategy': 'keystone'},
            'database': {'connection': cls.db_url},
            'keystone_authtoken': cls.keystone.authtoken_options(),
            # No agent runs: the upgrades go to instances without keys.
            'conductor': {'require_sealed': 'false'},
        })
        _run(os.path.join(BIN, 'trove-upgrade-manage'), '--config-file',
             cls.api_conf, 'db', 'sync')
        cls.api = subprocess.Popen(
            [os.path.join(BIN, 'trove-upgrade-api'), '--config-file',
             cls.api_conf], stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        servers.wait_for_port(port, process=cls.api)

    @classmethod
    def _tear_down(cls):
        api = getattr(cls, 'api', None)
        if api is not None and api.poll() is None:
            api.terminate()
            try:
                api.wait(20)
            except subprocess.TimeoutExpired:
                api.kill()
                api.wait()
        if api is not None:
            # The worker the launcher forked, whatever became of it.
            try:
                os.killpg(api.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        cls.keystone.cleanUp()
        with kombu.Connection(AMQP_URL) as connection:
            connection.default_channel.exchange_delete(cls.exchange)
        shutil.rmtree(cls.dir, ignore_errors=True)

    def setUp(self):
        super().setUp()
        self.home = self.useFixture(fixtures.TempDir()).path
        self.addDetail('api.log', content.content_from_file(
            self.api_log, buffer_now=False))
        facade = enginefacade.transaction_context()
        facade.configure(connection=self.db_url, sqlite_fk=True)
        self.addCleanup(facade.dispose_pool)
        self.addCleanup(db_common.context_manager.patch_factory(facade))

    def osc_command(self, *argv, user='admin', password=None,
                    project=('--os-project-name', 'admin')):
        """argv of the real openstack executable, credentials first."""
        return [os.path.join(BIN, 'openstack'),
                '--os-auth-url', self.keystone.auth_url,
                '--os-identity-api-version', '3',
                '--os-username', user,
                '--os-password', password or self.keystone.admin_password,
                *project,
                '--os-user-domain-id', 'default',
                '--os-project-domain-id', 'default',
                '--os-region-name', keystone.REGION] + list(argv)

    def env(self):
        """No OS_* variable nor clouds.yaml of the machine leaks in."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith('OS_')}
        env['HOME'] = self.home
        return env

    def openstack(self, *argv, **credentials):
        """Run ``openstack``; return (exit code, stdout, stderr)."""
        proc = subprocess.run(self.osc_command(*argv, **credentials),
                              capture_output=True, text=True,
                              env=self.env(), timeout=TIMEOUT)
        return proc.returncode, proc.stdout, proc.stderr

    def openstack_json(self, *argv):
        code, out, err = self.openstack(*argv, '-f', 'json')
        self.assertEqual(0, code, err)
        self.assertEqual('', err)
        return json.loads(out)

    def create(self, instance_id, *extra):
        return self.openstack(
            'database', 'upgrade', 'create', instance_id,
            '--instance-version', 'v1.0.1', '--strategy', 'swift',
            '--location', 'guest-packages/guest-agent-v1.0.1.pkg', *extra)

    def api_error(self, method, path, **kwargs):
        """The error detail the API itself answers, asked directly."""
        endpoint = {'service_type': keystone.SERVICE_TYPE,
                    'interface': 'public'}
        url = '/v1.0/%s/mgmt%s' % (self.keystone.admin_project_id, path)
        try:
            self.admin.request(url, method, endpoint_filter=endpoint,
                               **kwargs)
        except ks_exc.HttpError as exc:
            return exc.http_status, exc.response.json()['errors'][0]['detail']
        self.fail('%s %s succeeded' % (method, path))

    def test_create_list_show_cancel(self):
        instance_id = uuidutils.generate_uuid()

        code, out, err = self.create(instance_id, '--metadata',
                                     'ticket=OPS-42', '-f', 'json')

        self.assertEqual(0, code, err)
        created = json.loads(out)
        self.assertEqual(
            {'instance_id': instance_id, 'instance_version': 'v1.0.1',
             'strategy': 'swift',
             'location': 'guest-packages/guest-agent-v1.0.1.pkg',
             'metadata': {'ticket': 'OPS-42'}, 'allow_downgrade': False,
             'status': 'SENT', 'project_id': self.keystone.admin_project_id},
            {k: created[k] for k in (
                'instance_id', 'instance_version', 'strategy', 'location',
                'metadata', 'allow_downgrade', 'status', 'project_id')})
        upgrade_id = created['id']
        self.assertTrue(uuidutils.is_uuid_like(upgrade_id))

        listed = self.openstack_json('database', 'upgrade', 'list',
                                     '--instance', instance_id)
        self.assertEqual([{'ID': upgrade_id, 'Instance ID': instance_id,
                           'Instance Version': 'v1.0.1',
                           'Strategy': 'swift', 'Status': 'SENT',
                           'Created At': created['created_at']}], listed)
        everything = self.openstack_json('database', 'upgrade', 'list')
        self.assertIn(upgrade_id, [row['ID'] for row in everything])

        shown = self.openstack_json('database', 'upgrade', 'show',
                                    upgrade_id)
        self.assertEqual(SENT_EVENTS, [(e['from_state'], e['to_state'])
                                       for e in shown['events']])
        self.assertEqual({'api'}, {e['source'] for e in shown['events']})

        code, out, err = self.openstack('database', 'upgrade', 'cancel',
                                        upgrade_id)
        self.assertEqual((0, '', ''), (code, out, err))

        shown = self.openstack_json('database', 'upgrade', 'show',
                                    upgrade_id)
        self.assertEqual('CANCELLED', shown['status'])
        self.assertEqual(SENT_EVENTS + [('SENT', 'CANCELLED')],
                         [(e['from_state'], e['to_state'])
                          for e in shown['events']])
        cancelled = self.openstack_json(
            'database', 'upgrade', 'list', '--instance', instance_id,
            '--status', 'cancelled')
        self.assertEqual([upgrade_id], [row['ID'] for row in cancelled])

        # Cancelling a cancelled upgrade changes nothing.
        code, out, err = self.openstack('database', 'upgrade', 'cancel',
                                        upgrade_id)
        self.assertEqual((0, '', ''), (code, out, err))

    def test_cancel_of_a_started_upgrade_is_the_apis_409(self):
        code, out, err = self.create(uuidutils.generate_uuid(), '-f',
                                     'value', '-c', 'id')
        self.assertEqual(0, code, err)
        upgrade_id = out.strip()
        # What the conductor records when the agent claims the upgrade.
        db_transitions.transition_upgrade(tu_context.get_admin_context(),
                                          upgrade_id, 'DOWNLOADING', 'agent')
        status, detail = self.api_error('DELETE', '/upgrades/' + upgrade_id)

        code, out, err = self.openstack('database', 'upgrade', 'cancel',
                                        upgrade_id)

        self.assertEqual((1, '', 409), (code, out, status))
        self.assertEqual(['Failed to cancel upgrade %s: %s (HTTP 409)'
                          % (upgrade_id, detail),
                          '1 of 1 upgrades could not be cancelled.'],
                         [re.sub(r' \(Request-ID: req-\S+\)$', '', line)
                          for line in err.splitlines()])
        shown = self.openstack_json('database', 'upgrade', 'show',
                                    upgrade_id, '-c', 'status')
        self.assertEqual({'status': 'DOWNLOADING'}, shown)

    def test_table_output_shows_the_event_history(self):
        instance_id = uuidutils.generate_uuid()
        code, out, err = self.create(instance_id, '-f', 'value', '-c', 'id')
        self.assertEqual(0, code, err)

        code, out, err = self.openstack('database', 'upgrade', 'show',
                                        out.strip())

        self.assertEqual(0, code, err)
        self.assertRegex(out, r'\| events +\| \S+ - -> PENDING \(api\)')
        self.assertRegex(out, r'\| +\| \S+ PENDING -> SENT \(api\)')

    def test_agent_list_and_show(self):
        instance_id = uuidutils.generate_uuid()
        db_agents.register_agent(tu_context.get_admin_context(), instance_id, {
            'agent_version': '1.0.0', 'guest_version': 'v1.0.0',
            'rpc_api_version': '1.0', 'state': 'RUNNING',
            'labels': {'group': 'blue'}, 'host': 'guest-host-1'})

        listed = self.openstack_json('database', 'agent', 'list', '--long')

        row, = [r for r in listed if r['Instance ID'] == instance_id]
        self.assertEqual({'Instance ID': instance_id,
                          'Agent Version': '1.0.0',
                          'Guest Version': 'v1.0.0',
                          'RPC API Version': '1.0', 'State': 'RUNNING',
                          'Reachable': True, 'Host': 'guest-host-1',
                          'Labels': {'group': 'blue'}},
                         {k: v for k, v in row.items()
                          if k != 'Last Heartbeat'})
        shown = self.openstack_json('database', 'agent', 'show', instance_id)
        self.assertEqual(row['Last Heartbeat'], shown['last_heartbeat'])
        self.assertEqual({'group': 'blue'}, shown['labels'])

        missing = uuidutils.generate_uuid()
        status, detail = self.api_error('GET', '/agents/' + missing)
        code, out, err = self.openstack('database', 'agent', 'show', missing)
        self.assertEqual((1, '', 404), (code, out, status))
        self.assertTrue(err.startswith('%s (HTTP 404) (Request-ID: req-'
                                       % detail), err)

    def test_agent_delete_refused_while_upgrading_then_done(self):
        admin = tu_context.get_admin_context()
        instance_id = uuidutils.generate_uuid()
        db_agents.register_agent(admin, instance_id, {'guest_version': 'v1'})
        code, out, err = self.create(instance_id, '-f', 'value', '-c', 'id')
        self.assertEqual(0, code, err)
        upgrade_id = out.strip()
        status, detail = self.api_error('DELETE', '/agents/' + instance_id)

        code, out, err = self.openstack('database', 'agent', 'delete',
                                        instance_id)

        self.assertEqual((1, '', 409), (code, out, status))
        self.assertIn(upgrade_id, detail)
        self.assertIn('%s (HTTP 409)' % detail, err)
        self.assertEqual(instance_id, db_agents.get_agent(
            admin, instance_id)['instance_id'])

        code, out, err = self.openstack('database', 'upgrade', 'cancel',
                                        upgrade_id)
        self.assertEqual(0, code, err)
        code, out, err = self.openstack('database', 'agent', 'delete',
                                        instance_id)
        self.assertEqual((0, '', ''), (code, out, err))
        self.assertRaises(
            exception.AgentNotFoundError, db_agents.get_agent, admin,
            instance_id)
        # Its upgrade stays, as the instance's history.
        shown = self.openstack_json('database', 'upgrade', 'show',
                                    upgrade_id, '-c', 'status')
        self.assertEqual({'status': 'CANCELLED'}, shown)

    def test_bad_uuid_is_the_apis_400_and_records_nothing(self):
        status, detail = self.api_error('POST', '/upgrades', json={
            'instance_id': 'not-a-uuid', 'instance_version': 'v1.0.1',
            'strategy': 'swift',
            'location': 'guest-packages/guest-agent-v1.0.1.pkg'})

        code, out, err = self.create('not-a-uuid')

        self.assertEqual((1, '', 400), (code, out, status))
        self.assertIn('not-a-uuid', detail)
        self.assertTrue(err.startswith('%s (HTTP 400) (Request-ID: req-'
                                       % detail), err)
        self.assertNotIn('Traceback', err)
        listed = self.openstack_json('database', 'upgrade', 'list')
        self.assertNotIn('not-a-uuid',
                         [row['Instance ID'] for row in listed])

    def test_a_member_is_refused_with_the_apis_403(self):
        code, out, err = self.openstack(
            'database', 'agent', 'list', user=self.member,
            password='member-secret',
            project=('--os-project-id', self.member_project))

        self.assertEqual((1, ''), (code, out))
        self.assertIn('Policy does not allow trove_upgrade:agents:', err)
        self.assertIn('(HTTP 403)', err)

    def test_wait_follows_the_upgrade_until_it_is_cancelled(self):
        instance_id = uuidutils.generate_uuid()
        proc = subprocess.Popen(
            self.osc_command(
                'database', 'upgrade', 'create', instance_id,
                '--instance-version', 'v1.0.1', '--strategy', 'swift',
                '--location', 'guest-packages/guest-agent-v1.0.1.pkg',
                '--wait', '-f', 'json'),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=self.env())
        guard = threading.Timer(TIMEOUT, proc.kill)
        guard.start()
        self.addCleanup(guard.cancel)

        progress = [proc.stderr.readline() for _ in range(4)]
        self.assertTrue(progress[0].startswith('Waiting for upgrade '),
                        progress)
        upgrade_id = progress[0].split()[3]
        self.assertRegex(progress[1], r'^\S+ - -> PENDING \(api\)$')
        self.assertRegex(progress[2], r'^\S+ PENDING -> SENT \(api\)')
        self.assertRegex(progress[3],
                         r'^\S+ SENT -> SENT \(api\): RabbitMQ returned it')
        self.assertIsNone(proc.poll())

        code, out, err = self.openstack('database', 'upgrade', 'cancel',
                                        upgrade_id)
        self.assertEqual(0, code, err)
        out, err = proc.communicate()

        self.assertEqual(1, proc.returncode)
        self.assertEqual('CANCELLED', json.loads(out)['status'])
        lines = err.splitlines()
        self.assertRegex(lines[0], r'^\S+ SENT -> CANCELLED \(api\)')
        self.assertTrue(lines[-1].startswith(
            'Upgrade %s ended CANCELLED: ' % upgrade_id), lines)

    def test_deploy_by_package_and_desired_versions(self):
        """upgrade create --package, and a desired version's life."""
        admin = tu_context.get_admin_context()
        # The registry's row as a verified registration records it: the
        # verification itself is the packages tests' business.
        name = 'guest-' + uuidutils.generate_uuid(dashed=False)[:12]
        package = packages.create(admin, name)
        group = 'group-' + name
        instances = sorted(uuidutils.generate_uuid() for _ in range(2))
        for instance_id in instances:
            db_agents.register_agent(admin, instance_id, {
                'guest_version': '1.0.0', 'labels': {'group': group}})

        upgrade = self.openstack_json(
            'database', 'upgrade', 'create', instances[0],
            '--instance-version', '2.0.0', '--package', name)
        self.assertEqual(('http', package['location'], 'SENT'),
                         (upgrade['strategy'], upgrade['location'],
                          upgrade['status']))
        created = self.openstack_json(
            'database', 'desired', 'version', 'create', 'blue-' + name,
            '--package', name, '--package-version', '2.0.0',
            '--group', group, '--max-in-flight', '50%')
        desired_id = created['id']
        self.assertEqual((name, '2.0.0', 'ACTIVE', '50%', instances),
                         (created['package_name'], created['version'],
                          created['status'], created['max_in_flight'],
                          [a['instance_id'] for a in created['agents']]))
        changed = self.openstack_json(
            'database', 'desired', 'version', 'set', desired_id,
            '--max-failures', '1')
        self.assertEqual(1, changed['max_failures'])
        paused = self.openstack_json(
            'database', 'desired', 'version', 'pause', desired_id)
        self.assertEqual('PAUSED', paused['status'])
        resumed = self.openstack_json(
            'database', 'desired', 'version', 'resume', desired_id)
        self.assertEqual(['created', 'changed', 'paused', 'resumed'],
                         [e['action'] for e in resumed['events']])

        # Every page of targets (the CLI follows the next links).
        mine = [t for t in self.openstack_json('database', 'target', 'list')
                if t['Instance ID'] in instances]
        self.assertEqual(
            [(i, '1.0.0', '2.0.0', desired_id) for i in instances],
            [(t['Instance ID'], t['Running Version'], t['Version'],
              t['Owner']['id']) for t in mine])

        code, out, err = self.openstack('database', 'desired', 'version',
                                        'delete', desired_id)
        self.assertEqual((0, '', ''), (code, out, err))
        self.assertRaises(exception.DesiredVersionNotFoundError,
                          dv_db.get_desired_version, admin, desired_id)
