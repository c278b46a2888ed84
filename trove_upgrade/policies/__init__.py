"""Every policy rule of trove-upgrade, defined in code.

``list_rules`` is the ``oslo.policy.policies`` entry point: the sample
policy file and the policy reference are generated from it.
"""

import itertools

from trove_upgrade.policies import agents
from trove_upgrade.policies import base
from trove_upgrade.policies import packages
from trove_upgrade.policies import rollouts
from trove_upgrade.policies import upgrades


def list_rules():
    return list(itertools.chain(
        base.list_rules(),
        upgrades.list_rules(),
        agents.list_rules(),
        rollouts.list_rules(),
        packages.list_rules(),
    ))
