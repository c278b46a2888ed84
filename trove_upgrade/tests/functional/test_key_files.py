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

"""Key files another user planted are refused by every command reading one.

The commands run for real: trove-upgrade-manage against a real database,
trove-upgrade-package verify, trove-upgrade-agent. A directory of mode 1777
stands for /tmp; the files "planted" in it are given to ``nobody``, as
another user of the host would leave them. Giving a file away needs root.
"""

import base64
import os
import pwd
import stat
import unittest

from trove_upgrade.common import context
from trove_upgrade.common import sealing
from trove_upgrade.package_format import keys
from trove_upgrade.services import sealing_keys
from trove_upgrade.tests.fixtures import database
from trove_upgrade.tests.functional import test_hostile_arguments as hostile

INSTANCE = hostile.INSTANCE
OTHER_INSTANCE = '0d4e5f6a-7b8c-4d9e-8f0a-1b2c3d4e5f6a'


def _give_to_nobody(path):
    os.chown(path, pwd.getpwnam('nobody').pw_uid, -1, follow_symlinks=False)


@unittest.skipUnless(os.geteuid() == 0, 'planting a file needs root')
class TestPlantedInstanceKey(hostile.CommandTestCase):

    def setUp(self):
        super().setUp()
        db = self.useFixture(database.Database())
        self.config = self.path('manage.conf')
        with open(self.config, 'w') as f:
            f.write('[database]\nconnection = %s\n' % db.url)
        self.context = context.get_admin_context()
        self.shared = self.path('shared')
        os.mkdir(self.shared)
        os.chmod(self.shared, 0o1777)
        code, output = hostile.run(*self.manage(
            'instance-key', 'set', INSTANCE, '--key-file',
            self.path('genuine.key')))
        self.assertEqual(0, code, output)
        self.genuine = self.keys()

    def manage(self, *args):
        return ('trove-upgrade-manage', '--config-file', self.config) + args

    def keys(self):
        return [(k['key_id'], k['expires_at'])
                for k in sealing_keys.list_keys(self.context, INSTANCE)]

    def plant(self, name, mode=0o600):
        """A key file of the instance with a key the attacker knows."""
        path = os.path.join(self.shared, name)
        sealing.dump_key_file(path, sealing.InstanceKeys(
            INSTANCE, [(sealing.new_key_id(), sealing.generate_key())]))
        os.chmod(path, mode)
        return path

    def assertKeyFileRefused(self, expected, key_file):
        self.assertRefused(1, expected, *self.manage(
            'instance-key', 'set', INSTANCE, '--key-file', key_file))
        # Neither stored, nor the genuine keys expired.
        self.assertEqual(self.genuine, self.keys())

    def test_a_file_of_another_user_is_refused(self):
        # Stored, the genuine keys expired at once and the control plane
        # sealed with the planted key.
        planted = self.plant('%s.key' % INSTANCE)
        _give_to_nobody(planted)
        self.assertKeyFileRefused(
            'is owned by uid %d, not by uid 0 or root: another user may '
            'have planted it' % pwd.getpwnam('nobody').pw_uid, planted)

    def test_a_symbolic_link_is_refused(self):
        # Followed: a link in a shared directory chose the file imported.
        target = self.plant('target')
        link = os.path.join(self.shared, '%s.key' % INSTANCE)
        os.symlink(target, link)
        _give_to_nobody(link)
        self.assertKeyFileRefused('is a symbolic link', link)
        dangling = os.path.join(self.shared, 'dangling.key')
        os.symlink(self.path('nowhere'), dangling)
        self.assertKeyFileRefused('is a symbolic link', dangling)
        self.assertFalse(os.path.lexists(self.path('nowhere')))

    def test_modes_but_0600_and_0400_are_refused(self):
        for mode in (0o700, 0o640, 0o604):
            self.assertKeyFileRefused(
                'has mode %04o; it must be 0600 or 0400' % mode,
                self.plant('mode.key', mode))
        code, output = hostile.run(*self.manage(
            'instance-key', 'set', INSTANCE, '--key-file',
            self.plant('readonly.key', 0o400)))
        self.assertEqual(0, code, output)

    def test_a_new_key_file_in_a_shared_directory_is_the_callers(self):
        path = os.path.join(self.shared, 'new.key')
        code, output = hostile.run(*self.manage(
            'instance-key', 'set', OTHER_INSTANCE, '--key-file', path))
        self.assertEqual(0, code, output)
        status = os.lstat(path)
        self.assertEqual((0, 0o600, True),
                         (status.st_uid, stat.S_IMODE(status.st_mode),
                          stat.S_ISREG(status.st_mode)))
        self.assertEqual(['new.key'], os.listdir(self.shared))

    def test_a_master_key_file_others_can_read_is_refused(self):
        # Read with open(): any mode, any owner, through any link.
        master = self.path('master.key')
        with open(master, 'w') as f:
            f.write(base64.b64encode(os.urandom(32)).decode() + '\n')
        os.chmod(master, 0o644)
        with open(self.config, 'a') as f:
            f.write('[conductor]\ninstance_key_master_key_file = %s\n'
                    % master)
        self.assertRefused(
            1, 'cannot read the master key file %s: key file %s has mode '
            '0644' % (master, master), *self.manage(
                'instance-key', 'rotate', INSTANCE, '--output',
                self.path('rotated.key')))
        self.assertEqual(self.genuine, self.keys())
        self.assertFalse(os.path.lexists(self.path('rotated.key')))


