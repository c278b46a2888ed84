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

"""Manifest parsing: the schema, strictly."""

from trove_upgrade.common import canonical
from trove_upgrade.common import exception as exc
from trove_upgrade.package_format import manifest as manifest_mod
from trove_upgrade.tests.unit.package_format import base


class TestManifestForm(base.PackagingTestCase):

    def setUp(self):
        super().setUp()
        _, self.manifest = self.build(
            min_upgrade_from='1.0.0',
            health_check=manifest_mod.HealthCheck(('agent', '--check'), 30))
        self.document = canonical.loads(self.manifest.to_bytes())

    def parse(self):
        return manifest_mod.Manifest.from_bytes(
            canonical.dumps(self.document))

    def test_round_trip(self):
        parsed = self.parse()
        self.assertEqual(self.manifest, parsed)
        self.assertEqual(('agent', '--check'), parsed.health_check.command)
        self.assertEqual('1.0.0', parsed.min_upgrade_from)

    def test_optional_fields_absent(self):
        del self.document['signed']['health_check']
        del self.document['signed']['min_upgrade_from']
        parsed = self.parse()
        self.assertIsNone(parsed.health_check)
        self.assertIsNone(parsed.min_upgrade_from)

    def test_unsupported_format_version(self):
        self.document['signed']['format_version'] = 3
        self.assertRaises(exc.UnsupportedFormatError, self.parse)

    def test_tar_format_1_is_refused_with_a_rebuild_hint(self):
        self.document['signed']['format_version'] = 1
        error = self.assertRaises(exc.UnsupportedFormatError, self.parse)
        self.assertIn('rebuild', str(error))

    def assertBad(self, section, key, value):
        target = self.document['signed']
        if section:
            target = target[section]
        if value is KeyError:
            del target[key]
        else:
            target[key] = value
        self.assertRaises(exc.ManifestFormatError, self.parse)

    def test_schema_violations(self):
        cases = [
            (None, '_type', 'something-else'),
            (None, 'version', 'not a version'),
            (None, 'version', KeyError),
            (None, 'min_upgrade_from', 'latest'),
            (None, 'created', '2026-01-01 00:00:00'),
            (None, 'expires', '2000-01-01T00:00:00Z'),
            (None, 'unknown', 1),
            (None, 'files', []),
            (None, 'health_check', {'command': [], 'timeout': 5}),
            (None, 'health_check', {'command': 'agent --check',
                                    'timeout': 5}),
            (None, 'health_check', {'command': ['a'], 'timeout': 0}),
            ('payload', 'size', -1),
            ('payload', 'size', True),
            ('payload', 'sha256', 'AB' * 32),
            ('payload', 'sha256', 'ab' * 31),
            ('encryption', 'algorithm', 'ROT13'),
            ('encryption', 'chunk_size', 0),
            ('encryption', 'chunk_size', 2 ** 30),
            ('encryption', 'salt', 'zz' * 32),
        ]
        original = canonical.dumps(self.document)
        for section, key, value in cases:
            self.document = canonical.loads(original)
            self.assertBad(section, key, value)

    def test_file_names_are_plain(self):
        original = canonical.dumps(self.document)
        for name in ('../x.whl', '/x.whl', 'a/b.whl', '.hidden', '',
                     'x.whl\n', 'a\\b.whl', 'x' * 300):
            self.document = canonical.loads(original)
            self.document['signed']['files'][0]['name'] = name
            self.assertRaises(exc.ManifestFormatError, self.parse)

    def test_files_sorted_and_unique(self):
        files = self.document['signed']['files']
        files.reverse()
        self.assertRaises(exc.ManifestFormatError, self.parse)
        files[:] = [files[0], files[0]]
        self.assertRaises(exc.ManifestFormatError, self.parse)

    def test_files_cannot_exceed_the_payload(self):
        self.document['signed']['files'][0]['size'] = (
            self.document['signed']['payload']['size'] + 1)
        self.assertRaises(exc.ManifestFormatError, self.parse)

    def test_signatures_form(self):
        for signatures in ({}, [{'key_id': 'ab' * 32}],
                           [{'key_id': 'ab' * 32, 'sig': 'cd' * 10}]):
            self.document['signatures'] = signatures
            self.assertRaises(exc.ManifestFormatError, self.parse)

    def test_with_signature_is_idempotent(self):
        self.assertIs(self.manifest,
                      self.manifest.with_signature(self.signing_key))
