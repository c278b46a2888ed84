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

"""Reading instance keys: one at a time, many at once, and cached."""

from unittest import mock

import fixtures
from oslo_utils import fixture as utils_fixture

from trove_upgrade.common import context
from trove_upgrade.db import instance_keys as db_keys
from trove_upgrade.services import sealing_keys
from trove_upgrade.tests import base
from trove_upgrade.tests.fixtures import database

FIRST = '3e4f5a6b-7c8d-4e9f-8a0b-1c2d3e4f5a6b'
SECOND = '4f5a6b7c-8d9e-4f0a-9b1c-2d3e4f5a6b7c'
KEYLESS = '5a6b7c8d-9e0f-4a1b-8c2d-3e4f5a6b7c8d'


class TestKeyrings(base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(database.Database())
        self.context = context.get_admin_context()
        sealing_keys.add_key(self.context, FIRST)
        sealing_keys.add_key(self.context, SECOND)
        sealing_keys.add_key(self.context, SECOND, grace=3600)

    def test_many_at_once_are_each_as_read_alone(self):
        wanted = [FIRST, SECOND, KEYLESS]
        with mock.patch.object(db_keys, 'get_instance_keys_of',
                               wraps=db_keys.get_instance_keys_of) as read:
            found = sealing_keys.keyrings(self.context, wanted)
        read.assert_called_once()
        for instance_id in wanted:
            alone = sealing_keys.keyring(self.context, instance_id)
            self.assertEqual(alone.keys, found[instance_id].keys)
        self.assertEqual(2, len(found[SECOND].keys))
        self.assertFalse(found[KEYLESS])

    def test_expired_keys_are_left_out(self):
        sealing_keys.add_key(self.context, FIRST, grace=0)
        self.assertEqual(1, len(sealing_keys.keyrings(
            self.context, [FIRST])[FIRST].keys))


class TestKeyringCache(base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(database.Database())
        self.context = context.get_admin_context()
        self.clock = [100.0]
        self.read = self.useFixture(fixtures.MockPatchObject(
            sealing_keys, 'keyring', wraps=sealing_keys.keyring)).mock
        self.utc = self.useFixture(utils_fixture.TimeFixture())

    def cache(self, ttl):
        return sealing_keys.KeyringCache(ttl, timer=lambda: self.clock[0])

    def advance(self, seconds):
        """Move the cache's clock and the database's times together."""
        self.clock[0] += seconds
        self.utc.advance_time_seconds(seconds)

    def test_read_once_per_cache_time(self):
        cache = self.cache(5)
        self.assertFalse(cache.get(self.context, FIRST))
        sealing_keys.add_key(self.context, FIRST)
        self.clock[0] += 4.9
        self.assertFalse(cache.get(self.context, FIRST))
        self.clock[0] += 0.1
        self.assertTrue(cache.get(self.context, FIRST))
        self.assertEqual(2, self.read.call_count)

    def test_unchanged_keys_are_kept_past_the_cache_time(self):
        sealing_keys.add_key(self.context, FIRST)
        # Keys just added are looked at again while clocks may disagree.
        self.advance(sealing_keys.CLOCK_SKEW + 1)
        cache = self.cache(5)
        for _ in range(10):
            self.assertTrue(cache.get(self.context, FIRST))
            self.advance(60)
        self.assertEqual(1, self.read.call_count)

    def test_a_rotation_is_seen_at_the_next_look(self):
        sealing_keys.add_key(self.context, FIRST)
        sealing_keys.add_key(self.context, SECOND)
        self.advance(sealing_keys.CLOCK_SKEW + 1)
        cache = self.cache(5)
        old = cache.get(self.context, FIRST).keys
        cache.get(self.context, SECOND)
        sealing_keys.add_key(self.context, FIRST, grace=0)
        self.advance(4.9)
        self.assertEqual(old, cache.get(self.context, FIRST).keys)
        self.advance(0.1)
        new = cache.get(self.context, FIRST).keys
        self.assertEqual(1, len(new))
        self.assertNotEqual(old, new)
        cache.get(self.context, SECOND)
        self.assertEqual(3, self.read.call_count)

    def test_a_key_expiring_later_is_read_until_it_expired(self):
        sealing_keys.add_key(self.context, FIRST)
        sealing_keys.add_key(self.context, FIRST, grace=3600)
        cache = self.cache(5)
        for _ in range(3):
            self.assertEqual(2, len(cache.get(self.context, FIRST).keys))
            self.advance(5)
        self.assertEqual(3, self.read.call_count)

    def test_a_failed_look_forgets_everything(self):
        sealing_keys.add_key(self.context, FIRST)
        cache = self.cache(5)
        cache.get(self.context, FIRST)
        self.advance(5)
        with mock.patch.object(db_keys, 'instances_with_key_changes',
                               side_effect=RuntimeError('db down')):
            self.assertRaises(RuntimeError, cache.get, self.context, FIRST)
        cache.get(self.context, FIRST)
        self.assertEqual(2, self.read.call_count)

    def test_zero_reads_every_time(self):
        cache = self.cache(0)
        for _ in range(3):
            cache.get(self.context, FIRST)
        self.assertEqual(3, self.read.call_count)
