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

"""The checked-in sample config and policy must match what the code says.

Both samples are generated from the options and rules in code (tox -e
genconfig, tox -e genpolicy); these tests fail when someone changes an option
or a rule without regenerating them.
"""

import os
import subprocess
import sys

import fixtures

from trove_upgrade.tests import base

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..',
                                    '..'))
GENERATORS = os.path.join(ROOT, 'tools', 'config')


class TestGeneratedSamples(base.TestCase):

    def _generate(self, tool, generator_conf, checked_in):
        out = os.path.join(self.useFixture(fixtures.TempDir()).path, 'out')
        subprocess.run(
            [os.path.join(os.path.dirname(sys.executable), tool),
             '--config-file', os.path.join(GENERATORS, generator_conf),
             '--output-file', out],
            check=True, cwd=ROOT, capture_output=True)
        with open(out) as generated, \
                open(os.path.join(ROOT, checked_in)) as current:
            self.assertEqual(
                generated.read(), current.read(),
                '%s is stale: regenerate it with tox' % checked_in)

    def test_config_sample_is_current(self):
        self._generate('oslo-config-generator',
                       'trove-upgrade-config-generator.conf',
                       'etc/trove-upgrade/trove-upgrade.conf.sample')

    def test_policy_sample_is_current(self):
        self._generate('oslopolicy-sample-generator',
                       'trove-upgrade-policy-generator.conf',
                       'etc/trove-upgrade/policy.yaml.sample')
