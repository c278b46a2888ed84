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
