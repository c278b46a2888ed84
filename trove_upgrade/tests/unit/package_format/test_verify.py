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

"""The manifest checks of verify_manifest, one by one and in order."""

import dataclasses
import datetime

from trove_upgrade.common import canonical
from trove_upgrade.common import exception as exc
from trove_upgrade.package_format import keys
from trove_upgrade.package_format import verify
from trove_upgrade.tests.unit.package_format import base


class TestVerifyManifest(base.PackagingTestCase):

    def setUp(self):
        super().setUp()
        self.path, self.manifest = self.build()
        self.manifest_bytes = self.read(self.path + '.manifest')

    def test_genuine(self):
        verified = self.verify_manifest(self.manifest_bytes)
        self.assertIsInstance(verified, verify.VerifiedManifest)
        self.assertEqual('v1.0.1', verified.version)
        self.assertEqual(self.manifest.payload, verified.payload)

    def test_manifest_too_large(self):
        self.assertRaises(exc.ManifestTooLargeError, self.verify_manifest,
                          self.manifest_bytes,
                          max_manifest_size=len(self.manifest_bytes) - 1)

    def test_not_canonical(self):
        self.assertRaises(exc.ManifestFormatError, self.verify_manifest,
                          self.manifest_bytes + b'\n')

    def test_every_flipped_byte_is_refused(self):
        for offset in range(0, len(self.manifest_bytes), 7):
            data = bytearray(self.manifest_bytes)
            data[offset] ^= 0x01
            self.assertRaises(exc.ManifestError, self.verify_manifest,
                              bytes(data))

    def test_changed_signed_value(self):
        document = canonical.loads(self.manifest_bytes)
        document['signed']['expires'] = '2099-01-01T00:00:00Z'
        self.assertRaises(exc.BadSignatureError, self.verify_manifest,
                          canonical.dumps(document))

    def test_changed_signature(self):
        document = canonical.loads(self.manifest_bytes)
        sig = document['signatures'][0]['sig']
        document['signatures'][0]['sig'] = ('0' if sig[0] != '0'
                                            else '1') + sig[1:]
        self.assertRaises(exc.BadSignatureError, self.verify_manifest,
                          canonical.dumps(document))

    def test_unsigned(self):
        document = canonical.loads(self.manifest_bytes)
        document['signatures'] = []
        self.assertRaises(exc.UnknownSigningKeyError, self.verify_manifest,
                          canonical.dumps(document))

    def test_signed_by_unknown_key_only(self):
        stranger = keys.generate_signing_key()
        manifest = dataclasses.replace(
            self.manifest, signatures=()).with_signature(stranger)
        self.assertRaises(exc.UnknownSigningKeyError, self.verify_manifest,
                          manifest.to_bytes())

    def test_threshold_met_by_distinct_keys(self):
        second = keys.generate_signing_key()
        trusted = keys.TrustedKeys([base.public_key(self.signing_key),
                                    base.public_key(second)], 2)
        self.assertRaises(exc.ThresholdNotMetError, self.verify_manifest,
                          self.manifest_bytes, trusted)
        both = self.manifest.with_signature(second).to_bytes()
        self.assertEqual('v1.0.1',
                         self.verify_manifest(both, trusted).version)

    def test_one_key_signing_twice_counts_once(self):
        second = keys.generate_signing_key()
        trusted = keys.TrustedKeys([base.public_key(self.signing_key),
                                    base.public_key(second)], 2)
        document = canonical.loads(self.manifest_bytes)
        document['signatures'] *= 2
        self.assertRaises(exc.ThresholdNotMetError, self.verify_manifest,
                          canonical.dumps(document), trusted)

    def test_unknown_key_does_not_count_towards_threshold(self):
        second, stranger = (keys.generate_signing_key(),
                            keys.generate_signing_key())
        trusted = keys.TrustedKeys([base.public_key(self.signing_key),
                                    base.public_key(second)], 2)
        signed = self.manifest.with_signature(stranger).to_bytes()
        self.assertRaises(exc.ThresholdNotMetError, self.verify_manifest,
                          signed, trusted)

    def test_rotated_key(self):
        new_key = keys.generate_signing_key()
        trusted = keys.TrustedKeys([base.public_key(new_key)])
        self.assertRaises(exc.UnknownSigningKeyError, self.verify_manifest,
                          self.manifest_bytes, trusted)
        path, _ = self.build('rotated', signing_keys=[new_key])
        self.assertEqual('v1.0.1', self.verify_manifest(
            self.read(path + '.manifest'), trusted).version)

    def test_expired(self):
        self.assertRaises(exc.ExpiredManifestError, self.verify_manifest,
                          self.manifest_bytes, now=self.manifest.expires)
        self.verify_manifest(self.manifest_bytes, now=self.manifest.expires
                             - datetime.timedelta(seconds=1))

    def test_expiry_checked_against_current_time_by_default(self):
        # base.NOW lies in 2026-06; a real clock is later than that, so a
        # manifest expiring a day after NOW is expired without ``now``.
        path, _ = self.build('old', expires=base.NOW
                             + datetime.timedelta(days=1))
        self.assertRaises(exc.ExpiredManifestError, verify.verify_manifest,
                          self.read(path + '.manifest'), self.trusted,
                          expected_version='1.0.1', installed_version='1.0')

    def test_wrong_version(self):
        self.assertRaises(exc.WrongVersionError, self.verify_manifest,
                          self.manifest_bytes, expected_version='1.0.2')

    def test_version_compares_by_packaging_rules(self):
        for expected in ('1.0.1', 'v1.0.1', '1.0.1.0', 'V1.0.1'):
            self.verify_manifest(self.manifest_bytes,
                                 expected_version=expected)

    def test_invalid_requested_version(self):
        self.assertRaises(exc.InvalidVersionError, self.verify_manifest,
                          self.manifest_bytes, expected_version='latest')

    def test_rollback_refused_without_override(self):
        self.assertRaises(exc.RollbackError, self.verify_manifest,
                          self.manifest_bytes, installed_version='v1.2.0')

    def test_rollback_allowed_with_override(self):
        self.verify_manifest(self.manifest_bytes, installed_version='1.2.0',
                             allow_downgrade=True)

    def test_same_version_is_not_a_rollback(self):
        self.verify_manifest(self.manifest_bytes, installed_version='1.0.1')

    def test_prerelease_orders_before_release(self):
        self.assertRaises(exc.RollbackError, self.verify_manifest,
                          self.manifest_bytes, installed_version='1.0.1.post1')
        self.verify_manifest(self.manifest_bytes,
                             installed_version='1.0.1rc1')

    def test_minimum_upgrade_from(self):
        path, _ = self.build('min', min_upgrade_from='1.0.0')
        data = self.read(path + '.manifest')
        self.assertRaises(exc.UpgradePathError, self.verify_manifest, data,
                          installed_version='0.9')
        self.verify_manifest(data, installed_version='1.0.0')

    def test_upgrade_path_refused_even_with_downgrade_override(self):
        path, _ = self.build('min', min_upgrade_from='1.0.0')
        self.assertRaises(exc.UpgradePathError, self.verify_manifest,
                          self.read(path + '.manifest'),
                          installed_version='0.9', allow_downgrade=True)

    def test_payload_too_large(self):
        self.assertRaises(exc.PayloadTooLargeError, self.verify_manifest,
                          self.manifest_bytes,
                          max_payload_size=self.manifest.payload.size - 1)
        self.verify_manifest(self.manifest_bytes,
                             max_payload_size=self.manifest.payload.size)

    def test_checks_run_in_order(self):
        # Expired, wrong version, rollback and too large all at once: the
        # signature check comes first, then expiry.
        stranger = keys.generate_signing_key()
        kwargs = dict(expected_version='9', installed_version='10',
                      max_payload_size=1, now=self.manifest.expires)
        self.assertRaises(exc.ExpiredManifestError, self.verify_manifest,
                          self.manifest_bytes, **kwargs)
        self.assertRaises(exc.UnknownSigningKeyError, self.verify_manifest,
                          self.manifest_bytes,
                          keys.TrustedKeys([base.public_key(stranger)]),
                          **kwargs)

    def test_no_installed_version_skips_rollback_checks(self):
        self.verify_manifest(self.manifest_bytes, installed_version=None)


class TestVerifyPackage(base.PackagingTestCase):

    def test_manifest_beside_the_payload_by_default(self):
        path, manifest = self.build()
        verified, files = verify.verify_package(
            path, trusted_keys=self.trusted, keyring=self.keyring,
            dest_dir=self.dest, expected_version='1.0.1',
            installed_version='1.0.0', now=base.NOW)
        self.assertEqual(manifest.files, verified.files)
        self.assertEqual(2, len(files))

    def test_manifest_too_large_is_not_read_whole(self):
        path, _ = self.build()
        self.write(path + '.manifest', b' ' * (2 * 1024 * 1024))
        self.assertRaises(exc.ManifestTooLargeError, verify.verify_package,
                          path, trusted_keys=self.trusted,
                          keyring=self.keyring, dest_dir=self.dest,
                          expected_version='1.0.1',
                          installed_version='1.0.0', now=base.NOW)
        self.assertNothingExtracted()
