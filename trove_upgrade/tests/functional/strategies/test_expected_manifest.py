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

"""An upgrade bound to its manifest is refused before its payload is fetched.

For each strategy, against its real server: a store holds the signed
manifest of a genuine package but no payload. The agent's download step
(``agent.untrusted.InProcessSteps``, what the download child runs) with
the upgrade's expectation met goes on to fetch the payload and finds it
missing; with another manifest hash or package name expected, it refuses
the manifest with the named error and never asks for the payload.
"""

import datetime
import hashlib
import os

import fixtures

from trove_upgrade.agent import strategies
from trove_upgrade.agent import untrusted
from trove_upgrade.agent import verifier as verifier_mod
from trove_upgrade.package_format import build
from trove_upgrade.package_format import keys
from trove_upgrade.tests.functional import https_server
from trove_upgrade.tests.functional import servers
from trove_upgrade.tests.functional.strategies import base

VERSION = 'v1.0.1'
PACKAGE_NAME = 'trove-guestagent'


def _signed_manifest(directory):
    """A genuine package's manifest bytes, and the keys that verify it."""
    signing_key = keys.generate_signing_key()
    encryption_key = keys.generate_encryption_key()
    wheel = os.path.join(directory, 'pkg0-1.0-py3-none-any.whl')
    with open(wheel, 'wb') as f:
        f.write(os.urandom(5000))
    now = datetime.datetime.now(datetime.timezone.utc)
    output = os.path.join(directory, 'built')
    build.build_package([wheel], output, version=VERSION,
                        signing_keys=[signing_key],
                        encryption_key=encryption_key,
                        expires=now + datetime.timedelta(days=1),
                        created=now, package=PACKAGE_NAME)
    with open(output + '.manifest', 'rb') as f:
        manifest = f.read()
    _, public = keys.write_signing_key(
        os.path.join(directory, 'signing.key'), signing_key)
    decryption = keys.write_encryption_key(
        os.path.join(directory, 'encryption.key'), encryption_key)
    return manifest, public, decryption


class ExpectedManifestMixin:
    """The three cases for one strategy; a subclass serves the store.

    ``setUpClass`` of the subclass calls :meth:`make_store` and serves
    its directory; :meth:`location` names the absent payload there.
    """

    @classmethod
    def make_store(cls):
        keydir = cls.class_dir()
        cls.manifest, cls.public_key, cls.decryption_key = (
            _signed_manifest(keydir))
        cls.sha256 = hashlib.sha256(cls.manifest).hexdigest()
        return cls.class_dir([('pkg.tar.manifest', cls.manifest)])

    def location(self):
        raise NotImplementedError

    def payload_requested(self):
        """Whether the store's server saw a request for the payload.

        None where the server keeps no record: the missing payload then
        shows whether the step asked for it.
        """
        return None

    def download(self, expected):
        self._strategy()
        steps = untrusted.InProcessSteps(
            self.conf, verifier_mod.PackageVerifier(
                [self.public_key], 1, [self.decryption_key]),
            lambda name: strategies.load(name, self.conf))
        work = self.useFixture(fixtures.TempDir()).path
        upgrade = {'strategy': self.strategy, 'location': self.location(),
                   'to_version': VERSION, 'from_version': None,
                   'allow_downgrade': False, 'expected_manifest': expected}
        error = self.assertRaises(untrusted.StepError, steps.download,
                                  upgrade, work)
        self.assertNotIn('package', os.listdir(work))
        return str(error)

    def test_the_expected_manifest_goes_on_to_the_payload(self):
        reason = self.download({'sha256': self.sha256,
                                'package': PACKAGE_NAME})
        self.assertIn('download failed', reason)
        self.assertNotIn('package rejected', reason)
        self.assertIn(self.payload_requested(), (None, True))

    def test_another_manifest_hash_is_refused_before_the_payload(self):
        reason = self.download({'sha256': 'ab' * 32,
                                'package': PACKAGE_NAME})
        self.assertIn('ManifestHashMismatchError', reason)
        self.assertIn(self.sha256, reason)
        self.assertIn(self.payload_requested(), (None, False))

    def test_another_package_name_is_refused_before_the_payload(self):
        reason = self.download({'sha256': None, 'package': 'trove-upgrade'})
        self.assertIn('PackageNameMismatchError', reason)
        self.assertIn(self.payload_requested(), (None, False))


class LocalExpectedManifestTest(ExpectedManifestMixin,
                                base.StrategyTestCase):

    strategy = 'local'

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.root = cls.make_store()

    def setUp(self):
        super().setUp()
        self.settings = {'allowed_dirs': [self.root]}

    def location(self):
        return os.path.join(self.root, 'pkg.tar')


class HttpExpectedManifestTest(ExpectedManifestMixin, base.StrategyTestCase):

    strategy = 'http'

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.ca = https_server.CertificateAuthority(cls.class_dir())
        cls.server = https_server.HttpsFileServer(cls.make_store(), cls.ca)
        cls.server.setUp()
        cls.addClassCleanup(cls.server.cleanUp)

    def setUp(self):
        super().setUp()
        self.server.clear_faults()
        self.settings = {'ca_file': self.ca.cert_file}

    def location(self):
        return self.server.url('pkg.tar')

    def payload_requested(self):
        names = [name for _method, name, _range in self.server.requests]
        self.assertIn('pkg.tar.manifest', names)
        return 'pkg.tar' in names


class RsyncExpectedManifestTest(ExpectedManifestMixin,
                                base.StrategyTestCase):

    strategy = 'rsync'

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.daemon = servers.RsyncDaemon(cls.make_store(), user='agent',
                                         secret='rsync-secret')
        cls.daemon.setUp()
        cls.addClassCleanup(cls.daemon.cleanUp)

    def setUp(self):
        super().setUp()
        self.settings = {'password_file': self.daemon.password_file()}

    def location(self):
        return self.daemon.url('pkg.tar')


class SwiftExpectedManifestTest(ExpectedManifestMixin,
                                base.StrategyTestCase):

    strategy = 'swift'

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        store = cls.make_store()
        cls.swift = servers.SwiftServer()
        cls.swift.setUp()
        cls.addClassCleanup(cls.swift.cleanUp)
        conn = cls.swift.connection()
        conn.put_container('bound')
        with open(os.path.join(store, 'pkg.tar.manifest'), 'rb') as f:
            conn.put_object('bound', 'guest/pkg.tar.manifest', f.read())
        conn.close()

    def setUp(self):
        super().setUp()
        self.settings = dict(self.swift.strategy_conf(),
                             default_container='bound')

    def location(self):
        return 'swift://bound/guest/pkg.tar'