@unittest.skipUnless(os.geteuid() == 0, 'planting a file needs root')
class TestPlantedPackageKeys(hostile.CommandTestCase):
    """Signing and decryption keys: trove-upgrade-package and the agent."""

    def setUp(self):
        super().setUp()
        self.wheels = self.path('wheels')
        os.mkdir(self.wheels)
        with open(os.path.join(self.wheels, 'agent-1.0-py3-none-any.whl'),
                  'wb') as out:
            out.write(os.urandom(3000))
        keys.write_signing_key(self.path('sk'), keys.generate_signing_key())
        keys.write_encryption_key(self.path('ek'),
                                  keys.generate_encryption_key())
        self.package = self.path('agent.pkg')

    def build(self):
        return ('trove-upgrade-package', 'build', self.wheels, '--version',
                'v1.0', '-o', self.package, '--signing-key', self.path('sk'),
                '--encryption-key', self.path('ek'))

    def verify(self):
        return ('trove-upgrade-package', 'verify', self.package,
                '--trusted-key', self.path('sk.pub'), '--encryption-key',
                self.path('ek'))

    def test_a_decryption_key_of_another_user_is_refused(self):
        code, output = hostile.run(*self.build())
        self.assertEqual(0, code, output)
        _give_to_nobody(self.path('ek'))
        self.assertRefused(1, 'InsecureKeyFileError: key file %s is owned '
                           'by uid' % self.path('ek'), *self.verify())

    def test_a_signing_key_others_can_read_is_refused(self):
        os.chmod(self.path('sk'), 0o644)
        self.assertRefused(1, 'InsecureKeyFileError: key file %s has mode '
                           '0644' % self.path('sk'), *self.build())
        self.assertFalse(os.path.exists(self.package))

    def test_a_public_key_may_be_read_by_anyone(self):
        code, output = hostile.run(*self.build())
        self.assertEqual(0, code, output)
        os.chmod(self.path('sk.pub'), 0o644)
        code, output = hostile.run(*self.verify())
        self.assertEqual(0, code, output)

    def start_agent(self, instance_key_file):
        os.makedirs(self.path('root'), exist_ok=True)
        config = self.path('agent.conf')
        with open(config, 'w') as f:
            f.write('[agent]\ninstance_id = %s\nguest_command = true\n'
                    'install_root = %s\ninstance_key_file = %s\n'
                    'trusted_key_files = %s\ndecryption_key_files = %s\n'
                    % (INSTANCE, self.path('root'), instance_key_file,
                       self.path('sk.pub'), self.path('ek')))
        return ('trove-upgrade-agent', '--config-file', config)

    def test_the_agent_refuses_a_linked_instance_key(self):
        instance_key = self.path('instance.key')
        sealing.dump_key_file(instance_key, sealing.InstanceKeys(
            INSTANCE, [(sealing.new_key_id(), sealing.generate_key())]))
        link = self.path('instance-link.key')
        os.symlink(instance_key, link)
        self.assertRefused(2, 'trove-upgrade-agent cannot start: key file '
                           '%s is a symbolic link' % link,
                           *self.start_agent(link))

    def test_the_agent_refuses_a_decryption_key_of_another_user(self):
        instance_key = self.path('instance.key')
        sealing.dump_key_file(instance_key, sealing.InstanceKeys(
            INSTANCE, [(sealing.new_key_id(), sealing.generate_key())]))
        _give_to_nobody(self.path('ek'))
        self.assertRefused(2, 'trove-upgrade-agent cannot start: key file '
                           '%s is owned by uid' % self.path('ek'),
                           *self.start_agent(instance_key))
