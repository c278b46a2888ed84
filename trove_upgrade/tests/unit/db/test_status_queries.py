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

"""The db API's read-only queries behind trove-upgrade-status."""

import datetime

import sqlalchemy as sa

from trove_upgrade.common import states
from trove_upgrade.db import agents as db_agents
from trove_upgrade.db import common as db_common
from trove_upgrade.db import models
from trove_upgrade.db import transitions as db_transitions
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.tests.unit.db import base as db_base

T0 = db_base.T0
A1 = '6f1c1a53-9d63-4c43-a0a1-6b1ad1f3c0a1'
A2 = '6f1c1a53-9d63-4c43-a0a1-6b1ad1f3c0a2'
A3 = '6f1c1a53-9d63-4c43-a0a1-6b1ad1f3c0a3'
A4 = '6f1c1a53-9d63-4c43-a0a1-6b1ad1f3c0a4'


def _ids(rows, key='id'):
    return [row[key] for row in rows]


class TestListUnfinishedUpgrades(db_base.DbTestCase):

    def test_lists_unfinished_upgrades_created_before_oldest_first(self):
        newer_old = self._create(instance_id=A2)
        self.now = T0 - datetime.timedelta(seconds=10)
        oldest = self._create(instance_id=A1)
        self.now = T0 + datetime.timedelta(seconds=5)
        recent = self._create(instance_id=A3)
        self.now = T0 + datetime.timedelta(seconds=60)

        found = db_upgrades.list_unfinished_upgrades(
            self.context, T0 + datetime.timedelta(seconds=1))

        self.assertEqual([oldest['id'], newer_old['id']], _ids(found))
        self.assertNotIn(recent['id'], _ids(found))
        self.assertEqual(states.PENDING, found[0]['status'])

    def test_leaves_out_final_states_and_changes_nothing(self):
        done = self._create(instance_id=A1)
        db_transitions.transition_upgrade(self.context, done['id'],
                                          states.CANCELLED, 'api')
        sent = self._create(instance_id=A2)
        db_transitions.transition_upgrade(self.context, sent['id'],
                                          states.SENT, 'api')
        self._advance(100)

        found = db_upgrades.list_unfinished_upgrades(self.context, self.now)

        self.assertEqual([sent['id']], _ids(found))
        status = db_upgrades.get_upgrade(self.context, sent['id'])['status']
        self.assertEqual(states.SENT, status)

    def test_empty_database(self):
        self.assertEqual(
            [], db_upgrades.list_unfinished_upgrades(self.context, self.now))


class TestListSilentAgents(db_base.DbTestCase):

    def _register(self, instance_id, **values):
        return db_agents.register_agent(self.context, instance_id, values)

    def test_lists_agents_whose_last_heartbeat_is_older(self):
        self._register(A2, state='running')
        self._register(A1, state='running')
        self._advance(30)
        self._register(A3, state='running')

        found = db_agents.list_silent_agents(
            self.context, T0 + datetime.timedelta(seconds=1))

        self.assertEqual([A1, A2], _ids(found, 'instance_id'))

    def test_an_agent_without_heartbeat_is_silent(self):
        self._register(A1, state='running')
        with db_common.context_manager.writer.using(self.context) as session:
            session.execute(sa.update(models.Agent)
                            .values(last_heartbeat_at=None))

        found = db_agents.list_silent_agents(self.context, T0)

        self.assertEqual([A1], _ids(found, 'instance_id'))

    def test_none_silent(self):
        self._register(A1, state='running')
        self.assertEqual([], db_agents.list_silent_agents(self.context, T0))


class TestListAgentsBelowRpcVersion(db_base.DbTestCase):

    def setUp(self):
        super().setUp()
        for instance_id, version in ((A1, '1.9'), (A2, '1.10'), (A3, '1.2'),
                                     (A4, None)):
            values = {'state': 'running'}
            if version is not None:
                values['rpc_api_version'] = version
            db_agents.register_agent(self.context, instance_id, values)

    def test_compares_versions_numerically(self):
        found = db_agents.list_agents_below_rpc_version(self.context, '1.10')

        self.assertEqual([A1, A3], _ids(found, 'instance_id'))
        self.assertEqual('1.9', found[0]['rpc_api_version'])

    def test_none_below(self):
        self.assertEqual(
            [], db_agents.list_agents_below_rpc_version(self.context, '1.2'))

    def test_agents_without_a_version_are_left_out(self):
        found = db_agents.list_agents_below_rpc_version(self.context, '9.0')

        self.assertEqual([A1, A2, A3], _ids(found, 'instance_id'))
