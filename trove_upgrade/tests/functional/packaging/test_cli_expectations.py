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

"""``trove-upgrade-package`` names packages and verifies expectations."""

import hashlib
import json

from trove_upgrade.tests.functional.packaging import test_cli


class TestExpectations(test_cli.CLITestCase):

    def manifest_sha256(self):
        with open(self.package + '.manifest', 'rb') as f:
            return hashlib.sha256(f.read()).hexdigest()

    def test_a_named_package_verified_as_an_upgrade_expects_it(self):
        result = self.build('--package-name', 'trove-guestagent')
        sha256 = self.manifest_sha256()
        self.assertIn('package trove-guestagent', result.stdout)
        self.assertIn('manifest sha256 %s' % sha256, result.stdout)
        inspected = self.run_cli('inspect', self.package)
        self.assertIn('manifest sha256:  %s' % sha256, inspected.stdout)
        self.assertIn('package:          trove-guestagent', inspected.stdout)
        document = json.loads(self.run_cli(
            'inspect', self.package, '--format', 'json').stdout)
        self.assertEqual('trove-guestagent', document['signed']['package'])

        self.run_cli(*self.verify_args(
            '--expect-manifest-sha256', sha256,
            '--expect-package', 'trove-guestagent'))
        self.refused('ManifestHashMismatchError', *self.verify_args(
            '--expect-manifest-sha256', 'ab' * 32))
        self.refused('PackageNameMismatchError', *self.verify_args(
            '--expect-package', 'trove-upgrade'))

    def test_a_signature_added_later_changes_the_hash(self):
        self.build('--package-name', 'trove-upgrade')
        before = self.manifest_sha256()
        self.run_cli('sign', self.package, '--signing-key', 'sk2')
        self.refused('ManifestHashMismatchError', *self.verify_args(
            '--expect-manifest-sha256', before))
        self.run_cli(*self.verify_args(
            '--expect-manifest-sha256', self.manifest_sha256()))

    def test_an_unnamed_package_verifies_unless_a_name_is_expected(self):
        result = self.build()
        self.assertIn('package (unnamed)', result.stdout)
        self.run_cli(*self.verify_args(
            '--expect-manifest-sha256', self.manifest_sha256()))
        self.refused('PackageNameMismatchError', *self.verify_args(
            '--expect-package', 'trove-guestagent'))

    def test_malformed_expectations_and_names_are_refused(self):
        self.refused('BuildError', *('build', self.wheels, '--version',
                                     'v1.0.1', '-o', self.package,
                                     '--signing-key', 'sk1',
                                     '--encryption-key', 'ek',
                                     '--package-name', 'no/such name'))
        self.build()
        self.refused('InvalidExpectationError', *self.verify_args(
            '--expect-manifest-sha256', 'XYZ'))
