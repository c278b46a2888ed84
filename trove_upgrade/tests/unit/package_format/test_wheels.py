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

"""Packages of a release: the guest_agent field and console script checks.

Collecting a real release's wheels with pip is exercised by the functional
tests of ``tests/functional/trove`` (real pip, cached wheelhouse).
"""

import os
import zipfile

from trove_upgrade.cmd import package as package_cmd
from trove_upgrade.common import canonical
from trove_upgrade.common import exception as exc
from trove_upgrade.package_format import manifest as manifest_mod
from trove_upgrade.package_format import wheels
from trove_upgrade.tests.unit.package_format import base

ENTRY_POINTS = ('[console_scripts]\n'
                'trove-guestagent = trove.cmd.guest:main\n'
                'trove-api = trove.cmd.api:main\n')


class TestGuestAgentField(base.PackagingTestCase):

    def test_round_trip(self):
        _, manifest = self.build(
            guest_agent=manifest_mod.GuestAgent('trove-guestagent'))
        parsed = manifest_mod.Manifest.from_bytes(manifest.to_bytes())
        self.assertEqual('trove-guestagent',
                         parsed.guest_agent.console_script)
        self.assertEqual(manifest, parsed)

    def test_absent_is_none(self):
        _, manifest = self.build()
        self.assertIsNone(
            manifest_mod.Manifest.from_bytes(manifest.to_bytes())
            .guest_agent)

    def test_malformed_is_refused(self):
        _, manifest = self.build(
            guest_agent=manifest_mod.GuestAgent('trove-guestagent'))
        for bad in ({'console_script': '../bin/sh'},
                    {'console_script': ''}, {'console_script': 3},
                    {}, {'console_script': 'x', 'extra': 1}, 'x'):
            document = canonical.loads(manifest.to_bytes())
            document['signed']['guest_agent'] = bad
            self.assertRaises(exc.ManifestFormatError,
                              manifest_mod.Manifest.from_bytes,
                              canonical.dumps(document))


class TestConsoleScripts(base.PackagingTestCase):

    def _wheel(self, name, entry_points):
        path = os.path.join(self.tmp, name)
        with zipfile.ZipFile(path, 'w') as zf:
            zf.writestr('trove/__init__.py', '')
            if entry_points is not None:
                zf.writestr('trove-26.0.0.dist-info/entry_points.txt',
                            entry_points)
        return path

    def test_declared_script_is_found(self):
        plain = self._wheel('six-1.0-py3-none-any.whl', None)
        trove = self._wheel('trove-26.0.0-py3-none-any.whl', ENTRY_POINTS)
        self.assertEqual({'trove-guestagent': 'trove.cmd.guest:main',
                          'trove-api': 'trove.cmd.api:main'},
                         wheels.console_scripts(trove))
        self.assertEqual({}, wheels.console_scripts(plain))
        self.assertEqual(os.path.basename(trove),
                         wheels.check_console_script([plain, trove],
                                                     'trove-guestagent'))

    def test_unreadable_entry_points_are_a_build_error(self):
        # Each was a configparser, zipfile or Unicode error out of the
        # build, and out of the agent's check of a new install.
        for name, entry_points in (
                ('dup', ENTRY_POINTS + 'trove-api = x:y\n'),
                ('sections', ENTRY_POINTS + ENTRY_POINTS),
                ('header', 'trove-api = x:y\n'),
                ('utf8', b'[console_scripts]\nx = \xff:y\n')):
            path = self._wheel('%s-1.0-py3-none-any.whl' % name,
                               entry_points)
            e = self.assertRaises(exc.BuildError, wheels.console_scripts,
                                  path)
            self.assertIn('entry points of wheel %s' % name, str(e))
        path = os.path.join(self.tmp, 'zip-1.0-py3-none-any.whl')
        with open(path, 'wb') as f:
            f.write(b'not a zip')
        self.assertRaises(exc.BuildError, wheels.check_console_script,
                          [path], 'trove-api')

    def test_missing_script_is_refused(self):
        plain = self._wheel('six-1.0-py3-none-any.whl', None)
        e = self.assertRaises(exc.BuildError, wheels.check_console_script,
                              [plain], 'trove-guestagent')
        self.assertIn('trove-guestagent', str(e))

    def test_build_needs_wheels_or_requirements(self):
        args = package_cmd.build_parser().parse_args(
            ['build', '--version', '1.0', '-o', 'x', '--signing-key', 'k',
             '--encryption-key', 'e'])
        self.assertRaises(exc.BuildError, package_cmd.do_build, args)

    def test_python_that_is_not_one_is_refused(self):
        # A program that failed ended the command as an internal error.
        for python, expected in (
                ('/bin/false', '--python /bin/false is not a Python '
                 'interpreter (exit status 1: no message)'),
                (self.tmp, '--python %s cannot run: ' % self.tmp)):
            e = self.assertRaises(exc.BuildError, wheels.collect,
                                  ['trove==26.0.0'], self.tmp, python=python)
            self.assertIn(expected, str(e))

    def test_missing_constraints_file_is_refused(self):
        cache = os.path.join(self.tmp, 'cache')
        self.assertRaises(exc.BuildError, wheels.collect, ['trove==26.0.0'],
                          cache, constraints=os.path.join(self.tmp, 'no'))
        self.assertFalse(os.path.exists(cache))
