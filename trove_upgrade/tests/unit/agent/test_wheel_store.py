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

"""The kept wheels: named by content, hashed again when taken, pruned."""

import hashlib
import os

import fixtures

from trove_upgrade.agent import wheel_store
from trove_upgrade.package_format import manifest as manifest_mod
from trove_upgrade.tests import base


class TestWheelStore(base.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.store = wheel_store.WheelStore(os.path.join(self.tmp, 'root'))

    def wheel(self, name, data):
        path = os.path.join(self.tmp, name)
        with open(path, 'wb') as f:
            f.write(data)
        return path, manifest_mod.FileEntry(
            name, len(data), hashlib.sha256(data).hexdigest())

    def test_added_wheels_are_held_and_taken(self):
        path, entry = self.wheel('a-1.0-py3-none-any.whl', b'a' * 100)
        kept, = self.store.add([path])
        self.assertEqual(os.path.join(self.store.path, entry.sha256,
                                      entry.name), kept)
        self.assertEqual([entry.sha256], self.store.held())
        dest = os.path.join(self.tmp, 'taken.whl')
        self.assertTrue(self.store.take(entry, dest))
        with open(dest, 'rb') as f:
            self.assertEqual(b'a' * 100, f.read())
        # Added again (another upgrade's copy): the kept file stays.
        self.assertEqual([kept], self.store.add([path]))

    def test_a_kept_wheel_whose_bytes_changed_is_dropped_not_taken(self):
        path, entry = self.wheel('a-1.0-py3-none-any.whl', b'a' * 100)
        kept, = self.store.add([path])
        os.unlink(path)
        with open(kept, 'r+b') as f:
            f.write(b'b')
        dest = os.path.join(self.tmp, 'taken.whl')
        self.assertFalse(self.store.take(entry, dest))
        self.assertFalse(os.path.exists(dest))
        self.assertEqual([], self.store.held())

    def test_a_wheel_not_held_is_not_taken(self):
        _, entry = self.wheel('a-1.0-py3-none-any.whl', b'a')
        self.assertFalse(self.store.take(entry, os.path.join(self.tmp, 'x')))

    def test_keep_only_drops_what_no_install_lists(self):
        install = os.path.join(self.tmp, 'install')
        os.mkdir(install)
        paths = [self.wheel('%s-1.0-py3-none-any.whl' % n, n.encode())[0]
                 for n in 'abc']
        kept = self.store.add(paths)
        wheel_store.write_record(install, kept[:2])
        listed = wheel_store.read_record(install)
        self.assertEqual(2, len(listed))
        self.assertEqual(1, len(self.store.keep_only(listed)))
        self.assertEqual(sorted(listed), self.store.held())

    def test_a_malformed_record_lists_nothing(self):
        install = os.path.join(self.tmp, 'install')
        os.mkdir(install)
        with open(os.path.join(install, wheel_store.RECORD), 'w') as f:
            f.write('{"not": "a list"}')
        self.assertEqual([], wheel_store.read_record(install))
