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

"""Rules the per-resource rules are built from."""

from oslo_policy import policy

# The role of those who upgrade the fleet's guest agents. In Keystone a
# project's admin role is admin of the whole cloud to every service that
# checks role:admin alone; a role of the service's own, as OpenStack's
# secure RBAC guidance has services define (Octavia's
# load-balancer_admin), can be given without it.
ADMIN_ROLE = 'trove_upgrade_admin'
ADMIN_API = 'rule:admin_api'


def admin_rule(name, description, method, path):
    """A documented rule of one operation, for the admin API's users."""
    return policy.DocumentedRuleDefault(
        name=name, check_str=ADMIN_API, description=description,
        operations=[{'method': method, 'path': path}],
        scope_types=['project'])


rules = [
    policy.RuleDefault(
        name='admin_api',
        check_str='role:%s or role:admin' % ADMIN_ROLE,
        description='Who may use the management API: the %s role, and '
                    'admin so that existing deployments keep working. Set '
                    'it to "role:%s" to keep the admins of other services '
                    'out. Every upgrade and agent call defaults to this '
                    'rule, so overriding it changes them all at once.'
                    % (ADMIN_ROLE, ADMIN_ROLE)),
]


def list_rules():
    return rules
