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

"""Schemas of /v1.0/{tenant_id}/mgmt/rollouts."""

from trove_upgrade.api.schemas import upgrades
from trove_upgrade.common import rollout_states

# A count, or a percent written "10%".
_PERCENT = {'type': 'string', 'pattern': '^(100|[1-9]?[0-9])%$'}

_LABEL_VALUE = {'type': 'string', 'minLength': 1, 'maxLength': 255,
                'pattern': upgrades.TEXT_PATTERN}

SELECTOR = {
    'type': 'object',
    'properties': {
        'group': _LABEL_VALUE,
        'labels': {
            'type': 'object', 'minProperties': 1, 'maxProperties': 16,
            'propertyNames': {'minLength': 1, 'maxLength': 255,
                              'pattern': upgrades.TEXT_PATTERN},
            'additionalProperties': _LABEL_VALUE,
        },
        'instance_ids': {
            'type': 'array', 'minItems': 1, 'maxItems': 10000,
            'uniqueItems': True,
            'items': upgrades.INSTANCE,
        },
        # The zone the agents report (rpc_interface.AVAILABILITY_ZONE_LABEL).
        'availability_zone': _LABEL_VALUE,
        # Facts of Trove's database; needs [trove] connection.
        'trove': {
            'type': 'object', 'minProperties': 1,
            'properties': {name: _LABEL_VALUE for name in (
                'datastore', 'datastore_version', 'tenant_id', 'region')},
            'additionalProperties': False,
        },
    },
    'minProperties': 1,
    # At most one of instance_ids, group and labels, with or without
    # availability_zone and trove.
    'maxProperties': 3,
    'not': {'anyOf': [{'required': pair} for pair in (
        ['instance_ids', 'group'], ['instance_ids', 'labels'],
        ['group', 'labels'])]},
    'additionalProperties': False,
}

_ROLLOUT = {
    'type': 'object',
    'properties': {
        'name': {'type': 'string', 'minLength': 1, 'maxLength': 255,
                 'pattern': upgrades.TEXT_PATTERN},
        'instance_version': {'type': 'string', 'minLength': 1,
                             'maxLength': 64,
                             'pattern': upgrades.VERSION_PATTERN},
        'strategy': {'type': 'string', 'enum': upgrades.STRATEGIES},
        'location': {'type': 'string', 'minLength': 1, 'maxLength': 2048,
                     'pattern': upgrades.TEXT_PATTERN},
        'selector': SELECTOR,
        'canary': {'type': 'integer', 'minimum': 0, 'maximum': 10000},
        'max_in_flight': {'oneOf': [
            {'type': 'integer', 'minimum': 1, 'maximum': 100000},
            dict(_PERCENT, pattern='^(100|[1-9][0-9]?)%$')]},
        'max_failures': {'oneOf': [
            {'type': 'integer', 'minimum': 0, 'maximum': 100000},
            _PERCENT]},
        'per_agent_retries': {'type': 'integer', 'minimum': 0,
                              'maximum': 10},
        'agent_deadline': {'type': 'integer', 'minimum': 1,
                           'maximum': 604800},
        'start_at': {'type': 'string', 'format': 'date-time'},
        # Trove's replication sets and clusters (see topology.py).
        'order_by_topology': {'type': 'boolean'},
        'hold_set_on_failure': {'type': 'boolean'},
        # A registered package, instead of strategy and location.
        'package': upgrades.PACKAGE_NAME,
        'expected_manifest': upgrades.EXPECTED_MANIFEST,
    },
    'required': ['name', 'instance_version', 'selector'],
    'additionalProperties': False,
}

# What a desired version takes as a rollout does.
SHARED_FIELDS = {name: _ROLLOUT['properties'][name]
                 for name in ('name', 'selector', 'canary', 'max_in_flight',
                              'max_failures', 'per_agent_retries',
                              'agent_deadline')}

POST_ROLLOUT = {
    '$schema': 'https://json-schema.org/draft/2020-12/schema',
    'type': 'object',
    'properties': {'rollout': _ROLLOUT},
    'required': ['rollout'],
    'additionalProperties': False,
}

LIST_ROLLOUTS_QUERY = {
    '$schema': 'https://json-schema.org/draft/2020-12/schema',
    'type': 'object',
    'properties': {
        'status': {'type': 'string',
                   'enum': sorted(rollout_states.ALL_STATES)},
        'name': {'type': 'string', 'minLength': 1, 'maxLength': 255},
        'limit': {'type': 'string'},
        'marker': {'type': 'string', 'format': 'uuid'},
    },
    'additionalProperties': False,
}
