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

"""The fleet view: per version, what runs it, what is headed for it.

Agents report a version, not a package: versions are compared as PEP 440
versions (``v2.0`` and ``2.0.0`` are one row), and every registered
package of a version is listed in its row.
"""

import collections

from trove_upgrade.db import agents as db_agents
from trove_upgrade.db import packages as db
from trove_upgrade import desired_versions
from trove_upgrade import package_registry
from trove_upgrade import states


def _key(version):
    found = package_registry._safe_version(version)
    return str(found) if found is not None else version


def _sort_key(version):
    found = package_registry._safe_version(version)
    return (0, found, '') if found is not None else (1, None, version)


def _behind(running, target):
    """Whether an agent at ``running`` is still to be upgraded to target.

    Owners only upgrade: an agent already past its target is not headed
    for it. An agent reporting no version or an unparsable one is.
    """
    found = package_registry._safe_version(running)
    return found is None or found < package_registry._safe_version(target)


def summary(context):
    """One row per version, oldest first.

    Each row has ``version``, ``running``, ``targeted``, ``in_flight``,
    ``failed`` and ``packages``.

    ``targeted`` counts agents whose owner's target (see
    ``desired_versions.owners``) is the version and that run an older
    one; ``in_flight`` and ``failed`` count agents not running it whose
    newest upgrade is to it and has not ended, or ended FAILED,
    ROLLED_BACK or TIMED_OUT.
    """
    rows = collections.defaultdict(lambda: {
        'running': 0, 'targeted': 0, 'in_flight': 0, 'failed': 0,
        'packages': []})
    running = {}
    for agent in db_agents.list_agents(context):
        running[agent['instance_id']] = agent['guest_version']
        if agent['guest_version'] is not None:
            rows[_key(agent['guest_version'])]['running'] += 1
    for instance_id, owners in desired_versions.owners(context).items():
        target = owners[0]['version']
        if _behind(running.get(instance_id), target):
            rows[_key(target)]['targeted'] += 1
    for instance_id, (version, status) in db.latest_upgrades(
            context).items():
        if package_registry.same_version(running.get(instance_id), version):
            continue
        if status in db.FAILED_STATES:
            rows[_key(version)]['failed'] += 1
        elif status not in states.FINAL_STATES:
            rows[_key(version)]['in_flight'] += 1
    for package in db.list_packages(context):
        rows[_key(package['version'])]['packages'].append(
            {'id': package['id'], 'name': package['name'],
             'state': package['state']})
    return [dict(row, version=version) for version, row in sorted(
        rows.items(), key=lambda item: _sort_key(item[0]))]
