"""Policies guarding /v1.0/{tenant_id}/mgmt/upgrades."""

from oslo_policy import policy

from trove_upgrade.policies import base

PREFIX = 'trove_upgrade:upgrades:%s'
CREATE = PREFIX % 'create'
LIST = PREFIX % 'list'
SHOW = PREFIX % 'show'
CANCEL = PREFIX % 'cancel'

_COLLECTION = '/v1.0/{tenant_id}/mgmt/upgrades'
_UPGRADE = _COLLECTION + '/{upgrade_id}'
# Upstream Trove's route, guarded by the same rule.
_INSTANCE_UPGRADE = '/v1.0/{tenant_id}/mgmt/instances/{instance_id}/upgrade'

rules = [
    policy.DocumentedRuleDefault(
        name=CREATE,
        check_str=base.ADMIN_API,
        description='Ask for the guest agent of an instance to be upgraded: '
                    'records the upgrade and sends it to the agent.',
        operations=[{'method': 'POST', 'path': _COLLECTION},
                    {'method': 'POST', 'path': _INSTANCE_UPGRADE}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=LIST,
        check_str=base.ADMIN_API,
        description='List upgrades.',
        operations=[{'method': 'GET', 'path': _COLLECTION}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=SHOW,
        check_str=base.ADMIN_API,
        description='Show an upgrade with its event history.',
        operations=[{'method': 'GET', 'path': _UPGRADE}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=CANCEL,
        check_str=base.ADMIN_API,
        description='Cancel an upgrade the agent has not started.',
        operations=[{'method': 'DELETE', 'path': _UPGRADE}],
        scope_types=['project']),
]


def list_rules():
    return rules
