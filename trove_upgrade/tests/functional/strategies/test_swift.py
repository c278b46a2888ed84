"""The swift strategy against a real Swift started by pifpaf."""

import os

import fixtures

from trove_upgrade.agent import strategies
from trove_upgrade.agent.strategies import exceptions
from trove_upgrade.tests import base
from trove_upgrade.tests.functional import servers

PACKAGE = os.urandom(1024 * 1024 + 11)
MANIFEST = b'{"signed": {"version": "2.0.0"}}'


class SwiftStrategyTestCase(base.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.swift = servers.SwiftServer()
        cls.swift.setUp()
        cls.addClassCleanup(cls.swift.cleanUp)
        conn = cls.swift.connection()
        conn.put_container('packages')
        conn.put_object('packages', 'guest/pkg-2.0.0.tar', PACKAGE)
        conn.put_object('packages', 'guest/pkg-2.0.0.tar.manifest', MANIFEST)
        cls.storage_url = conn.get_auth()[0]
        conn.close()

    def setUp(self):
        super().setUp()
        self.config_dir = self.useFixture(fixtures.TempDir()).path
        self.dest_dir = self.useFixture(fixtures.TempDir()).path
        self.dest = os.path.join(self.dest_dir, 'pkg.tar')
        self.flags(group='agent', strategy_config_dir=self.config_dir,
                   download_retries=1, download_retry_delay=0,
                   download_timeout=30)
        self.settings = dict(self.swift.strategy_conf(),
                             default_container='packages',
                             chunk_size=65536)

    def _strategy(self, **settings):
        self.settings.update(settings)
        servers.write_strategy_conf(self.config_dir, 'swift', self.settings)
        return strategies.load('swift', self.conf)

    def _read_dest(self):
        with open(self.dest, 'rb') as f:
            return f.read()

    def test_fetch_package_and_manifest(self):
        strategy = self._strategy()
        location = 'swift://packages/guest/pkg-2.0.0.tar'

        strategy.check_location(location)
        size = strategy.fetch(location, self.dest, len(PACKAGE))
        manifest_size = strategy.fetch(location + '.manifest',
                                       self.dest + '.manifest', 1024)

        self.assertEqual(len(PACKAGE), size)
        self.assertEqual(PACKAGE, self._read_dest())
        self.assertEqual(len(MANIFEST), manifest_size)
        self.assertEqual(['pkg.tar', 'pkg.tar.manifest'],
                         sorted(os.listdir(self.dest_dir)))

    def test_default_container(self):
        strategy = self._strategy()

        size = strategy.fetch('swift:guest/pkg-2.0.0.tar', self.dest,
                              len(PACKAGE))

        self.assertEqual(PACKAGE, self._read_dest())
        self.assertEqual(len(PACKAGE), size)

    def test_storage_url_location_of_the_configured_account(self):
        strategy = self._strategy()
        location = self.storage_url + '/packages/guest/pkg-2.0.0.tar'

        strategy.check_location(location)
        strategy.fetch(location, self.dest, len(PACKAGE))

        self.assertEqual(PACKAGE, self._read_dest())

    def test_storage_url_of_another_account_refused(self):
        strategy = self._strategy()
        location = 'http://127.0.0.1:%d/v1/AUTH_other/packages/pkg.tar' % (
            self.swift.port)

        error = self.assertRaises(exceptions.AccessDenied, strategy.fetch,
                                  location, self.dest, len(PACKAGE))

        self.assertIn('outside the Swift account', str(error))
        self.assertEqual([], os.listdir(self.dest_dir))

    def test_missing_object(self):
        strategy = self._strategy()

        error = self.assertRaises(exceptions.ObjectNotFound, strategy.fetch,
                                  'swift://packages/guest/missing.tar',
                                  self.dest, 1024)

        self.assertIn('404', str(error))
        self.assertRaises(exceptions.ObjectNotFound, strategy.check_location,
                          'swift://nocontainer/pkg.tar')
        self.assertEqual([], os.listdir(self.dest_dir))

    def test_size_cap(self):
        strategy = self._strategy()

        error = self.assertRaises(
            exceptions.SizeLimitExceeded, strategy.fetch,
            'swift://packages/guest/pkg-2.0.0.tar', self.dest,
            len(PACKAGE) - 1)

        self.assertIn('holds %d bytes' % len(PACKAGE), str(error))
        self.assertEqual([], os.listdir(self.dest_dir))

    def test_wrong_key(self):
        strategy = self._strategy(key='wrong')

        error = self.assertRaises(exceptions.AccessDenied,
                                  strategy.check_location,
                                  'swift://packages/guest/pkg-2.0.0.tar')

        self.assertIn('401', str(error))

    def test_swift_down_fails_after_retries(self):
        strategy = self._strategy(
            auth_url='http://127.0.0.1:%d/auth/v1.0' % servers.free_port())

        error = self.assertRaises(exceptions.DownloadFailed, strategy.fetch,
                                  'swift://packages/guest/pkg-2.0.0.tar',
                                  self.dest, len(PACKAGE))

        self.assertIn('after 2 attempt(s)', str(error))
        self.assertIn('Connection refused', str(error))
