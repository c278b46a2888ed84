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

"""The availability zone the agent reports, from Nova's metadata."""

import json
import os

import fixtures

from trove_upgrade.agent import nova_metadata
from trove_upgrade.common import rpc_interface
from trove_upgrade.tests import base

ZONE = rpc_interface.AVAILABILITY_ZONE_LABEL


class TestNovaMetadata(base.TestCase):

    def setUp(self):
        super().setUp()
        self.path = os.path.join(
            self.useFixture(fixtures.TempDir()).path, 'meta_data.json')
        self.logs = self.useFixture(fixtures.FakeLogger())

    def write(self, text):
        with open(self.path, 'w') as f:
            f.write(text)

    def test_zone_of_a_config_drive_metadata_file(self):
        # As Nova writes it (trimmed).
        self.write(json.dumps({
            'uuid': '2b7f9a4e-8c1d-4e3f-9a0b-1c2d3e4f5a6b',
            'availability_zone': 'az-east-1', 'hostname': 'db-1',
            'launch_index': 0, 'meta': {}}))
        self.assertEqual('az-east-1',
                         nova_metadata.availability_zone(self.path))

    def test_unusable_files_report_no_zone_and_say_why(self):
        self.assertIsNone(nova_metadata.availability_zone(self.path))
        self.assertIn('No Nova metadata at %s' % self.path,
                      self.logs.output)
        for text, reason in (
                ('{"availability_zone": ', 'cannot be read'),
                ('["az-1"]', 'no usable availability_zone'),
                ('{"hostname": "db-1"}', 'no usable availability_zone'),
                ('{"availability_zone": 7}', '(7)'),
                ('{"availability_zone": ""}', "('')"),
                ('{"availability_zone": "az\\n"}', 'no usable'),
                (json.dumps({'availability_zone': 'a' * 256}),
                 'no usable')):
            self.write(text)
            self.assertIsNone(nova_metadata.availability_zone(self.path),
                              text)
            self.assertIn(reason, self.logs.output.splitlines()[-1], text)

    def test_hostile_files_report_no_zone(self):
        # Each once raised out of the agent's start (RecursionError) or
        # was reported, and then no registration or heartbeat carrying
        # it could be sealed (a lone surrogate has no UTF-8 form).
        self.useFixture(fixtures.MockPatchObject(
            nova_metadata, 'MAX_METADATA_SIZE', 1000))
        for text, reason in (
                ('[' * 100000 + ']' * 100000, 'cannot be read'),
                ('{"availability_zone": "\\ud800"}', "('\\ud800')"),
                ('{"availability_zone": "a%s"}' % (' ' * 1000),
                 'more than 1000 bytes')):
            self.write(text)
            self.assertIsNone(nova_metadata.availability_zone(self.path),
                              text[:40])
            last = self.logs.output.splitlines()[-1]
            self.assertIn(reason, last, text[:40])
            self.assertLess(len(last), 500)

    def test_labels_add_the_zone_unless_given(self):
        self.write('{"availability_zone": "nova"}')
        self.flags(group='agent', labels={'group': 'blue'})
        self.assertEqual({'group': 'blue'}, nova_metadata.labels(self.conf))
        self.flags(group='agent', nova_metadata_file=self.path)
        self.assertEqual({'group': 'blue', ZONE: 'nova'},
                         nova_metadata.labels(self.conf))
        self.flags(group='agent', labels={ZONE: 'az-9'})
        self.assertEqual({ZONE: 'az-9'}, nova_metadata.labels(self.conf))

    def test_no_zone_beyond_the_most_labels(self):
        # A 65th label made the conductor refuse every registration.
        self.write('{"availability_zone": "nova"}')
        full = {'k%d' % i: 'v' for i in range(rpc_interface.MAX_LABELS)}
        self.flags(group='agent', labels=full, nova_metadata_file=self.path)
        self.assertEqual(full, nova_metadata.labels(self.conf))
