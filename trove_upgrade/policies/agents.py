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

"""Policies guarding /v1.0/{tenant_id}/mgmt/agents."""

from oslo_policy import policy

from trove_upgrade.policies import base

PREFIX = 'trove_upgrade:agents:%s'
LIST = PREFIX % 'list'
SHOW = PREFIX % 'show'
DELETE = PREFIX % 'delete'

_COLLECTION = '/v1.0/{tenant_id}/mgmt/agents'

rules = [
    policy.DocumentedRuleDefault(
        name=LIST,
        check_str=base.ADMIN_API,
        description='List the registered upgrade agents.',
        operations=[{'method': 'GET', 'path': _COLLECTION}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=SHOW,
        check_str=base.ADMIN_API,
        description='Show the upgrade agent of an instance.',
        operations=[{'method': 'GET', 'path': _COLLECTION + '/{instance_id}'}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=DELETE,
        check_str=base.ADMIN_API,
        description='Delete the upgrade agent of an instance, once the '
                    'instance is deleted.',
        operations=[{'method': 'DELETE',
                     'path': _COLLECTION + '/{instance_id}'}],
        scope_types=['project']),
]


def list_rules():
    return rules
