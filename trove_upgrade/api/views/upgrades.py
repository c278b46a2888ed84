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

"""What the API shows of upgrades and their events."""

from trove_upgrade.api import util
from trove_upgrade.api.views import common


def url(req, tenant_id, upgrade_id):
    return common.url(req, tenant_id, 'upgrades', upgrade_id)


def _event(event):
    return {
        'created_at': util.isotime(event['created_at']),
        'source': event['source'],
        'from_state': event['from_state'],
        'to_state': event['to_state'],
        'detail': event['detail'],
        'request_id': event['request_id'],
    }


def upgrade(req, tenant_id, upgrade):
    """One upgrade; its ``events`` when the dict carries them."""
    body = {
        'id': upgrade['id'],
        'instance_id': upgrade['instance_id'],
        'instance_version': upgrade['instance_version'],
        'from_version': upgrade['from_version'],
        'strategy': upgrade['strategy'],
        'location': upgrade['location'],
        'metadata': upgrade['metadata'],
        'allow_downgrade': upgrade['allow_downgrade'],
        'expected_manifest': upgrade['expected_manifest'],
        'status': upgrade['status'],
        'status_detail': upgrade['status_detail'],
        'rollout_id': upgrade['rollout_id'],
        'project_id': upgrade['project_id'],
        'user_id': upgrade['user_id'],
        'request_id': upgrade['request_id'],
        'created_at': util.isotime(upgrade['created_at']),
        'updated_at': util.isotime(upgrade['updated_at']),
        'finished_at': util.isotime(upgrade['finished_at']),
        'links': common.links(req, tenant_id, 'upgrades', upgrade['id']),
    }
    if 'events' in upgrade:
        body['events'] = [_event(e) for e in upgrade['events']]
    return body
