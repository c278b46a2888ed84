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

"""Policies guarding the package registry and the fleet view."""

from trove_upgrade.policies import base

PREFIX = 'trove_upgrade:packages:%s'
CREATE = PREFIX % 'create'
LIST = PREFIX % 'list'
SHOW = PREFIX % 'show'
UPDATE = PREFIX % 'update'
DELETE = PREFIX % 'delete'
FLEET = PREFIX % 'fleet'

_MGMT = '/v1.0/{tenant_id}/mgmt'
_PACKAGES = _MGMT + '/packages'
_PACKAGE = _PACKAGES + '/{package_id}'


_rule = base.admin_rule

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
]


def list_rules():
    return rules
