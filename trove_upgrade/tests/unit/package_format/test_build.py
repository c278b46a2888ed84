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

"""Building packages: inputs, outputs, and failures that leave nothing."""

import datetime
import os

from trove_upgrade.common import exception as exc
from trove_upgrade.package_format import build
from trove_upgrade.package_format import keys
from trove_upgrade.tests.unit.package_format import base


class TestCollectWheels(base.PackagingTestCase):

    def test_directory_and_files(self):
        first = self.make_wheels((10, 20), prefix='a')
        second = self.make_wheels((30,), prefix='b')
        with open(os.path.join(os.path.dirname(first[0]), 'README'),
                  'w') as out:
            out.write('not a wheel')
        self.assertEqual(first + second, build.collect_wheels(
            [second[0], os.path.dirname(first[0])]))

    def test_refused_inputs(self):
        wheels = self.make_wheels((10,))
        empty = os.path.join(self.tmp, 'empty')
        os.mkdir(empty)
        text = os.path.join(self.tmp, 'notes.txt')
        with open(text, 'w') as out:
            out.write('x')
        for inputs in ([], [empty], [text], [os.path.join(self.tmp, 'no')],
                       [wheels[0], wheels[0]]):
            self.assertRaises(exc.BuildError, build.collect_wheels, inputs)


class TestBuildPackage(base.PackagingTestCase):

    def test_outputs(self):
        path, manifest = self.build()
        self.assertEqual(manifest.payload.size, os.path.getsize(path))
        self.assertEqual(manifest.to_bytes(), self.read(path + '.manifest'))
        self.assertEqual(0o644, os.stat(path).st_mode & 0o777)
        self.assertEqual([], [name for name in os.listdir(self.tmp)
                              if '.partial-' in name])

    def test_deterministic_archive_layout(self):
        _, first = self.build('one')
        self.assertEqual([f.name for f in first.files],
                         sorted(f.name for f in first.files))

    def test_refuses_existing_outputs(self):
        path, _ = self.build()
        self.assertRaises(exc.BuildError, self.build)
        os.unlink(path)
        self.assertRaises(exc.BuildError, self.build, 'pkg')

    def test_refuses_past_expiry(self):
        self.assertRaises(exc.BuildError, self.build,
                          expires=base.NOW - datetime.timedelta(days=40))
        self.assertFalse(os.path.exists(os.path.join(self.tmp, 'pkg')))

    def test_refuses_bad_versions(self):
        self.assertRaises(exc.InvalidVersionError, self.build,
                          version='one')
        self.assertRaises(exc.InvalidVersionError, self.build, 'other',
                          min_upgrade_from='x.y')

    def test_refuses_no_wheels_or_no_keys(self):
        output = os.path.join(self.out_dir, 'pkg')
        for wheels, signing_keys in (([], [self.signing_key]),
                                     (self.make_wheels((10,)), [])):
            self.assertRaises(exc.BuildError, build.build_package, wheels,
                              output, version='1.0',
                              signing_keys=signing_keys,
                              encryption_key=self.encryption_key,
                              expires=base.NOW + datetime.timedelta(days=1),
                              created=base.NOW)
        self.assertEqual([], os.listdir(self.out_dir))

    def test_failed_build_leaves_nothing(self):
        wheels = self.make_wheels((100,), prefix='gone')
        os.unlink(wheels[0])
        output = os.path.join(self.out_dir, 'pkg')
        self.assertRaises(FileNotFoundError, build.build_package, wheels,
                          output, version='1.0',
                          signing_keys=[self.signing_key],
                          encryption_key=self.encryption_key,
                          expires=base.NOW + datetime.timedelta(days=1),
                          created=base.NOW)
        self.assertEqual([], os.listdir(self.out_dir))

    def test_several_signing_keys(self):
        second = keys.generate_signing_key()
        _, manifest = self.build(signing_keys=[self.signing_key, second])
        self.assertEqual(sorted([self.signing_key.key_id, second.key_id]),
                         [s.key_id for s in manifest.signatures])
