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

"""Schemas of /v1.0/{tenant_id}/mgmt/agents."""

LIST_AGENTS_QUERY = {
    '$schema': 'https://json-schema.org/draft/2020-12/schema',
    'type': 'object',
    'properties': {
        'guest_version': {'type': 'string', 'minLength': 1, 'maxLength': 64},
        'state': {'type': 'string', 'minLength': 1, 'maxLength': 32},
        'rpc_api_version': {'type': 'string', 'pattern': '^[0-9]+\\.[0-9]+$'},
        # key:value pairs separated by commas; each must match.
        'labels': {'type': 'string', 'minLength': 3, 'maxLength': 2048,
                   'pattern': '^[^:,]+:[^,]*(,[^:,]+:[^,]*)*$'},
        'group': {'type': 'string', 'minLength': 1, 'maxLength': 255},
        'health': {'type': 'string', 'enum': ['reachable', 'unreachable']},
        'limit': {'type': 'string'},
        'marker': {'type': 'string', 'format': 'uuid'},
    },
    'additionalProperties': False,
}
