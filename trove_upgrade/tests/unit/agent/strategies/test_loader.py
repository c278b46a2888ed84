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

"""Loading strategies: entry points, the allow list, drop-in settings."""

import os
from unittest import mock

from stevedore import driver

from trove_upgrade.agent.strategies import exception as exceptions
from trove_upgrade.agent.strategies import http
from trove_upgrade.agent.strategies import local
from trove_upgrade.agent.strategies import rsync
from trove_upgrade.agent.strategies import swift
from trove_upgrade.tests.unit.agent.strategies import base

SWIFT_CREDENTIALS = {'auth_version': '1',
                     'auth_url': 'http://127.0.0.1:8080/auth/v1.0',
                     'user': 'test:tester', 'key': 'testing'}


class TestLoad(base.StrategyTestCase):

    def test_every_strategy_is_installed(self):
        self.assertIsInstance(self.load('http'), http.HttpStrategy)
        self.assertIsInstance(self.load('local'), local.LocalStrategy)
        self.assertIsInstance(self.load('rsync'), rsync.RsyncStrategy)
        strategy = self.load('swift', **SWIFT_CREDENTIALS)
        self.assertIsInstance(strategy, swift.SwiftStrategy)
        self.assertEqual('swift', strategy.name)

    def test_strategy_not_allowed(self):
        self.flags(group='agent', allowed_strategies=['http', 'local'])

        error = self.assertRaises(
            exceptions.StrategyNotAllowedError, self.load,
            'rsync')

        self.assertEqual('Strategy "rsync" is not allowed on this agent; '
                         '[agent] allowed_strategies is: http, local.',
                         str(error))

    def test_strategy_not_installed(self):
        self.flags(group='agent', allowed_strategies=['jenkins'])

        error = self.assertRaises(
            exceptions.StrategyNotInstalledError, self.load,
            'jenkins')

        self.assertIn('no plugin of that name in entry point group '
                      'trove_upgrade.strategies', str(error))

    def test_plugin_that_cannot_be_imported(self):
        entrypoint = mock.Mock(value='broken.module:Strategy')

        def manager(namespace, name, invoke_on_load,
                    on_load_failure_callback):
            on_load_failure_callback(None, entrypoint,
                                     ImportError('No module named broken'))

        with mock.patch.object(driver, 'DriverManager', manager):
            error = self.assertRaises(exceptions.StrategyNotInstalledError,
                                      self.load, 'http')

        self.assertIn('broken.module:Strategy cannot be imported: No module '
                      'named broken', str(error))


class TestDropInSettings(base.StrategyTestCase):

    def test_missing_file_means_defaults(self):
        strategy = self.load('rsync')

        self.assertEqual('rsync', strategy.settings.rsync_path)
        self.assertEqual([], strategy.settings.extra_args)

    def test_settings_come_from_the_strategy_file(self):
        strategy = self.load('rsync', rsync_path='/opt/bin/rsync',
                             extra_args=['--ipv4', '--bwlimit=1m'])

        self.assertEqual('/opt/bin/rsync', strategy.settings.rsync_path)
        self.assertEqual(['--ipv4', '--bwlimit=1m'],
                         strategy.settings.extra_args)

    def test_other_strategies_files_are_not_read(self):
        self.load('local', allowed_dirs=['/srv/packages'])

        strategy = self.load('rsync')

        self.assertFalse(hasattr(strategy.settings, 'allowed_dirs'))
        self.assertEqual(['/srv/packages'],
                         self.load('local').settings.allowed_dirs)

    def test_invalid_value(self):
        error = self.assertRaises(exceptions.StrategyConfigError, self.load,
                                  'http', chunk_size='many')

        self.assertIn(os.path.join(self.config_dir, 'http.conf'), str(error))
        self.assertIn('chunk_size', str(error))

    def test_unparsable_file(self):
        with open(os.path.join(self.config_dir, 'local.conf'), 'w') as f:
            f.write('allowed_dirs = /tmp\n')

        self.assertRaises(exceptions.StrategyConfigError, self.load, 'local')

    def test_swift_requires_credentials(self):
        error = self.assertRaises(exceptions.StrategyConfigError, self.load,
                                  'swift', auth_version='1')

        self.assertIn('[swift] auth_url, user, key must be set', str(error))

    def test_http_tls_files_must_load(self):
        error = self.assertRaises(
            exceptions.StrategyConfigError, self.load, 'http',
            ca_file=os.path.join(self.config_dir, 'missing-ca.pem'))

        self.assertIn('cannot load the TLS files', str(error))
