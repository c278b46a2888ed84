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

"""The enforcer looks for policy file changes once a second, not per check."""

import os

import fixtures
from oslo_config import cfg
from oslo_policy import opts as policy_opts

from trove_upgrade.common import context
from trove_upgrade.common import exception
from trove_upgrade import policies
from trove_upgrade.policies import upgrades as upgrade_policies
from trove_upgrade import policy
from trove_upgrade.tests import base


class TestEnforcer(base.TestCase):

    def setUp(self):
        super().setUp()
        self.clock = [100.0]
        # A config of its own, parsed: the enforcer looks for its file
        # through it, and the global one may hold other tests' CLI options.
        self.policy_conf = cfg.ConfigOpts()
        self.policy_conf([], project='trove-upgrade',
                         default_config_files=[], default_config_dirs=[])
        self.policy_file = os.path.join(
            self.useFixture(fixtures.TempDir()).path, 'policy.yaml')
        for group, options in policy_opts.list_opts():
            self.policy_conf.register_opts(options, group=group)
        self.policy_conf.set_override('policy_file', self.policy_file,
                                      group='oslo_policy')
        self.enforcer = policy.Enforcer(self.policy_conf,
                                        timer=lambda: self.clock[0])
        self.enforcer.register_defaults(policies.list_rules())
        self.useFixture(fixtures.MockPatchObject(policy, '_ENFORCER',
                                                 self.enforcer))
        self.admin = context.RequestContext(user_id='u', project_id='p',
                                            roles=['admin'])

    def allowed(self):
        try:
            policy.authorize(self.admin, upgrade_policies.CREATE)
        except exception.PolicyNotAuthorizedError:
            return False
        return True

    def write_policy(self, text):
        with open(self.policy_file, 'w') as f:
            f.write(text)
        # oslo.policy tells a change by a newer mtime: make it newer than
        # that of a write earlier in the same clock tick.
        self.mtime = getattr(self, 'mtime', os.stat(f.name).st_mtime) + 10
        os.utime(self.policy_file, (self.mtime, self.mtime))

    def advance(self, seconds):
        self.clock[0] += seconds

    def test_the_dedicated_role_and_admin_are_allowed_by_default(self):
        for roles, allowed in ((['trove_upgrade_admin'], True),
                               (['admin'], True), (['member'], False),
                               (['reader', 'service'], False)):
            self.admin = context.RequestContext(user_id='u', project_id='p',
                                                roles=roles)
            self.assertEqual(allowed, self.allowed(), roles)

    def test_admin_can_be_kept_out(self):
        self.write_policy('admin_api: "role:trove_upgrade_admin"\n')
        self.advance(policy.LOOK_INTERVAL)
        self.assertFalse(self.allowed())
        self.admin = context.RequestContext(
            user_id='u', project_id='p', roles=['trove_upgrade_admin'])
        self.assertTrue(self.allowed())

    def test_a_new_policy_file_takes_effect_at_the_next_look(self):
        self.assertTrue(self.allowed())
        self.write_policy('"%s": "!"\n' % upgrade_policies.CREATE)
        self.advance(policy.LOOK_INTERVAL / 2)
        self.assertTrue(self.allowed())
        self.advance(policy.LOOK_INTERVAL / 2)
        self.assertFalse(self.allowed())

    def test_a_changed_policy_file_takes_effect_at_the_next_look(self):
        self.write_policy('"%s": "!"\n' % upgrade_policies.CREATE)
        self.assertFalse(self.allowed())
        self.write_policy('"%s": "role:admin"\n' % upgrade_policies.CREATE)
        self.advance(policy.LOOK_INTERVAL)
        self.assertTrue(self.allowed())

    def test_no_search_between_looks(self):
        find_file = self.useFixture(fixtures.MockPatchObject(
            self.policy_conf, 'find_file',
            wraps=self.policy_conf.find_file)).mock
        self.allowed()
        looked = find_file.call_count
        self.assertGreater(looked, 0)
        for _ in range(4):
            self.allowed()
        self.assertEqual(looked, find_file.call_count)
        self.advance(policy.LOOK_INTERVAL)
        self.allowed()
        self.assertGreater(find_file.call_count, looked)

    def test_a_policy_file_that_does_not_parse_is_named_at_init(self):
        # oslo.policy's YAML error spans lines and names no file.
        self.write_policy('"%s": [unclosed\n' % upgrade_policies.CREATE)
        error = self.assertRaises(
            exception.InvalidPolicyFileError, policy.init,
            self.policy_conf)
        self.assertIn('The policy file %s cannot be parsed: '
                      % self.policy_file, str(error))
        self.assertNotIn('\n', str(error))

    def test_a_load_that_failed_is_tried_again(self):
        self.write_policy('"%s": [unclosed\n' % upgrade_policies.CREATE)
        self.assertRaises(ValueError, self.allowed)
        self.write_policy('"%s": "!"\n' % upgrade_policies.CREATE)
        self.assertFalse(self.allowed())

    def test_a_file_broken_after_a_load_leaves_its_rules_in_force(self):
        self.write_policy('"%s": "!"\n' % upgrade_policies.CREATE)
        self.assertFalse(self.allowed())
        logged = self.useFixture(fixtures.FakeLogger(name=policy.__name__))
        self.write_policy('"%s": [unclosed\n' % upgrade_policies.CREATE)
        self.advance(policy.LOOK_INTERVAL)
        self.assertFalse(self.allowed())
        self.assertIn('The policy file %s cannot be parsed, the rules '
                      'loaded before stay in force: ' % self.policy_file,
                      logged.output)
        self.assertEqual(1, len(logged.output.splitlines()))
        # Logged once per broken version, not at every look.
        self.advance(policy.LOOK_INTERVAL)
        self.assertFalse(self.allowed())
        self.assertEqual(1, len(logged.output.splitlines()))
        self.write_policy('"%s": "role:admin"\n' % upgrade_policies.CREATE)
        self.advance(policy.LOOK_INTERVAL)
        self.assertTrue(self.allowed())

    def test_the_defaults_stay_in_force_when_a_broken_file_appears(self):
        self.assertTrue(self.allowed())
        self.write_policy('"%s": [unclosed\n' % upgrade_policies.CREATE)
        self.advance(policy.LOOK_INTERVAL)
        self.assertTrue(self.allowed())
        member = context.RequestContext(user_id='u', project_id='p',
                                        roles=['member'])
        self.assertRaises(exception.PolicyNotAuthorizedError, policy.authorize,
                          member, upgrade_policies.CREATE)
