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

"""trove-upgrade-package tells a refusal from an internal error."""

from unittest import mock

from trove_upgrade.cmd import package
from trove_upgrade.common import exception as exceptions
from trove_upgrade.tests import base


class TestExitStatus(base.TestCase):

    def test_missing_file_exits_3(self):
        with mock.patch('sys.stderr'):
            status = package.main(['inspect', '/nonexistent.manifest'])
        self.assertEqual(package.EXIT_IO_ERROR, status)

    def test_internal_error_exits_4_with_a_bounded_message(self):
        with mock.patch.object(package, 'do_inspect',
                               side_effect=RuntimeError('x' * 100000)), \
                mock.patch('sys.stderr') as stderr:
            status = package.main(['inspect', 'any.manifest'])
        self.assertEqual(package.EXIT_INTERNAL_ERROR, status)
        printed = ''.join(c.args[0] for c in stderr.write.mock_calls)
        self.assertIn('internal error', printed)
        self.assertLess(len(printed), 2048)

    def test_package_error_exits_1(self):
        with mock.patch.object(package, 'do_inspect',
                               side_effect=exceptions.ManifestFormatError(
                                   'bad')), \
                mock.patch('sys.stderr'):
            status = package.main(['inspect', 'any.manifest'])
        self.assertEqual(package.EXIT_REFUSED, status)
