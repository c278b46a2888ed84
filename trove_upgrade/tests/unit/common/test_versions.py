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

"""One rule for versions: parsing, sameness, names, order and queries."""

from trove_upgrade.common import exception
from trove_upgrade.common import versions
from trove_upgrade.tests import base


class TestSameVersion(base.TestCase):

    def test_pep440_versions_are_compared_not_spelled(self):
        for a, b in (('2.0', '2.0.0'), ('v2.0', '2.0.0.0'), ('V2', '2.0'),
                     ('2.1RC1', '2.1rc1'), ('1!2.0', '1!2.0.0')):
            self.assertTrue(versions.same(a, b), (a, b))
        for a, b in (('2.0', '2.0.1'), ('2.1rc1', '2.1'), ('1!2.0', '2.0'),
                     ('vv2.0', '2.0'), (' 2.0', '2.0')):
            self.assertFalse(versions.same(a, b), (a, b))

    def test_opaque_versions_are_the_same_only_as_themselves(self):
        self.assertTrue(versions.same('custom-build', 'custom-build'))
        self.assertTrue(versions.same('vcustom', 'custom'))
        self.assertFalse(versions.same('custom', 'Custom'))
        self.assertFalse(versions.same('vvcustom', 'custom'))
        self.assertFalse(versions.same('custom', '2.0'))

    def test_none_is_no_version(self):
        self.assertFalse(versions.same(None, None))
        self.assertFalse(versions.same(None, '2.0'))

    def test_parse(self):
        self.assertEqual(versions.parse('2.0.0'), versions.parse('v2'))
        self.assertIsNone(versions.parse('custom'))
        self.assertIsNone(versions.parse(None))
        self.assertIsNone(versions.parse('1' * 5000))
        self.assertEqual(versions.parse('2.0'), versions.require('2.0.0'))
        e = self.assertRaises(exception.InvalidInputError, versions.require,
                              'x.y')
        self.assertIn("'x.y' is not a version", str(e))


class TestLabelAndOrder(base.TestCase):

    def test_one_name_for_the_same_version(self):
        self.assertEqual({'2.0.0'}, {versions.label(v) for v in (
            '2', 'v2.0', '2.0.0', '2.0.0.0')})
        self.assertEqual('2.0.0.1', versions.label('2.0.0.1'))
        self.assertEqual('1!2.1.0rc1', versions.label('1!2.1rc1'))
        self.assertEqual('custom', versions.label('vcustom'))

    def test_pep440_first_then_opaque_by_text(self):
        self.assertEqual(
            ['2.1rc1', 'v2.1', '10.0', 'beta', 'custom'],
            sorted(['custom', '10.0', 'v2.1', 'beta', '2.1rc1'],
                   key=versions.sort_key))


class TestVersionMatcher(base.TestCase):

    VERSIONS = ['24.0.0', '25.0.0', '25.1.0', 'v26.0.0', '26.0.0rc1',
                '26.1.0', '27.0.0', 'not-a-version']

    def matching(self, query):
        matches = versions.matcher(query)
        return [v for v in self.VERSIONS if matches(v)]

    def test_exact_versions_are_compared_not_spelled(self):
        self.assertEqual(['v26.0.0'], self.matching('26.0'))
        self.assertEqual(['v26.0.0'], self.matching('v26.0.0'))
        self.assertEqual([], self.matching('26.0.1'))

    def test_wildcards(self):
        self.assertEqual(['v26.0.0', '26.0.0rc1', '26.1.0'],
                         self.matching('26.*'))
        self.assertEqual(['25.1.0'], self.matching('25.1.*'))

    def test_ranges(self):
        self.assertEqual(['25.1.0', 'v26.0.0', '26.0.0rc1', '26.1.0',
                          '27.0.0'], self.matching('>=25.1'))
        self.assertEqual(['25.0.0', '25.1.0', 'v26.0.0', '26.0.0rc1'],
                         self.matching('>=25,<26.1'))
        self.assertEqual(['v26.0.0', '26.1.0'], self.matching('~=26.0'))

    def test_bad_queries(self):
        for query in ('>=x', '26.*.1', 'latest', '=>25'):
            self.assertRaises(exception.InvalidInputError,
                              versions.matcher, query)
