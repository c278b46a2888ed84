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

"""The agent loads its instance's keys at start, or refuses to start."""

import os

import fixtures

from trove_upgrade.agent import service
from trove_upgrade.common import sealing
from trove_upgrade.tests import base

INSTANCE = '7a6b5c4d-3e2f-4a1b-9c8d-7e6f5a4b3c2d'


class TestKeyLoading(base.TestCase):

    def setUp(self):
        super().setUp()
        self.path = os.path.join(
            self.useFixture(fixtures.TempDir()).path, 'instance.key')
        self.flags(group='agent', instance_id=INSTANCE,
                   guest_command='bin/g')

    def test_no_key_file_no_keyring(self):
        self.assertIsNone(service.load_instance_keys(self.conf))

    def test_require_sealed_needs_a_key_file(self):
        self.flags(group='agent', require_sealed=True)
        e = self.assertRaises(service.AgentConfigError, service.check_conf,
                              self.conf)
        self.assertIn('instance_key_file', str(e))

    def test_loads_the_instance_keys(self):
        keys = sealing.InstanceKeys(INSTANCE, [('k', sealing.generate_key())])
        sealing.dump_key_file(self.path, keys)
        self.flags(group='agent', instance_key_file=self.path,
                   require_sealed=True)
        service.check_conf(self.conf)
        self.assertEqual(keys.keys, service.load_instance_keys(self.conf).keys)

    def test_bad_key_files_stop_the_agent(self):
        self.flags(group='agent', instance_key_file=self.path)
        e = self.assertRaises(service.AgentConfigError,
                              service.load_instance_keys, self.conf)
        self.assertIn(self.path, str(e))
        sealing.dump_key_file(self.path, sealing.InstanceKeys(
            'other', [('k', sealing.generate_key())]))
        e = self.assertRaises(service.AgentConfigError,
                              service.load_instance_keys, self.conf)
        self.assertIn('for instance other', str(e))
