"""Where the API under a WSGI server finds its configuration."""

import os
from unittest import mock

import fixtures
import testtools

from trove_upgrade import wsgi


class TestConfigLocations(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path

    def test_neither_set_means_oslo_config_defaults(self):
        self.assertEqual((None, None, []), wsgi.config_locations({}))

    def test_config_dir_with_its_drop_in_directory(self):
        self.assertEqual(
            ([os.path.join(self.dir, 'trove-upgrade.conf')], [], []),
            wsgi.config_locations({'OS_TROVE_UPGRADE_CONFIG_DIR': self.dir}))
        drop_in = os.path.join(self.dir, 'trove-upgrade.conf.d')
        os.mkdir(drop_in)
        self.assertEqual(
            ([os.path.join(self.dir, 'trove-upgrade.conf')], [drop_in], []),
            wsgi.config_locations({'OS_TROVE_UPGRADE_CONFIG_DIR': self.dir}))

    def test_config_files_relative_to_the_dir_or_absolute(self):
        env = {'OS_TROVE_UPGRADE_CONFIG_DIR': self.dir,
               'OS_TROVE_UPGRADE_CONFIG_FILES': 'a.conf; /srv/b.conf;'}
        files, dirs, warnings = wsgi.config_locations(env)
        self.assertEqual([os.path.join(self.dir, 'a.conf'), '/srv/b.conf'],
                         files)
        self.assertEqual([], warnings)

    def test_config_files_alone_are_in_etc_trove_upgrade(self):
        files, _, _ = wsgi.config_locations(
            {'OS_TROVE_UPGRADE_CONFIG_FILES': 'api.conf'})
        self.assertEqual(['/etc/trove-upgrade/api.conf'], files)

    def test_deprecated_names_still_work_with_a_warning(self):
        env = {'TROVE_UPGRADE_CONFIG_FILES': '/srv/a.conf;/srv/b.conf',
               'TROVE_UPGRADE_CONFIG_DIRS': '/srv/a.conf.d'}
        files, dirs, warnings = wsgi.config_locations(env)
        self.assertEqual(['/srv/a.conf', '/srv/b.conf'], files)
        self.assertEqual(['/srv/a.conf.d'], dirs)
        self.assertEqual(
            ['environment variable TROVE_UPGRADE_CONFIG_FILES, replaced by '
             'OS_TROVE_UPGRADE_CONFIG_FILES.',
             'environment variable TROVE_UPGRADE_CONFIG_DIRS, replaced by '
             'OS_TROVE_UPGRADE_CONFIG_DIR.'], warnings)

    def test_new_names_win_over_deprecated_ones(self):
        env = {'OS_TROVE_UPGRADE_CONFIG_DIR': self.dir,
               'TROVE_UPGRADE_CONFIG_FILES': '/srv/a.conf'}
        files, dirs, warnings = wsgi.config_locations(env)
        self.assertEqual([os.path.join(self.dir, 'trove-upgrade.conf')],
                         files)
        self.assertEqual(['environment variable TROVE_UPGRADE_CONFIG_FILES, '
                          'ignored since OS_TROVE_UPGRADE_CONFIG_DIR is set.'],
                         warnings)


class TestInitApplication(testtools.TestCase):

    def test_deprecated_names_are_logged_once_logging_is_set_up(self):
        self.useFixture(fixtures.EnvironmentVariable(
            'TROVE_UPGRADE_CONFIG_FILES', '/srv/api.conf'))
        for name in ('OS_TROVE_UPGRADE_CONFIG_DIR',
                     'OS_TROVE_UPGRADE_CONFIG_FILES',
                     'TROVE_UPGRADE_CONFIG_DIRS'):
            self.useFixture(fixtures.EnvironmentVariable(name))
        logger = self.useFixture(fixtures.FakeLogger(name=wsgi.__name__))
        with mock.patch.object(wsgi, 'parse_config') as parse_config, \
                mock.patch.object(wsgi.deploy, 'loadapp') as loadapp:
            app = wsgi.init_application()

        parse_config.assert_called_once_with(
            [], default_config_files=['/srv/api.conf'],
            default_config_dirs=None)
        self.assertIs(loadapp.return_value, app)
        self.assertIn('Deprecated: environment variable '
                      'TROVE_UPGRADE_CONFIG_FILES, replaced by '
                      'OS_TROVE_UPGRADE_CONFIG_FILES.', logger.output)
