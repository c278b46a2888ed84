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

"""Policies guarding the package registry, desired versions and targets."""

from oslo_policy import policy

from trove_upgrade.policies import base

PREFIX = 'trove_upgrade:packages:%s'
CREATE = PREFIX % 'create'
LIST = PREFIX % 'list'
SHOW = PREFIX % 'show'
UPDATE = PREFIX % 'update'
DELETE = PREFIX % 'delete'
FLEET = PREFIX % 'fleet'

DV_PREFIX = 'trove_upgrade:desired_versions:%s'
DV_CREATE = DV_PREFIX % 'create'
DV_LIST = DV_PREFIX % 'list'
DV_SHOW = DV_PREFIX % 'show'
DV_UPDATE = DV_PREFIX % 'update'
DV_PAUSE = DV_PREFIX % 'pause'
DV_RESUME = DV_PREFIX % 'resume'
DV_DELETE = DV_PREFIX % 'delete'

TARGETS = 'trove_upgrade:targets:list'

_MGMT = '/v1.0/{tenant_id}/mgmt'
_PACKAGES = _MGMT + '/packages'
_PACKAGE = _PACKAGES + '/{package_id}'
_DESIRED = _MGMT + '/desired-versions'
_ONE_DESIRED = _DESIRED + '/{desired_version_id}'


def _rule(name, description, method, path):
    return policy.DocumentedRuleDefault(
        name=name, check_str=base.ADMIN_API, description=description,
        operations=[{'method': method, 'path': path}],
        scope_types=['project'])


rules = [
    _rule(CREATE, 'Register a package after verifying its signed manifest.',
          'POST', _PACKAGES),
    _rule(LIST, 'List registered packages.', 'GET', _PACKAGES),
    _rule(SHOW, 'Show a registered package.', 'GET', _PACKAGE),
    _rule(UPDATE, 'Deprecate, retire or reactivate a package.', 'PATCH',
          _PACKAGE),
    _rule(DELETE, 'Delete a package nothing uses.', 'DELETE', _PACKAGE),
    _rule(FLEET, 'Show the versions the fleet runs, targets and failed.',
          'GET', _PACKAGES + '/fleet'),
    _rule(DV_CREATE, 'Declare the version a selection of agents runs.',
          'POST', _DESIRED),
    _rule(DV_LIST, 'List desired versions.', 'GET', _DESIRED),
    _rule(DV_SHOW, 'Show a desired version with its agents and events.',
          'GET', _ONE_DESIRED),
    _rule(DV_UPDATE, "Change a desired version's version or thresholds.",
          'PATCH', _ONE_DESIRED),
    _rule(DV_PAUSE, 'Pause a desired version: nothing new is dispatched.',
          'POST', _ONE_DESIRED + '/pause'),
    _rule(DV_RESUME, 'Resume a desired version, acknowledging failures.',
          'POST', _ONE_DESIRED + '/resume'),
    _rule(DV_DELETE, 'Delete a desired version.', 'DELETE', _ONE_DESIRED),
    _rule(TARGETS, "Show each instance's target version, its owner and "
                   "why.", 'GET', _MGMT + '/targets'),
]


def list_rules():
    return rules
