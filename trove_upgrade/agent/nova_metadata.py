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

"""The instance's availability zone, as Nova tells the guest.

Trove's database does not record an instance's availability zone; Nova
writes it, with the rest of the instance's metadata, to
``openstack/latest/meta_data.json`` on the config drive. The agent reads
it once, at start, and reports it in its labels
(``rpc_interface.AVAILABILITY_ZONE_LABEL``), which a rollout's
``availability_zone`` selects by. A zone cannot stop the agent: a file
that cannot be used is logged and no zone is reported, and the agent goes
on upgrading whatever selects it otherwise.
"""

import json
import re

from oslo_log import log as logging

from trove_upgrade.common import exception as package_exc
from trove_upgrade.common import rpc_interface
from trove_upgrade.common import sealing

LOG = logging.getLogger(__name__)

# What a selector's label value may be (api/schemas/rollouts.py): a zone
# that no selector could name is not reported.
_ZONE_RE = re.compile('[^\x00-\x1f\x7f]{1,255}')
# A config drive's meta_data.json holds a few kilobytes; more is not one.
MAX_METADATA_SIZE = 1024 * 1024
MAX_LOGGED_ERROR = 200


def availability_zone(path):
    """The ``availability_zone`` of the meta_data.json at ``path``, or None.

    None when the file is missing, unreadable or malformed, or its zone is
    not 1 to 255 characters without control characters.
    """
    try:
        with open(path, 'rb') as f:
            data = f.read(MAX_METADATA_SIZE + 1)
        if len(data) > MAX_METADATA_SIZE:
            raise ValueError('more than %d bytes' % MAX_METADATA_SIZE)
        metadata = json.loads(data)
    except FileNotFoundError:
        LOG.info('No Nova metadata at %s: no availability zone reported.',
                 path)
        return None
    except (OSError, ValueError, RecursionError) as e:
        LOG.warning('Nova metadata %s cannot be read (%s): no availability '
                    'zone reported.', path,
                    package_exc.bounded(e, MAX_LOGGED_ERROR))
        return None
    zone = metadata.get('availability_zone') if isinstance(
        metadata, dict) else None
    if not (isinstance(zone, str) and _ZONE_RE.fullmatch(zone)
            and sealing.sealable_text(zone)):
        LOG.warning('Nova metadata %s has no usable availability_zone '
                    '(%s): none reported.', path, package_exc.quoted(zone))
        return None
    return zone


def labels(conf):
    """The labels the agent reports: ``[agent] labels`` and its zone.

    A zone given in ``[agent] labels`` wins over the metadata's.
    """
    reported = dict(conf.agent.labels)
    # One label more than the conductor takes would refuse them all.
    if (rpc_interface.AVAILABILITY_ZONE_LABEL not in reported
            and len(reported) < rpc_interface.MAX_LABELS
            and conf.agent.nova_metadata_file):
        zone = availability_zone(conf.agent.nova_metadata_file)
        if zone is not None:
            reported[rpc_interface.AVAILABILITY_ZONE_LABEL] = zone
    return reported
