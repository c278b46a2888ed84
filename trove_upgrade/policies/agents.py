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
