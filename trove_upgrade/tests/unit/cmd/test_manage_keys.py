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

"""trove-upgrade-manage instance-key set|rotate|list."""

import io
import os
import stat

import fixtures

from trove_upgrade.cmd import manage
from trove_upgrade.common import context
from trove_upgrade.common import sealing
from trove_upgrade.services import sealing_keys
from trove_upgrade.tests import base
from trove_upgrade.tests.fixtures import database

INSTANCE = '1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f'


class TestInstanceKeyCommands(base.TestCase):

    def setUp(self):
        super().setUp()
        db = self.useFixture(database.Database())
        self.conf_file = self.create_tempfiles(
            [('manage', '[database]\nconnection = %s\n' % db.url)],
            ext='.conf')[0]
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.context = context.get_admin_context()
        # Registered through the fixture, which unregisters it afterwards:
        # the global CONF must not keep a required sub-command.
        self.conf_fixture.register_cli_opt(manage.command_opt)

    def manage(self, *argv):
        out, err = io.StringIO(), io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', out))
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', err))
        code = manage.main(['--config-file', self.conf_file] + list(argv))
        return code, out.getvalue(), err.getvalue()

    def test_set_creates_a_key_file(self):
        path = os.path.join(self.dir, 'k')
        code, out, _ = self.manage('instance-key', 'set', INSTANCE,
                                   '--key-file', path)
        self.assertEqual(0, code)
        self.assertEqual(0o600, stat.S_IMODE(os.stat(path).st_mode))
        self.assertEqual(sealing.load_key_file(path, INSTANCE).keys,
                         sealing_keys.keyring(self.context, INSTANCE).keys)

    def test_an_instance_id_not_a_uuid_is_refused(self):
        # Its key was stored and its file written; no agent could use it.
        path = os.path.join(self.dir, 'k')
        code, _, err = self.manage('instance-key', 'set', 'notauuid',
                                   '--key-file', path)
        self.assertEqual(1, code)
        self.assertIn("instance ids are UUIDs, not 'notauuid'", err)
        self.assertFalse(os.path.exists(path))
        self.assertEqual([], sealing_keys.list_keys(self.context))

    def test_a_negative_grace_is_refused(self):
        sealing_keys.add_key(self.context, INSTANCE)
        before = sealing_keys.list_keys(self.context, INSTANCE)
        for grace in ('-1', 'soon'):
            path = os.path.join(self.dir, 'k')
            error = self.assertRaises(
                SystemExit, self.manage, 'instance-key', 'rotate', INSTANCE,
                '--output', path, '--grace', grace)
            self.assertEqual(2, error.code)
            self.assertFalse(os.path.exists(path))
        self.assertEqual(before, sealing_keys.list_keys(self.context,
                                                        INSTANCE))

    def test_set_imports_a_key_file(self):
        path = os.path.join(self.dir, 'k')
        keys = sealing.InstanceKeys(INSTANCE, [('b', sealing.generate_key()),
                                               ('a', sealing.generate_key())])
        sealing.dump_key_file(path, keys)
        sealing_keys.add_key(self.context, INSTANCE)
        self.assertEqual(0, self.manage('instance-key', 'set', INSTANCE,
                                        '--key-file', path)[0])
        stored = sealing_keys.keyring(self.context, INSTANCE)
        self.assertEqual(sorted(keys.keys), sorted(stored.keys))
        self.assertEqual('b', stored.sealing_key()[0])

    def test_rotate_and_list(self):
        first = os.path.join(self.dir, 'first')
        second = os.path.join(self.dir, 'second')
        self.manage('instance-key', 'set', INSTANCE, '--key-file', first)
        code, out, _ = self.manage('instance-key', 'rotate', INSTANCE,
                                   '--output', second, '--grace', '60')
        self.assertEqual(0, code)
        old = sealing.load_key_file(first, INSTANCE)
        new = sealing.load_key_file(second, INSTANCE)
        self.assertEqual(2, len(new.keys))
        self.assertEqual(old.keys[0], new.keys[1])
        code, out, _ = self.manage('instance-key', 'list')
        self.assertEqual(2, len(out.splitlines()))
        for key_id, material in new.keys:
            self.assertIn(key_id, out)
            self.assertNotIn(sealing._b64(material), out)
        self.assertIn('never', out)

    def test_rotate_without_key_fails(self):
        code, out, err = self.manage('instance-key', 'rotate', INSTANCE,
                                     '--output',
                                     os.path.join(self.dir, 'k'))
        self.assertEqual(1, code)
        self.assertIn('no key to rotate', err)
        self.assertFalse(os.path.exists(os.path.join(self.dir, 'k')))

    def test_set_refuses_a_file_for_another_instance(self):
        path = os.path.join(self.dir, 'k')
        sealing.dump_key_file(path, sealing.InstanceKeys(
            'other', [('a', sealing.generate_key())]))
        code, _, err = self.manage('instance-key', 'set', INSTANCE,
                                   '--key-file', path)
        self.assertEqual(1, code)
        self.assertIn('for instance other', err)
        self.assertEqual([], sealing_keys.list_keys(self.context))
