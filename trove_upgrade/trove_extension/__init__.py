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

"""trove-upgrade's management API as an extension of Trove's own API.

Installed beside ``trove-api``, trove-upgrade registers
``extension:TroveUpgradeExtension`` in Trove's ``trove.api.extensions``
entry-point group, as Trove registers its own ``mgmt`` extension. It
serves nothing until ``[trove_upgrade] enabled = true`` in trove.conf; it
then serves every mgmt route of the standalone API (upgrades, agents,
rollouts, packages, desired versions, targets and upstream Trove's
``instances/{instance_id}/upgrade``) on Trove's endpoint, behind
Trove's authentication and context middleware, through the standalone
API's own router and handlers.

This package imports nothing of Trove or of ``trove_upgrade.conf`` at
import time, so the option listing of ``opts`` works anywhere.
"""
