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

"""Canonical JSON: one spelling per document, nothing else accepted."""

from trove_upgrade.common import canonical
from trove_upgrade.common import exception as exc
from trove_upgrade.tests import base


class TestCanonical(base.TestCase):

    def test_sorted_compact_utf8(self):
        self.assertEqual('{"a":[1,true,null],"b":"é"}'.encode(),
                         canonical.dumps({'b': 'é', 'a': [1, True, None]}))

    def test_round_trip(self):
        value = {'z': {'y': [1, 2, {'x': 'w'}]}, 'a': -5}
        self.assertEqual(value, canonical.loads(canonical.dumps(value)))

    def test_floats_cannot_be_encoded(self):
        self.assertRaises(TypeError, canonical.dumps, {'a': 1.5})

    def test_non_string_keys_cannot_be_encoded(self):
        self.assertRaises(TypeError, canonical.dumps, {1: 'a'})

    def test_refused_spellings(self):
        for data in (b'{"b":1,"a":2}', b'{"a": 1}', b'{"a":1}\n',
                     b'{"a":1.0}', b'{"a":1e3}', b'{"a":NaN}',
                     b'{"a":1,"a":1}', b'{"a":"\\u00e9"}', b'\xff',
                     b'{"a":', b'[' * 100000 + b']' * 100000):
            self.assertRaises(exc.ManifestFormatError, canonical.loads, data)
