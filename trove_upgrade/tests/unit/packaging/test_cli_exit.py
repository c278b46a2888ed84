"""trove-upgrade-package tells a refusal from an internal error."""

from unittest import mock

from trove_upgrade.cmd import package
from trove_upgrade.packaging import exceptions
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
