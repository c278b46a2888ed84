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

"""The rules on Trove's facts, with Trove's database mocked."""

from unittest import mock

from trove_upgrade.common import context
from trove_upgrade.common import exception
from trove_upgrade.services import trove_instances
from trove_upgrade.tests import base

A = '8a1f0c2e-3b4d-4e5f-9a6b-7c8d9e0f1a2b'
B = '1b2c3d4e-5f6a-4b7c-8d9e-0f1a2b3c4d5e'


def instance(instance_id, task_id=1, backup=False, deleted=False, **facts):
    values = {'id': instance_id, 'name': 'db', 'tenant_id': 't1',
              'task_id': task_id, 'task_description': 'd', 'deleted': deleted,
              'region_id': 'RegionOne', 'datastore': 'mysql',
              'datastore_version': '8.0', 'backup_running': backup}
    values.update(facts)
    return values


class TestRules(base.TestCase):

    def setUp(self):
        super().setUp()
        self.flags(group='trove', connection='mysql+pymysql://x/trove')

    def test_busy_tasks_and_backups(self):
        self.assertIsNone(trove_instances.busy_reason(instance(A)))
        # RESTART_REQUIRED: Trove waits for the operator, not busy.
        self.assertIsNone(trove_instances.busy_reason(instance(A, 7)))
        for task in (2, 3, 4, 5, 6, 8, 9, 0x0a, 0x0b, 0x0c, 0x59, 0x51):
            self.assertIn('Trove is working on instance',
                          trove_instances.busy_reason(instance(A, task)))
        self.assertIn('a backup', trove_instances.busy_reason(
            instance(A, backup=True)))

    @mock.patch('trove_upgrade.db.trove.find_instances')
    def test_resolve(self, find):
        admin = context.get_admin_context()
        find.return_value = [instance(A, name='db')]
        self.assertEqual(A, trove_instances.resolve_instance(admin, 'db'))
        find.assert_called_with('db', None)
        user = context.RequestContext(project_id='t1', is_admin=False)
        trove_instances.resolve_instance(user, 'db')
        find.assert_called_with('db', 't1')
        # An id wins over a name that happens to be the same text.
        find.return_value = [instance(A), instance(B, name=A)]
        self.assertEqual(A, trove_instances.resolve_instance(admin, A))
        find.return_value = [instance(A), instance(B)]
        self.assertRaises(exception.AmbiguousInstanceNameError,
                          trove_instances.resolve_instance, admin, 'db')
        find.return_value = [instance(A, deleted=True)]
        e = self.assertRaises(exception.InstanceNotFoundError,
                              trove_instances.resolve_instance, admin, A)
        self.assertIn('deleted', str(e))
        find.return_value = []
        self.assertRaises(exception.InstanceNotFoundError,
                          trove_instances.resolve_instance, admin, 'x')

    @mock.patch('trove_upgrade.db.trove.get_instances')
    def test_select_by_facts(self, get):
        get.return_value = {A: instance(A), B: instance(B, datastore='pg')}
        agents = [{'instance_id': A}, {'instance_id': B},
                  {'instance_id': 'not-in-trove'}]
        self.assertEqual([{'instance_id': A}], trove_instances.select(
            agents, {'datastore': 'mysql', 'region': 'RegionOne'}))
        self.assertEqual([], trove_instances.select(
            agents, {'datastore': 'mysql', 'tenant_id': 'other'}))

    def test_select_needs_trove(self):
        self.flags(group='trove', connection=None)
        self.assertRaises(exception.TroveNotConfiguredError,
                          trove_instances.select, [], {'datastore': 'x'})
