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

"""Each check of trove-upgrade-status, for each result it can give."""

import datetime
import json
import os
import socket
from unittest import mock

from alembic import script as alembic_script
import fixtures
from oslo_messaging import conffixture
from oslo_policy import opts as policy_opts
from oslo_upgradecheck import upgradecheck
from oslo_utils import timeutils
from oslo_utils import uuidutils
import sqlalchemy as sa

from trove_upgrade.cmd import status
from trove_upgrade.common import context
from trove_upgrade.common import states
from trove_upgrade.db import agents as db_agents
from trove_upgrade.db import common as db_common
from trove_upgrade.db import migration
from trove_upgrade.db import transitions as db_transitions
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.services import agent_rpcapi
from trove_upgrade.tests import base
from trove_upgrade.tests.fixtures import database
from trove_upgrade.tests.fixtures import rpc as rpc_fixtures

SUCCESS = upgradecheck.Code.SUCCESS
WARNING = upgradecheck.Code.WARNING
FAILURE = upgradecheck.Code.FAILURE

T0 = datetime.datetime(2026, 3, 4, 5, 6, 7)


def closed_port():
    """A loopback port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


class StatusTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.database = self.useFixture(database.Database())
        self.tempdir = self.useFixture(fixtures.TempDir()).path
        self.checks = status.Checks()
        self.context = context.get_admin_context()

    def use_database(self, url):
        """Point the db API at another database, without retries."""
        self.flags(group='database', connection=url)
        facade = db_common.new_facade(connection=url, max_retries=0)
        self.addCleanup(db_common.context_manager.patch_factory(facade))
        self.addCleanup(facade.dispose_pool)
        return facade

    def use_unmigrated_database(self):
        return self.use_database(
            'sqlite:///' + os.path.join(self.tempdir, 'empty.sqlite'))

    def use_unreachable_database(self):
        self.use_database('sqlite:///' + os.path.join(
            self.tempdir, 'no-such-directory', 'db.sqlite'))

    def assertResult(self, code, fragments, result):
        self.assertEqual(code, result.code, result.details)
        for fragment in fragments:
            self.assertIn(fragment, result.details)


class TestDatabaseSchema(StatusTestCase):

    def test_success_at_head(self):
        head = migration.version()
        self.assertResult(SUCCESS, [head, 'newest'],
                          self.checks._check_database_schema())

    def test_failure_before_the_first_sync(self):
        self.use_unmigrated_database()

        result = self.checks._check_database_schema()

        self.assertResult(FAILURE, ['has no schema',
                                    'Run: trove-upgrade-manage db sync'],
                          result)

    def test_failure_behind_head_says_to_sync(self):
        current = migration.version()
        self.useFixture(fixtures.MockPatchObject(
            alembic_script.ScriptDirectory, 'get_current_head',
            return_value='0123456789ab'))

        result = self.checks._check_database_schema()

        self.assertResult(FAILURE, [current, 'not at 0123456789ab',
                                    'Run: trove-upgrade-manage db sync'],
                          result)

    def test_success_with_only_a_contraction_pending(self):
        current = migration.version()
        self.useFixture(fixtures.MockPatchObject(
            alembic_script.ScriptDirectory, 'get_current_head',
            return_value='0123456789ab'))
        self.useFixture(fixtures.MockPatchObject(
            migration, 'pending',
            return_value=[('0123456789ab', migration.CONTRACT)]))

        result = self.checks._check_database_schema()

        self.assertResult(SUCCESS, [current, 'which this release serves on',
                                    'pending: contract: 0123456789ab',
                                    'trove-upgrade-manage db contract'],
                          result)

    def test_failure_at_a_revision_this_release_does_not_know(self):
        with self.database.engine.begin() as connection:
            connection.execute(sa.text(
                "UPDATE alembic_version SET version_num = 'fedcba987654'"))

        result = self.checks._check_database_schema()

        self.assertResult(FAILURE, ['fedcba987654', 'newer release'], result)

    def test_failure_when_unreachable(self):
        self.use_unreachable_database()

        result = self.checks._check_database_schema()

        self.assertResult(FAILURE, ['Cannot connect to the database',
                                    'no-such-directory',
                                    '[database] connection'], result)

    def test_failure_for_a_driver_that_is_not_installed(self):
        self.use_database('postgresql+pg8000://tu:s3cret@127.0.0.1/tu')

        result = self.checks._check_database_schema()

        self.assertResult(FAILURE, ['Cannot connect to the database at '
                                    'postgresql+pg8000://tu:***@127.0.0.1/tu',
                                    "No module named 'pg8000'"], result)
        self.assertNotIn('s3cret', result.details)

    def test_failure_for_a_database_type_sqlalchemy_does_not_know(self):
        self.use_database('nosuchdb://tu:s3cret@127.0.0.1/tu')

        result = self.checks._check_database_schema()

        self.assertResult(FAILURE, ['Cannot connect to the database at '
                                    'nosuchdb://tu:***@127.0.0.1/tu',
                                    'nosuchdb'], result)

    def test_failure_for_a_connection_that_is_no_url(self):
        # SQLAlchemy's ValueError for the port: "The check could not run".
        for url in ('mysql+pymysql://tu:s3cret@[::1/tu', 'tu:s3cret@h/tu'):
            self.use_database(url)

            result = self.checks._check_database_schema()

            self.assertResult(FAILURE, ['[database] connection is not a '
                                        'database URL'], result)
            self.assertNotIn('s3cret', result.details)

    def test_failure_without_connection(self):
        self.flags(group='database', connection=None)

        result = self.checks._check_database_schema()

        self.assertResult(FAILURE, ['[database] connection is not set'],
                          result)

    def test_database_url_hides_the_password(self):
        self.flags(group='database',
                   connection='mysql+pymysql://tu:s3cret@db.example/tu')

        self.assertNotIn('s3cret', status.database_url())
        self.assertIn('tu:***@db.example/tu', status.database_url())


class TestPolicyFile(StatusTestCase):

    def setUp(self):
        super().setUp()
        policy_opts.set_defaults(self.conf)
        self.conf([], default_config_files=[], default_config_dirs=[])

    def use_policy(self, text, name='policy.yaml'):
        path = os.path.join(self.tempdir, name)
        with open(path, 'w') as policy_file:
            policy_file.write(text)
        self.flags(group='oslo_policy', policy_file=path)
        return path

    def test_success_without_a_policy_file(self):
        self.assertResult(SUCCESS, ['the defaults apply'],
                          self.checks._check_policy_file())

    def test_success_with_valid_overrides(self):
        path = self.use_policy(
            'admin_api: "role:admin or role:upgrade_admin"\n'
            'trove_upgrade:agents:list: "rule:admin_api or role:reader"\n'
            'deny: "!"\n'
            'trove_upgrade:agents:show: "rule:deny"\n')

        self.assertResult(SUCCESS, [path, 'is valid'],
                          self.checks._check_policy_file())

    def test_failure_for_a_rule_that_does_not_parse(self):
        self.use_policy('admin_api: "role:admin or"\n'
                        'trove_upgrade:upgrades:list: "(role:admin"\n')

        result = self.checks._check_policy_file()

        self.assertResult(FAILURE, ['do not parse', 'deny everyone',
                                    'admin_api, trove_upgrade:upgrades:list'],
                          result)

    def test_failure_for_a_reference_to_a_missing_rule(self):
        self.use_policy('trove_upgrade:upgrades:create: "rule:admin_apj"\n')

        result = self.checks._check_policy_file()

        self.assertResult(FAILURE, [
            'do not exist',
            'trove_upgrade:upgrades:create (refers to admin_apj)'], result)

    def test_failure_for_a_cycle(self):
        self.use_policy('admin_api: "rule:operators"\n'
                        'operators: "rule:admin_api"\n')

        self.assertResult(FAILURE, ['cycle'],
                          self.checks._check_policy_file())

    def test_warning_for_a_rule_nothing_uses(self):
        self.use_policy('trove_upgrade:upgrades:lsit: "role:reader"\n')

        result = self.checks._check_policy_file()

        self.assertResult(WARNING, ['trove_upgrade:upgrades:lsit',
                                    'misspelt', 'policy.yaml.sample'],
                          result)

    def test_unused_rules_are_named_with_the_failures(self):
        self.use_policy('admin_api: "role:admin and"\n'
                        'trove_upgrade:upgrades:lsit: "role:reader"\n')

        result = self.checks._check_policy_file()

        self.assertResult(FAILURE, ['admin_api',
                                    'trove_upgrade:upgrades:lsit'], result)

    def test_failure_for_a_file_that_is_not_a_mapping(self):
        for text in ('- admin_api\n', 'admin_api: [\n', 'admin_api: 5\n'):
            self.use_policy(text)

            result = self.checks._check_policy_file()

            self.assertResult(FAILURE, ['cannot be loaded',
                                        'YAML mapping'], result)

    def test_failure_for_a_json_policy_file(self):
        self.use_policy(json.dumps({'admin_api': 'role:admin'}),
                        name='policy.json')

        self.assertResult(FAILURE, ['JSON-formatted',
                                    'oslopolicy-convert-json-to-yaml'],
                          self.checks._check_policy_file())

    def test_warning_for_a_configured_file_that_is_missing(self):
        path = os.path.join(self.tempdir, 'missing.yaml')
        self.flags(group='oslo_policy', policy_file=path)

        self.assertResult(WARNING, [path, 'does not exist'],
                          self.checks._check_policy_file())


class TestMessageBus(StatusTestCase):

    def test_success_on_a_bus_that_takes_the_message(self):
        self.useFixture(rpc_fixtures.FakeTransport())

        self.assertResult(SUCCESS, ['fake:///', 'takes messages'],
                          self.checks._check_message_bus())

    def test_failure_with_the_url_without_password(self):
        url = 'rabbit://guest:s3cret@127.0.0.1:%d/' % closed_port()
        messaging_conf = self.useFixture(conffixture.ConfFixture(self.conf))
        messaging_conf.transport_url = url

        result = self.checks._check_message_bus()

        self.assertResult(FAILURE, [url.replace(':s3cret', ''),
                                    'Connection refused',
                                    '[DEFAULT] transport_url'], result)
        self.assertNotIn('s3cret', result.details)

    def test_failure_for_an_invalid_url(self):
        messaging_conf = self.useFixture(conffixture.ConfFixture(self.conf))
        messaging_conf.transport_url = 'not a url'

        self.assertResult(FAILURE, ['transport_url is invalid'],
                          self.checks._check_message_bus())

    def test_failure_for_a_url_urllib_cannot_split(self):
        # urllib's ValueError: "The check could not run".
        messaging_conf = self.useFixture(conffixture.ConfFixture(self.conf))
        messaging_conf.transport_url = 'rabbit://u:s3cret@[::1:5672/'

        result = self.checks._check_message_bus()

        self.assertResult(FAILURE, ['[DEFAULT] transport_url is invalid: '
                                    'Invalid IPv6 URL'], result)
        self.assertNotIn('s3cret', result.details)


class ClockTestCase(StatusTestCase):
    """The db API and the checks read a clock moved by hand."""

    def setUp(self):
        super().setUp()
        self.now = T0
        self.useFixture(fixtures.MockPatchObject(
            timeutils, 'utcnow', side_effect=lambda: self.now))

    def advance(self, seconds):
        self.now += datetime.timedelta(seconds=seconds)

    def register(self, rpc_api_version='1.0', instance_id=None):
        instance_id = instance_id or uuidutils.generate_uuid()
        db_agents.register_agent(self.context, instance_id,
                                 {'rpc_api_version': rpc_api_version,
                                  'state': 'RUNNING'})
        return instance_id


class TestAgentRpcVersions(ClockTestCase):
    # What ``[upgrade_levels] agent = latest`` sends, and the version
    # before it.
    LATEST = agent_rpcapi.AgentAPI.RPC_API_VERSION
    OLDER = '1.%d' % (int(LATEST.split('.')[1]) - 1)

    def test_success_without_agents(self):
        self.assertResult(SUCCESS, ['%s or newer' % self.LATEST],
                          self.checks._check_agent_rpc_versions())

    def test_success_when_every_agent_is_current(self):
        self.register(self.LATEST)
        self.register('1.99')

        self.assertResult(SUCCESS, ['%s or newer' % self.LATEST],
                          self.checks._check_agent_rpc_versions())

    def test_warning_lists_agents_below_what_latest_sends(self):
        self.register(self.LATEST)
        old = self.register(self.OLDER)

        result = self.checks._check_agent_rpc_versions()

        self.assertResult(WARNING, ['1 agent(s)',
                                    'older than %s' % self.LATEST,
                                    'agent = latest',
                                    '%s (%s)' % (old, self.OLDER),
                                    'auto'], result)

    def test_warning_against_an_explicit_cap(self):
        self.flags(group='upgrade_levels', agent='1.0')
        old = self.register('0.5')

        self.assertResult(WARNING, ['agent = 1.0', '%s (0.5)' % old],
                          self.checks._check_agent_rpc_versions())

    def test_a_release_name_resolves_to_its_version(self):
        self.flags(group='upgrade_levels', agent='2026.2')
        self.register('1.0')
        old = self.register('0.1')

        self.assertResult(WARNING, ['older than 1.0', 'agent = 2026.2', old],
                          self.checks._check_agent_rpc_versions())

    def test_success_with_auto_whatever_the_agents(self):
        self.flags(group='upgrade_levels', agent='auto')
        self.register('0.1')

        self.assertResult(SUCCESS, ['auto'],
                          self.checks._check_agent_rpc_versions())

    def test_failure_for_an_invalid_cap(self):
        self.flags(group='upgrade_levels', agent='1.x')

        self.assertResult(FAILURE, ['1.x', 'refuses to start'],
                          self.checks._check_agent_rpc_versions())

    def test_failure_on_an_unmigrated_database(self):
        self.use_unmigrated_database()

        self.assertResult(FAILURE, ['Cannot read the agents',
                                    '"Database schema" check'],
                          self.checks._check_agent_rpc_versions())

    def test_many_agents_are_counted_not_all_listed(self):
        ids = sorted(self.register('0.9') for _ in range(12))

        result = self.checks._check_agent_rpc_versions()

        self.assertResult(WARNING, ['12 agent(s)', ids[9], 'and 2 more'],
                          result)
        self.assertNotIn(ids[10], result.details)


class TestAgentHeartbeats(ClockTestCase):

    def setUp(self):
        super().setUp()
        self.flags(group='conductor', agent_down_time=120)

    def test_success_without_agents(self):
        self.assertResult(SUCCESS, ['120 seconds'],
                          self.checks._check_agent_heartbeats())

    def test_success_within_agent_down_time(self):
        self.register()
        self.advance(119)

        self.assertResult(SUCCESS, ['120 seconds'],
                          self.checks._check_agent_heartbeats())

    def test_warning_lists_silent_agents(self):
        silent = self.register()
        self.advance(100)
        alive = self.register()
        self.advance(21)

        result = self.checks._check_agent_heartbeats()

        self.assertResult(WARNING, [
            '1 agent(s)', 'last 120 seconds', 'agent_down_time',
            '%s (last heartbeat 2026-03-04 05:06:07)' % silent,
            'trove-upgrade-conductor'], result)
        self.assertNotIn(alive, result.details)

    def test_failure_on_an_unmigrated_database(self):
        self.use_unmigrated_database()

        self.assertResult(FAILURE, ['Cannot read the agents'],
                          self.checks._check_agent_heartbeats())


class TestStuckUpgrades(ClockTestCase):

    def setUp(self):
        super().setUp()
        self.flags(group='conductor', upgrade_timeout=600,
                   periodic_interval=30)

    def create(self, instance_id=None):
        return db_upgrades.create_upgrade(self.context, {
            'instance_id': instance_id or uuidutils.generate_uuid(),
            'instance_version': '1.0.1', 'strategy': 'local',
            'location': '/srv/packages/agent-1.0.1.tupkg'})

    def test_success_without_upgrades(self):
        self.assertResult(SUCCESS, ['630 seconds'],
                          self.checks._check_stuck_upgrades())

    def test_success_while_the_conductor_may_still_time_it_out(self):
        self.create()
        self.advance(629)

        self.assertResult(SUCCESS, ['No upgrade'],
                          self.checks._check_stuck_upgrades())

    def test_success_when_old_upgrades_are_final(self):
        upgrade = self.create()
        db_transitions.transition_upgrade(self.context, upgrade['id'],
                                          states.CANCELLED, 'api')
        self.advance(10000)

        self.assertResult(SUCCESS, ['No upgrade'],
                          self.checks._check_stuck_upgrades())

    def test_warning_lists_stuck_upgrades(self):
        stuck = self.create()
        db_transitions.transition_upgrade(self.context, stuck['id'],
                                          states.SENT, 'api')
        self.advance(600)
        recent = self.create()
        self.advance(31)

        result = self.checks._check_stuck_upgrades()

        self.assertResult(WARNING, [
            '1 upgrade(s)', '%s (SENT)' % stuck['id'],
            'Is trove-upgrade-conductor running?', 'TIMED_OUT'], result)
        self.assertNotIn(recent['id'], result.details)

    def test_failure_on_an_unmigrated_database(self):
        self.use_unmigrated_database()

        self.assertResult(FAILURE, ['Cannot read the upgrades'],
                          self.checks._check_stuck_upgrades())


class TestUnexpectedErrors(StatusTestCase):

    def test_an_error_no_check_expected_is_that_checks_failure(self):
        checks = dict(status.Checks._upgrade_checks)
        with mock.patch.object(migration, 'version',
                               side_effect=RuntimeError('disk on fire')):
            result = checks['Database schema'](self.checks)

        self.assertResult(FAILURE, ['The check could not run: '
                                    'RuntimeError: disk on fire'], result)


class TestMain(base.TestCase):

    def test_database_retries_are_off(self):
        with mock.patch.object(status.upgradecheck, 'main',
                               return_value=0) as upgradecheck_main:
            self.assertEqual(0, status.main(['upgrade', 'check']))

        self.assertEqual(0, self.conf.database.max_retries)
        upgradecheck_main.assert_called_once_with(
            self.conf, project='trove-upgrade', upgrade_command=mock.ANY,
            argv=['upgrade', 'check'])
