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

"""Trove's guest configuration, its precedence, and adoption of an image."""

import os

import fixtures

from tools.testbed import conffile
from trove_upgrade.agent import adopt
from trove_upgrade.agent import install
from trove_upgrade.agent import journal
from trove_upgrade.agent import trove_guest
from trove_upgrade.tests import base
from trove_upgrade.tests.fixtures import trove_venv


class TestTroveGuestConfig(base.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        conffile.write_conf(os.path.join(self.dir, 'guest_info.conf'), {
            'DEFAULT': {'guest_id': 'inst-1', 'datastore_manager': 'mysql'}})
        conffile.write_conf(
            os.path.join(self.dir, 'trove-guestagent.conf'), {
                'DEFAULT': {'transport_url': 'rabbit://u:p@10.0.0.1:5672/',
                            'control_exchange': 'trove',
                            'instance_rpc_encr_key': 'k' * 32},
                'mysql': {'device_path': '/dev/vdb'}})

    def test_reads_trove_names(self):
        guest = trove_guest.load(self.dir)
        self.assertEqual('inst-1', guest.guest_id)
        self.assertEqual('rabbit://u:p@10.0.0.1:5672/', guest.transport_url)
        self.assertEqual('trove', guest.control_exchange)
        self.assertEqual('guestagent.inst-1', guest.topic)

    def test_missing_directory_is_none(self):
        self.assertIsNone(trove_guest.load(os.path.join(self.dir, 'no')))

    def test_malformed_file_is_refused(self):
        with open(os.path.join(self.dir, 'zz.conf'), 'w') as f:
            f.write('no section header\n')
        self.assertRaises(trove_guest.TroveGuestConfigError,
                          trove_guest.load, self.dir)

    def test_trove_values_fill_unset_options_only(self):
        guest = trove_guest.load(self.dir)
        self.assertEqual(['guest_id', 'transport_url',
                          'instance_rpc_encr_key'],
                         trove_guest.apply(self.conf, guest))
        self.assertEqual('k' * 32, self.conf.instance_rpc_encr_key)
        self.assertEqual('inst-1', self.conf.agent.instance_id)
        self.assertEqual('rabbit://u:p@10.0.0.1:5672/',
                         self.conf.transport_url)
        # This agent's exchange is not Trove's.
        self.assertNotEqual('trove', self.conf.control_exchange)

    def test_own_options_win(self):
        guest = trove_guest.load(self.dir)
        trove_guest.apply(self.conf, None)
        self.conf.register_opts(trove_guest.messaging_transport
                                ._transport_opts)
        self.flags(instance_id='mine', group='agent')
        self.flags(transport_url='rabbit://a:b@127.0.0.1:5672/')
        self.flags(instance_rpc_encr_key='m' * 32)
        self.assertEqual([], trove_guest.apply(self.conf, guest))
        self.assertEqual('m' * 32, self.conf.instance_rpc_encr_key)
        self.assertEqual('mine', self.conf.agent.instance_id)
        self.assertEqual('rabbit://a:b@127.0.0.1:5672/',
                         self.conf.transport_url)

    def test_managed_file_enables_ping_once(self):
        self.assertTrue(trove_guest.write_managed_config(self.dir))
        self.assertFalse(trove_guest.write_managed_config(self.dir))
        guest = trove_guest.load(self.dir)
        self.assertTrue(guest.conf.rpc_ping_enabled)
        self.assertEqual(['guest_info.conf', 'trove-guestagent.conf',
                          trove_guest.MANAGED_FILE],
                         [os.path.basename(f) for f in guest.files])


class TestAdopt(base.TestCase):

    def setUp(self):
        super().setUp()
        tmp = self.useFixture(fixtures.TempDir()).path
        self.venv = os.path.join(tmp, 'opt', 'guest-agent-venv')
        script = trove_venv.make(self.venv)
        self.root = os.path.join(tmp, 'root')
        os.makedirs(self.root)
        self.journal = journal.UpgradeJournal(self.root)
        self.installs = install.InstallRoot(self.root, self.journal.lock)
        self.link = os.path.join(tmp, 'guest-agent')
        os.symlink(script, self.link)

    def _adopt(self, venv=None, version=None):
        return adopt.adopt(self.installs, self.journal, venv or self.venv,
                           'trove-guestagent', version=version,
                           program_link=self.link)

    def test_adopts_in_place_and_idempotently(self):
        self.assertEqual(('25.1.0', True), self._adopt())
        self.assertEqual('25.1.0', self.installs.current_version())
        self.assertTrue(self.installs.is_installed('25.1.0'))
        self.assertEqual(os.path.realpath(self.venv),
                         os.path.realpath(self.installs.path('25.1.0')))
        self.assertEqual('25.1.0', self.journal.read()['last_known_good'])
        self.assertEqual(os.path.join(self.root, 'current', 'bin',
                                      'trove-guestagent'),
                         os.readlink(self.link))
        self.assertEqual(('25.1.0', False), self._adopt())

    def test_unrecognised_layouts_are_refused(self):
        e = self.assertRaises(adopt.AdoptionRefusedError, self._adopt,
                              venv=self.root)
        self.assertIn('is not a virtualenv', str(e))
        os.unlink(os.path.join(self.venv, 'bin', 'trove-guestagent'))
        e = self.assertRaises(adopt.AdoptionRefusedError, self._adopt)
        self.assertIn('no executable bin/trove-guestagent', str(e))
        self.assertIsNone(self.installs.current_version())

    def test_other_managed_version_is_refused(self):
        self._adopt()
        e = self.assertRaises(adopt.AdoptionRefusedError, self._adopt,
                              version='9.9')
        self.assertIn('already manages version 25.1.0', str(e))

    def _upgrade_to(self, version):
        """What the agent leaves after installing and switching to it."""
        path = self.installs.path(version)
        os.makedirs(path)
        with open(os.path.join(path, install.MARKER), 'w') as f:
            f.write('%s\n' % version)
        self.installs.switch(version)

    def test_adopting_again_after_an_upgrade_changes_nothing(self):
        # The adoption before every start of the agent was refused once
        # the first upgrade had moved current on: the agent never started.
        self._adopt()
        self._upgrade_to('26.0.0')
        self.assertEqual(['25.1.0'], self.installs.prune(1, protect=()))
        link = os.readlink(self.link)
        self.assertEqual(('25.1.0', False), self._adopt())
        self.assertEqual('26.0.0', self.installs.current_version())
        self.assertFalse(os.path.lexists(self.installs.path('25.1.0')))
        self.assertEqual(link, os.readlink(self.link))

    def test_another_venv_is_refused_after_an_upgrade(self):
        self._adopt()
        self._upgrade_to('26.0.0')
        os.unlink(os.path.join(self.venv, install.MARKER))
        e = self.assertRaises(adopt.AdoptionRefusedError, self._adopt)
        self.assertIn('already manages version 26.0.0', str(e))

    def test_prune_removes_the_link_not_the_venv(self):
        self._adopt()
        self.installs.switch('25.1.0')
        with open(os.path.join(self.venv, install.MARKER)):
            pass
        os.makedirs(os.path.join(self.installs.versions_dir, '26.0.0'))
        with open(os.path.join(self.installs.versions_dir, '26.0.0',
                               install.MARKER), 'w') as f:
            f.write('26.0.0\n')
        self.installs.switch('26.0.0')
        self.assertEqual(['25.1.0'], self.installs.prune(1, protect=()))
        self.assertTrue(os.path.isdir(self.venv))
        self.assertFalse(os.path.lexists(self.installs.path('25.1.0')))
