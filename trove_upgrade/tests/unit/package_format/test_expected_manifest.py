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

"""An upgrade bound to one package: its manifest hash and package name."""

import hashlib

from trove_upgrade.common import exception as exc
from trove_upgrade.package_format import manifest as manifest_mod
from trove_upgrade.tests.unit.package_format import base


class TestExpectedManifest(base.PackagingTestCase):

    def setUp(self):
        super().setUp()
        path, self.manifest = self.build(package='trove-guestagent')
        self.manifest_bytes = self.read(path + '.manifest')
        self.sha256 = hashlib.sha256(self.manifest_bytes).hexdigest()
        # Another genuine build of the same version, as a store could
        # serve in its place.
        other, _ = self.build(name='other', package='trove-guestagent')
        self.other_bytes = self.read(other + '.manifest')

    def test_the_package_names_itself_in_the_signed_part(self):
        self.assertEqual('trove-guestagent', self.manifest.package)
        self.assertEqual('trove-guestagent',
                         self.verify_manifest(self.manifest_bytes).package)
        self.assertEqual('trove-guestagent', manifest_mod.Manifest.from_bytes(
            self.manifest_bytes).signed_dict()['package'])

    def test_the_expected_manifest_is_accepted(self):
        self.verify_manifest(self.manifest_bytes, expected_sha256=self.sha256,
                             expected_package='trove-guestagent')

    def test_another_signed_build_of_the_version_is_refused(self):
        # Without the expectation both are genuine packages of v1.0.1.
        self.verify_manifest(self.other_bytes)
        e = self.assertRaises(exc.ManifestHashMismatchError,
                              self.verify_manifest, self.other_bytes,
                              expected_sha256=self.sha256)
        self.assertIn(self.sha256, str(e))

    def test_the_hash_is_checked_before_anything_is_parsed(self):
        self.assertRaises(exc.ManifestHashMismatchError,
                          self.verify_manifest, b'not even JSON',
                          expected_sha256=self.sha256)

    def test_another_package_name_is_refused(self):
        e = self.assertRaises(exc.PackageNameMismatchError,
                              self.verify_manifest, self.manifest_bytes,
                              expected_package='trove-upgrade')
        self.assertIn("'trove-guestagent'", str(e))

    def test_an_unnamed_package_works_without_an_expected_name(self):
        path, manifest = self.build(name='old')
        self.assertIsNone(manifest.package)
        data = self.read(path + '.manifest')
        self.assertNotIn(b'"package"', data)
        self.verify_manifest(data)
        self.verify_manifest(data, expected_sha256=hashlib.sha256(
            data).hexdigest())
        e = self.assertRaises(exc.PackageNameMismatchError,
                              self.verify_manifest, data,
                              expected_package='trove-guestagent')
        self.assertIn('unnamed', str(e))

    def test_malformed_expectations_are_refused(self):
        for sha256, package in (('A' * 64, None), ('a' * 63, None),
                                (1, None), (None, ''), (None, 'a b'),
                                (None, '-x'), (None, 'x' * 200)):
            self.assertRaises(exc.InvalidExpectationError,
                              self.verify_manifest, self.manifest_bytes,
                              expected_sha256=sha256,
                              expected_package=package)

    def test_a_malformed_signed_name_is_refused(self):
        for name in ('', 'a/b', 'x' * 200):
            manifest = manifest_mod.Manifest(**dict(
                vars(self.manifest), package=name, signatures=()))
            manifest = manifest.with_signature(self.signing_key)
            self.assertRaises(exc.ManifestFormatError, self.verify_manifest,
                              manifest.to_bytes())
