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

"""The desired-version pass: dispatch by the rollout rules, pause, tags."""

import datetime
from unittest import mock

from oslo_utils import timeutils
from oslo_utils import uuidutils

from trove_upgrade.common import context
from trove_upgrade.common import states
from trove_upgrade.conductor import desired_reconciler
from trove_upgrade.db import agents as db_agents
from trove_upgrade.db import desired_versions as dv_db
from trove_upgrade.db import transitions as db_transitions
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.services import desired_versions
from trove_upgrade.services import packages as package_registry
from trove_upgrade.services import resends
from trove_upgrade.tests import base
from trove_upgrade.tests.fixtures import database
from trove_upgrade.tests.fixtures import packages


class TestDesiredReconciler(base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(database.Database())
        self.ctx = context.get_admin_context()
        self.agents = sorted(uuidutils.generate_uuid() for _ in range(4))
        for instance_id in self.agents:
            db_agents.register_agent(self.ctx, instance_id, {
                'guest_version': '1.0.0', 'labels': {'group': 'blue'}})
        self.package = packages.create(self.ctx)
        self.desired = desired_versions.create(self.ctx, {
            'name': 'blue', 'package_name': 'guest', 'version': '2.0.0',
            'selector': {'group': 'blue'}, 'canary': 1, 'max_in_flight': 2,
            'max_in_flight_kind': 'count', 'max_failures': 0,
            'max_failures_kind': 'count', 'per_agent_retries': 0,
            'agent_deadline': 600})
        self.agent_api = mock.Mock()
        self.agent_api.upgrade_many.return_value = {}

    def reconcile(self):
        desired_reconciler.run(self.ctx, 'test-conductor', self.agent_api)
        return dv_db.get_desired_version(self.ctx, self.desired['id'])

    def dispatches(self):
        return dv_db.list_dispatches(self.ctx, self.desired['id'])

    def test_canary_first_then_max_in_flight_with_owner_tags(self):
        self.reconcile()
        canary, = self.dispatches()
        self.assertEqual((self.agents[0], True, states.SENT),
                         (canary['instance_id'], canary['canary'],
                          canary['status']))
        upgrade = db_upgrades.get_upgrade(self.ctx, canary['upgrade_id'])
        self.assertEqual(
            ({'owner': 'desired_version:%s' % self.desired['id']},
             self.package['location'], '2.0.0'),
            (upgrade['metadata'], upgrade['location'],
             upgrade['instance_version']))
        self.reconcile()
        self.assertEqual(1, len(self.dispatches()))
        db_transitions.transition_upgrade(self.ctx, canary['upgrade_id'],
                                          states.SUCCESS, 'agent')
        self.reconcile()
        self.assertEqual([False, False],
                         [d['canary'] for d in self.dispatches()[1:]])

    def test_upgrade_of_a_conductor_killed_before_its_cast_is_sent(self):
        class Killed(BaseException):
            """kill -9 of the conductor, as far as the pass can tell."""

        self.agent_api.upgrade_many.side_effect = Killed
        self.assertRaises(Killed, self.reconcile)
        canary, = self.dispatches()
        self.assertEqual(states.PENDING, canary['status'])
        self.agent_api.upgrade_many.side_effect = None
        due = timeutils.utcnow() + datetime.timedelta(
            seconds=self.conf.conductor.resend_interval + 1)
        with mock.patch.object(timeutils, 'utcnow', return_value=due):
            self.assertEqual([canary['upgrade_id']],
                             resends.send_unclaimed_upgrades(
                                 self.ctx, self.agent_api))
        taken, = self.agent_api.upgrade_many.call_args.args[1]
        self.assertEqual((canary['upgrade_id'], 2),
                         (taken['id'], taken['send_count']))

    def test_failed_canary_pauses_with_an_event(self):
        self.reconcile()
        canary, = self.dispatches()
        db_transitions.transition_upgrade(self.ctx, canary['upgrade_id'],
                                          states.FAILED, 'agent')
        desired = self.reconcile()
        self.assertEqual('PAUSED', desired['status'])
        self.assertIn('during the canary phase', desired['status_detail'])
        self.assertEqual(
            [('created', 'api'), ('paused', 'conductor')],
            [(e['action'], e['source'])
             for e in dv_db.list_events(self.ctx, self.desired['id'])])

    def test_retired_package_pauses_it(self):
        package_registry.set_state(self.ctx, self.package['id'], 'retired')
        desired = self.reconcile()
        self.assertEqual('PAUSED', desired['status'])
        self.assertIn('is retired', desired['status_detail'])
        self.assertEqual([], self.dispatches())
        self.agent_api.upgrade_many.assert_not_called()
