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

"""Schemas of /mgmt/desired-versions and /mgmt/targets."""

from trove_upgrade.api.schemas import packages
from trove_upgrade.api.schemas import rollouts
from trove_upgrade.api.schemas import upgrades

_SCHEMA = 'https://json-schema.org/draft/2020-12/schema'

_THRESHOLDS = {name: field for name, field in rollouts.SHARED_FIELDS.items()
               if name not in ('name', 'selector')}

POST_DESIRED_VERSION = {
    '$schema': _SCHEMA,
    'type': 'object',
    'properties': {'desired_version': {
        'type': 'object',
        'properties': dict(
            rollouts.SHARED_FIELDS, package=upgrades.PACKAGE_NAME,
            version=packages.VERSION),
        'required': ['name', 'package', 'version', 'selector'],
        'additionalProperties': False,
    }},
    'required': ['desired_version'],
    'additionalProperties': False,
}

PATCH_DESIRED_VERSION = {
    '$schema': _SCHEMA,
    'type': 'object',
    'properties': {'desired_version': {
        'type': 'object',
        'properties': dict(_THRESHOLDS, version=packages.VERSION),
        'minProperties': 1,
        'additionalProperties': False,
    }},
    'required': ['desired_version'],
    'additionalProperties': False,
}

LIST_DESIRED_VERSIONS_QUERY = {
    '$schema': _SCHEMA,
    'type': 'object',
    'properties': {
        'status': {'type': 'string', 'enum': ['ACTIVE', 'PAUSED']},
        'name': {'type': 'string', 'minLength': 1, 'maxLength': 255},
    },
    'additionalProperties': False,
}

LIST_TARGETS_QUERY = {
    '$schema': _SCHEMA,
    'type': 'object',
    'properties': {
        'instance_id': {'type': 'string', 'format': 'uuid'},
        'limit': {'type': 'string'},
        'marker': {'type': 'string', 'format': 'uuid'},
    },
    'additionalProperties': False,
}
