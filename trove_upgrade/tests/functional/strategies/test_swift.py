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

"""The swift strategy against a real Swift started by pifpaf."""

import os

from swiftclient import client as swift_client

from trove_upgrade.agent.strategies import exception as exceptions
from trove_upgrade.tests.functional import keystone
from trove_upgrade.tests.functional import servers
from trove_upgrade.tests.functional.strategies import base

PACKAGE = os.urandom(1024 * 1024 + 11)
MANIFEST = b'{"signed": {"version": "2.0.0"}}'


class SwiftStrategyTestCase(base.StrategyTestCase):

    strategy = 'swift'

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
        self.settings = dict(self.swift.strategy_conf(),
                             default_container='packages',
                             chunk_size=65536)

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

    def test_ranges_are_ranged_gets_read_back_to_back(self):
        ranges = [(0, 10), (500000, 70000), (len(PACKAGE) - 5, 5)]
        size = self._strategy().fetch_ranges(
            'swift://packages/guest/pkg-2.0.0.tar', ranges, self.dest)
        self.assertEqual(70015, size)
        self.assertEqual(b''.join(PACKAGE[a:a + n] for a, n in ranges),
                         self._read_dest())

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

        error = self.assertRaises(exceptions.AccessDeniedError, strategy.fetch,
                                  location, self.dest, len(PACKAGE))

        self.assertIn('outside the Swift account', str(error))
        self.assertEqual([], os.listdir(self.dest_dir))

    def test_missing_object(self):
        strategy = self._strategy()

        error = self.assertRaises(
            exceptions.ObjectNotFoundError, strategy.fetch,
            'swift://packages/guest/missing.tar',
            self.dest, 1024)

        self.assertIn('404', str(error))
        self.assertRaises(
            exceptions.ObjectNotFoundError, strategy.check_location,
            'swift://nocontainer/pkg.tar')
        self.assertEqual([], os.listdir(self.dest_dir))

    def test_size_cap(self):
        strategy = self._strategy()

        error = self.assertRaises(
            exceptions.SizeLimitExceededError, strategy.fetch,
            'swift://packages/guest/pkg-2.0.0.tar', self.dest,
            len(PACKAGE) - 1)

        self.assertIn('holds %d bytes' % len(PACKAGE), str(error))
        self.assertEqual([], os.listdir(self.dest_dir))

    def test_wrong_key(self):
        strategy = self._strategy(key='wrong')

        error = self.assertRaises(exceptions.AccessDeniedError,
                                  strategy.check_location,
                                  'swift://packages/guest/pkg-2.0.0.tar')

        self.assertIn('401', str(error))

    def test_swift_down_fails_after_retries(self):
        strategy = self._strategy(
            auth_url='http://127.0.0.1:%d/auth/v1.0' % servers.free_port())

        error = self.assertRaises(exceptions.DownloadError, strategy.fetch,
                                  'swift://packages/guest/pkg-2.0.0.tar',
                                  self.dest, len(PACKAGE))

        self.assertIn('after 2 attempt(s)', str(error))
        self.assertIn('Connection refused', str(error))


class KeystoneSwiftStrategyTestCase(base.StrategyTestCase):
    """Keystone v3 credentials through a keystoneauth session."""

    strategy = 'swift'
    download_retries = 0

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.keystone = keystone.Keystone()
        cls.keystone.setUp()
        cls.addClassCleanup(cls.keystone.cleanUp)
        cls.swift = servers.SwiftServer(keystone=cls.keystone)
        cls.swift.setUp()
        cls.addClassCleanup(cls.swift.cleanUp)
        cls.project_id = cls.keystone.create_project('packages')
        cls.keystone.create_user('reader', 'reader-secret', cls.project_id)
        conn = swift_client.Connection(
            session=cls.keystone.session('reader', 'reader-secret',
                                         cls.project_id),
            os_options={'region_name': keystone.REGION})
        conn.put_container('packages')
        conn.put_object('packages', 'pkg.tar', PACKAGE)
        cls.storage_url = conn.get_auth()[0]
        conn.close()

    def setUp(self):
        super().setUp()
        self.settings = {'auth_version': '3',
                         'auth_url': self.keystone.auth_url,
                         'user': 'reader', 'key': 'reader-secret',
                         'project_name': 'packages',
                         'user_domain_name': 'Default',
                         'project_domain_name': 'Default',
                         'region_name': keystone.REGION,
                         'endpoint_type': 'internalURL'}

    def test_fetch_with_keystone_session(self):
        strategy = self._strategy()

        strategy.check_location('swift://packages/pkg.tar')
        size = strategy.fetch('swift://packages/pkg.tar', self.dest,
                              len(PACKAGE))

        self.assertEqual(len(PACKAGE), size)
        self.assertEqual(PACKAGE, self._read_dest())

    def test_storage_url_location(self):
        strategy = self._strategy()

        self.assertIn('/v1/KEY_%s' % self.project_id, self.storage_url)
        size = strategy.fetch(self.storage_url + '/packages/pkg.tar',
                              self.dest, len(PACKAGE))

        self.assertEqual(len(PACKAGE), size)

    def test_other_project_account_refused(self):
        strategy = self._strategy()
        location = self.storage_url.replace(
            self.project_id, self.keystone.admin_project_id) + '/c/pkg.tar'

        error = self.assertRaises(exceptions.AccessDeniedError, strategy.fetch,
                                  location, self.dest, len(PACKAGE))

        self.assertIn('outside the Swift account', str(error))

    def test_wrong_password(self):
        strategy = self._strategy(key='wrong')

        error = self.assertRaises(exceptions.AccessDeniedError,
                                  strategy.check_location,
                                  'swift://packages/pkg.tar')

        self.assertIn('Keystone refused the credentials', str(error))

    def test_no_object_store_in_region(self):
        strategy = self._strategy(region_name='NoSuchRegion')

        error = self.assertRaises(exceptions.LocationUnreachableError,
                                  strategy.check_location,
                                  'swift://packages/pkg.tar')

        self.assertIn('endpoint', str(error))
