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

"""Schemas of /mgmt/packages and /mgmt/packages/fleet."""

from trove_upgrade.api.schemas import upgrades

_SCHEMA = 'https://json-schema.org/draft/2020-12/schema'
STATES = ['active', 'deprecated', 'retired']

_NAME = upgrades.PACKAGE_NAME
VERSION = {'type': 'string', 'minLength': 1, 'maxLength': 64,
           'pattern': upgrades.VERSION_PATTERN}

POST_PACKAGE = {
    '$schema': _SCHEMA,
    'type': 'object',
    'properties': {'package': {
        'type': 'object',
        'properties': {
            'name': _NAME,
            'version': VERSION,
            'strategy': {'type': 'string', 'enum': upgrades.STRATEGIES},
            'location': {'type': 'string', 'minLength': 1,
                         'maxLength': 2048,
                         'pattern': upgrades.TEXT_PATTERN},
        },
        'required': ['name', 'version', 'strategy', 'location'],
        'additionalProperties': False,
    }},
    'required': ['package'],
    'additionalProperties': False,
}

PATCH_PACKAGE = {
    '$schema': _SCHEMA,
    'type': 'object',
    'properties': {'package': {
        'type': 'object',
        'properties': {'state': {'type': 'string', 'enum': STATES}},
        'required': ['state'],
        'additionalProperties': False,
    }},
    'required': ['package'],
    'additionalProperties': False,
}

LIST_PACKAGES_QUERY = {
    '$schema': _SCHEMA,
    'type': 'object',
    'properties': {
        'name': {'type': 'string', 'minLength': 1, 'maxLength': 255},
        'state': {'type': 'string', 'enum': STATES},
        # A version, a wildcard (26.*) or a PEP 440 range (>=25.1).
        'version': {'type': 'string', 'minLength': 1, 'maxLength': 128},
    },
    'additionalProperties': False,
}

# Pages of versions: the marker is the last row's version.
FLEET_QUERY = {
    '$schema': _SCHEMA,
    'type': 'object',
    'properties': {
        'limit': {'type': 'string'},
        'marker': VERSION,
    },
    'additionalProperties': False,
}
