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

"""Every policy rule of trove-upgrade, defined in code.

``list_rules`` is the ``oslo.policy.policies`` entry point: the sample
policy file and the policy reference are generated from it.
"""

import itertools

from trove_upgrade.policies import agents
from trove_upgrade.policies import base
from trove_upgrade.policies import desired_versions
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
        desired_versions.list_rules(),
    ))
