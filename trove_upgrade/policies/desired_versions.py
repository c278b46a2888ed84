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

"""Policies guarding desired versions and the targets they give."""

from trove_upgrade.policies import base

PREFIX = 'trove_upgrade:desired_versions:%s'
CREATE = PREFIX % 'create'
LIST = PREFIX % 'list'
SHOW = PREFIX % 'show'
UPDATE = PREFIX % 'update'
PAUSE = PREFIX % 'pause'
RESUME = PREFIX % 'resume'
DELETE = PREFIX % 'delete'

TARGETS = 'trove_upgrade:targets:list'

_MGMT = '/v1.0/{tenant_id}/mgmt'
_DESIRED = _MGMT + '/desired-versions'
_ONE_DESIRED = _DESIRED + '/{desired_version_id}'

_rule = base.admin_rule

rules = [
    _rule(CREATE, 'Declare the version a selection of agents runs.',
          'POST', _DESIRED),
    _rule(LIST, 'List desired versions.', 'GET', _DESIRED),
    _rule(SHOW, 'Show a desired version with its agents and events.',
          'GET', _ONE_DESIRED),
    _rule(UPDATE, "Change a desired version's version or thresholds.",
          'PATCH', _ONE_DESIRED),
    _rule(PAUSE, 'Pause a desired version: nothing new is dispatched.',
          'POST', _ONE_DESIRED + '/pause'),
    _rule(RESUME, 'Resume a desired version, acknowledging failures.',
          'POST', _ONE_DESIRED + '/resume'),
    _rule(DELETE, 'Delete a desired version.', 'DELETE', _ONE_DESIRED),
    _rule(TARGETS, "Show each instance's target version, its owner and "
                   "why.", 'GET', _MGMT + '/targets'),
]


def list_rules():
    return rules
