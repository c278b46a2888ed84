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

"""Giving up root, and root's take-over of what the step left, on real files.
"""

import hashlib
import os
import pwd
import subprocess
import sys

import fixtures

from trove_upgrade.agent import unprivileged
from trove_upgrade.package_format import manifest
from trove_upgrade.tests import base

DROP = '''
import os, sys
from trove_upgrade.agent import unprivileged
unprivileged.drop((int(sys.argv[1]), int(sys.argv[2])))
with open('/proc/self/status') as f:
    ids = [l.split()[1:] for l in f if l.startswith(('Uid:', 'Gid:'))]
print(ids, os.getgroups())
'''


class TestUnprivileged(base.TestCase):

    def setUp(self):
        super().setUp()
        if os.geteuid() != 0:
            self.skipTest('only root has a privilege to give up')
        self.nobody = pwd.getpwnam('nobody')
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.dir_fd = os.open(self.dir, os.O_RDONLY | os.O_DIRECTORY)
        self.addCleanup(os.close, self.dir_fd)

    def _file(self, name, data=b'wheel', owner=None):
        path = os.path.join(self.dir, name)
        with open(path, 'wb') as f:
            f.write(data)
        uid = self.nobody.pw_uid if owner is None else owner
        os.chown(path, uid, self.nobody.pw_gid)
        return path

    def _entry(self, name, data=b'wheel'):
        return manifest.FileEntry(name, len(data),
                                  hashlib.sha256(data).hexdigest())

    def test_ids_of_the_configured_user(self):
        self.assertEqual((self.nobody.pw_uid, self.nobody.pw_gid),
                         unprivileged.ids(self.conf))
        self.flags(group='agent', untrusted_user='')
        self.assertIsNone(unprivileged.ids(self.conf))

    def test_missing_or_root_user_is_refused(self):
        for name, reason in (('no-such-user-here', 'no such user'),
                             ('root', 'is root')):
            self.flags(group='agent', untrusted_user=name)
            error = self.assertRaises(unprivileged.UntrustedUserError,
                                      unprivileged.ids, self.conf)
            self.assertIn(reason, str(error))

    def test_drop_is_for_good(self):
        output = subprocess.run(
            [sys.executable, '-c', DROP, str(self.nobody.pw_uid),
             str(self.nobody.pw_gid)], capture_output=True, check=True,
            text=True).stdout
        uid, gid = str(self.nobody.pw_uid), str(self.nobody.pw_gid)
        self.assertEqual(str([[uid] * 4, [gid] * 4]) + ' []', output.strip())

    def test_checked_file_is_opened(self):
        self._file('a.whl')
        fd = unprivileged.open_owned(self.dir_fd, 'a.whl',
                                     self.nobody.pw_uid, 5)
        with open(fd, 'rb') as f:
            self.assertEqual(b'wheel', f.read())

    def test_links_fifos_other_owners_and_big_files_are_refused(self):
        target = self._file('target')
        os.symlink(target, os.path.join(self.dir, 'link.whl'))
        os.link(target, os.path.join(self.dir, 'hard.whl'))
        os.mkfifo(os.path.join(self.dir, 'fifo.whl'))
        self._file('root.whl', owner=0)
        self._file('big.whl', b'x' * 6)
        for name, reason in (('link.whl', 'symbolic links'),
                             ('hard.whl', 'it has 2 links'),
                             ('fifo.whl', 'not a regular file'),
                             ('root.whl', 'owned by uid 0'),
                             ('big.whl', 'more than the 5 allowed')):
            error = self.assertRaises(
                unprivileged.TakeOverError, unprivileged.open_owned,
                self.dir_fd, name, self.nobody.pw_uid, 5)
            self.assertIn(reason, str(error))

    def test_copy_matches_the_manifest(self):
        self._file('a.whl')
        dest = os.path.join(self.dir, 'copy')
        unprivileged.copy_verified(self.dir_fd, self._entry('a.whl'),
                                   self.nobody.pw_uid, dest)
        with open(dest, 'rb') as f:
            self.assertEqual(b'wheel', f.read())
        self.assertEqual(0, os.stat(dest).st_uid)

    def test_file_changed_after_its_check_is_refused(self):
        self._file('a.whl', b'WHEEL')
        error = self.assertRaises(
            unprivileged.TakeOverError, unprivileged.copy_verified,
            self.dir_fd, self._entry('a.whl'), self.nobody.pw_uid,
            os.path.join(self.dir, 'copy'))
        self.assertIn('changed after its verification', str(error))

    def test_a_path_for_a_name_is_refused(self):
        error = self.assertRaises(
            unprivileged.TakeOverError, unprivileged.copy_verified,
            self.dir_fd, self._entry('../a.whl'), self.nobody.pw_uid,
            os.path.join(self.dir, 'copy'))
        self.assertIn('not a file name', str(error))
