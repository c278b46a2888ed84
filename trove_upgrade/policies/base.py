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

ADMIN_API = 'rule:admin_api'

rules = [
    policy.RuleDefault(
        name='admin_api',
        check_str='role:admin',
        description='Who may use the management API. Every upgrade and '
                    'agent call defaults to this rule, so overriding it '
                    'changes them all at once.'),
]


def list_rules():
    return rules
