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

"""Location formats: what each strategy accepts, and why it refuses."""

from trove_upgrade.agent.strategies import exception as exceptions
from trove_upgrade.tests.unit.agent.strategies import base
from trove_upgrade.tests.unit.agent.strategies import test_loader


class LocationTestCase(base.StrategyTestCase):
    strategy_name = None
    settings = {}

    def setUp(self):
        super().setUp()
        self.strategy = self.load(self.strategy_name, **self.settings)

    def assertInvalid(self, location, reason):
        error = self.assertRaises(exceptions.InvalidLocationError,
                                  self.strategy.parse_location, location)
        self.assertIn(reason, str(error))
        self.assertIn('"%s"' % location, str(error))

    def assertManifestParses(self, location):
        self.strategy.parse_location(location)
        self.strategy.parse_location(location + '.manifest')


class TestSwiftLocations(LocationTestCase):
    strategy_name = 'swift'
    settings = dict(test_loader.SWIFT_CREDENTIALS,
                    default_container='packages')

    def test_container_and_object(self):
        target = self.strategy.parse_location(
            'swift://packages/guest/pkg%201.tar')

        self.assertEqual(('packages', 'guest/pkg 1.tar', None),
                         (target.container, target.obj, target.storage_url))
        self.assertManifestParses('swift://packages/guest/pkg.tar')

    def test_default_container(self):
        target = self.strategy.parse_location('swift:guest/pkg.tar')

        self.assertEqual(('packages', 'guest/pkg.tar'),
                         (target.container, target.obj))

    def test_default_container_unset(self):
        self.strategy = self.load('swift', **test_loader.SWIFT_CREDENTIALS)

        self.assertInvalid('swift:pkg.tar',
                           '[swift] default_container is not set')

    def test_storage_url(self):
        target = self.strategy.parse_location(
            'https://swift.example.org/v1/AUTH_abc/packages/a/pkg.tar')

        self.assertEqual(('packages', 'a/pkg.tar',
                          'https://swift.example.org/v1/AUTH_abc'),
                         (target.container, target.obj, target.storage_url))

    def test_invalid(self):
        self.assertInvalid('ftp://packages/pkg.tar', 'the scheme must be')
        self.assertInvalid('swift://packages/', 'the object name')
        self.assertInvalid('swift://packages', 'the object name')
        self.assertInvalid('swift:///pkg.tar', 'the container name')
        self.assertInvalid('swift://packages/dir/', 'not end with "/"')
        self.assertInvalid('swift://packages/pkg.tar?x=1', 'query')
        self.assertInvalid('swift://p/' + 'o' * 1025, 'the object name')
        self.assertInvalid('https://swift.example.org/v1/AUTH_abc/pkg.tar',
                           'http(s)://host/v1/<account>/<container>')
        self.assertInvalid('https://swift.example.org/v2/a/c/o',
                           'http(s)://host/v1/<account>/<container>')


class TestHttpLocations(LocationTestCase):
    strategy_name = 'http'

    def test_https(self):
        target = self.strategy.parse_location(
            'https://packages.example.org:8443/guest/pkg.tar')

        self.assertEqual(('https', 'packages.example.org', 8443,
                          '/guest/pkg.tar'),
                         (target.scheme, target.host, target.port,
                          target.path))
        self.assertManifestParses('https://packages.example.org/pkg.tar')

    def test_plain_http_needs_allow_insecure_http(self):
        self.assertInvalid('http://packages.example.org/pkg.tar',
                           'plain http needs [http] allow_insecure_http')

        self.strategy = self.load('http', allow_insecure_http=True)

        self.assertEqual('http', self.strategy.parse_location(
            'http://packages.example.org/pkg.tar').scheme)

    def test_invalid(self):
        self.assertInvalid('https://user:pw@example.org/pkg.tar',
                           'credentials do not belong in the location')
        self.assertInvalid('https://example.org/pkg.tar?sig=1', 'query')
        self.assertInvalid('https://example.org/pkg.tar#x', 'fragment')
        self.assertInvalid('https://example.org/pkg.tar?', 'query')
        self.assertInvalid('https://example.org/', 'not a directory')
        self.assertInvalid('https://example.org', 'not a directory')
        self.assertInvalid('https:///pkg.tar', 'names no host')
        self.assertInvalid('https://example.org:99999/pkg.tar', 'bad port')
        self.assertInvalid('/srv/pkg.tar', 'the scheme must be https')


class TestLocalLocations(LocationTestCase):
    strategy_name = 'local'

    def test_path_and_file_url(self):
        self.assertEqual('/srv/pkg 1.tar',
                         self.strategy.parse_location('/srv/pkg 1.tar'))
        self.assertEqual('/srv/pkg 1.tar', self.strategy.parse_location(
            'file:///srv/pkg%201.tar'))
        self.assertEqual('/srv/pkg.tar', self.strategy.parse_location(
            'file://localhost/srv/pkg.tar'))
        self.assertManifestParses('file:///srv/pkg.tar')

    def test_invalid(self):
        self.assertInvalid('srv/pkg.tar', 'must be absolute')
        self.assertInvalid('/srv/../etc/shadow', '".."')
        self.assertInvalid('file:///srv/%2E%2E/etc/shadow', '".."')
        self.assertInvalid('file://host.example.org/srv/pkg.tar',
                           'remote host')
        self.assertInvalid('/srv/packages/', 'not a directory')
        self.assertInvalid('file:///srv/pkg%00.tar', 'NUL')


class TestRsyncLocations(LocationTestCase):
    strategy_name = 'rsync'

    def test_valid(self):
        location = 'rsync://agent@127.0.0.1:8873/packages/guest/pkg.tar'

        self.assertEqual(location,
                         self.strategy.parse_location(location).url)
        self.assertManifestParses('rsync://127.0.0.1/packages/pkg.tar')

    def test_invalid(self):
        self.assertInvalid('https://host/packages/pkg.tar',
                           'the scheme must be rsync')
        self.assertInvalid('rsync://agent:pw@host/packages/pkg.tar',
                           'password_file')
        self.assertInvalid('rsync://host/packages', 'rsync://host/<module>')
        self.assertInvalid('rsync://host/packages/', 'rsync://host/<module>')
        self.assertInvalid('rsync://host//pkg.tar', 'rsync://host/<module>')
        self.assertInvalid('rsync://host/packages/*', 'wildcards')
        self.assertInvalid('rsync://host/packages/pkg[1].tar', 'wildcards')
        self.assertInvalid('rsync://host/packages/a b.tar', 'spaces')
        self.assertInvalid('rsync://host/packages/../etc/shadow', '".."')
        self.assertInvalid('rsync://host:x/packages/pkg.tar', 'bad port')
        self.assertInvalid('rsync:///packages/pkg.tar', 'names no host')
