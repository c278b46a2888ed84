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

"""Schemas of /v1.0/{tenant_id}/mgmt/upgrades."""

from trove_upgrade.common import rpc_interface
from trove_upgrade.common import states
from trove_upgrade import strategy_plugins

# Read when the API starts: a strategy plugin installed later is accepted
# once the API is restarted, as every plugin of a service.
STRATEGIES = strategy_plugins.installed()

# Printable text: no control characters, which have no business in a
# version, a location or a label and would corrupt logs.
TEXT_PATTERN = '^[^\\x00-\\x1f\\x7f]*$'
# No space and no control character: a NUL is not a space to \S and once
# reached PostgreSQL, which cannot hold one (500).
VERSION_PATTERN = '^[^\\s\\x00-\\x1f\\x7f]+$'

# An instance id, or with [trove] connection set an instance name too.
INSTANCE = {'type': 'string', 'minLength': 1, 'maxLength': 255,
            'pattern': TEXT_PATTERN}
PACKAGE_NAME = {'type': 'string', 'minLength': 1, 'maxLength': 255,
                'pattern': '^[A-Za-z0-9][A-Za-z0-9._-]*$'}

# The manifest the agent must get (rpc_interface's expected_manifest):
# the SHA-256 of its manifest file and the package name it signs.
EXPECTED_MANIFEST = {
    'type': 'object',
    'properties': {
        'sha256': {'type': ['string', 'null'],
                   'pattern': '^[0-9a-f]{64}$'},
        'package': {'oneOf': [PACKAGE_NAME, {'type': 'null'}]},
    },
    'additionalProperties': False,
}

_UPGRADE = {
    'type': 'object',
    'properties': {
        'instance_id': INSTANCE,
        # Checked again by the handler: pip must be able to compare it.
        'instance_version': {
            'type': 'string', 'minLength': 1, 'maxLength': 64,
            'pattern': VERSION_PATTERN,
        },
        'strategy': {'type': 'string', 'enum': STRATEGIES},
        'location': {
            'type': 'string', 'minLength': 1, 'maxLength': 2048,
            'pattern': TEXT_PATTERN,
        },
        'metadata': {
            'type': 'object',
            'maxProperties': rpc_interface.MAX_METADATA_ITEMS,
            'propertyNames': {
                'minLength': 1,
                'maxLength': rpc_interface.MAX_METADATA_KEY_LENGTH,
                'pattern': TEXT_PATTERN,
            },
            'additionalProperties': {
                'type': ['string', 'number', 'boolean', 'null'],
                'maxLength': rpc_interface.MAX_METADATA_VALUE_LENGTH,
            },
        },
        'allow_downgrade': {'type': 'boolean'},
        # A registered package, instead of strategy and location.
        'package': PACKAGE_NAME,
        'expected_manifest': EXPECTED_MANIFEST,
    },
    'required': ['instance_id', 'instance_version'],
    'additionalProperties': False,
}

# The Trove design's flat body, or upstream Trove's {"upgrade": {...}}.
POST_UPGRADE = {
    '$schema': 'https://json-schema.org/draft/2020-12/schema',
    'if': {'type': 'object', 'required': ['upgrade']},
    'then': {
        'type': 'object',
        'properties': {'upgrade': _UPGRADE},
        'additionalProperties': False,
    },
    'else': _UPGRADE,
}

# Upstream Trove's POST /mgmt/instances/{instance_id}/upgrade: the instance
# is in the path, and the strategy, when not given, follows from the
# location (see handlers.upgrades.strategy_from_location).
_INSTANCE_UPGRADE = dict(
    _UPGRADE,
    properties={name: value for name, value in _UPGRADE['properties'].items()
                if name != 'instance_id'},
    required=['instance_version', 'location'])

POST_INSTANCE_UPGRADE = {
    '$schema': 'https://json-schema.org/draft/2020-12/schema',
    'type': 'object',
    'properties': {'upgrade': _INSTANCE_UPGRADE},
    'required': ['upgrade'],
    'additionalProperties': False,
}

LIST_UPGRADES_QUERY = {
    '$schema': 'https://json-schema.org/draft/2020-12/schema',
    'type': 'object',
    'properties': {
        'instance_id': {'type': 'string', 'format': 'uuid'},
        'status': {'type': 'string', 'enum': sorted(states.ALL_STATES)},
        'instance_version': {
            'type': 'string', 'minLength': 1, 'maxLength': 64,
        },
        'limit': {'type': 'string'},
        'marker': {'type': 'string', 'format': 'uuid'},
    },
    'additionalProperties': False,
}
