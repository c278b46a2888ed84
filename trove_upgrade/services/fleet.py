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

from trove_upgrade.common import exception
from trove_upgrade.common import states
from trove_upgrade.common import versions
from trove_upgrade.db import packages as db
from trove_upgrade.services import desired_versions


def _behind(running, target):
    """Whether an agent at ``running`` is still to be upgraded to target.

    Owners only upgrade: an agent already past its target is not headed
    for it. An agent reporting no version or an unparsable one is.
    """
    found = versions.parse(running)
    return found is None or found < versions.parse(target)


def summary(context, limit=None, marker=None):
    """One row per version, oldest first; one page of them.

    Each row has ``version``, ``running``, ``targeted``, ``in_flight``,
    ``failed`` and ``packages``.

    ``targeted`` counts agents whose owner's target (see
    ``desired_versions.owners``) is the version and that run an older
    one; ``in_flight`` and ``failed`` count agents not running it whose
    newest upgrade is to it and has not ended, or ended FAILED,
    ROLLED_BACK or TIMED_OUT. Running, in flight and failed are counted
    by SQL; the targets need each owner's selector. ``marker`` is the
    ``version`` of the last row of the previous page.

    :raises: MarkerNotFoundError when no row has the version ``marker``.
    """
    rows = collections.defaultdict(lambda: {
        'running': 0, 'targeted': 0, 'in_flight': 0, 'failed': 0,
        'packages': []})
    for version, count in db.count_agents_by_version(context).items():
        if version is not None:
            rows[versions.label(version)]['running'] += count
    for owner, running in desired_versions.first_owners(context).values():
        if _behind(running, owner['version']):
            rows[versions.label(owner['version'])]['targeted'] += 1
    for version, status, running, count in db.count_latest_upgrades(
            context):
        if versions.same(running, version):
            continue
        if status in db.FAILED_STATES:
            rows[versions.label(version)]['failed'] += count
        elif status not in states.FINAL_STATES:
            rows[versions.label(version)]['in_flight'] += count
    for package in db.list_packages(context):
        rows[versions.label(package['version'])]['packages'].append(
            {'id': package['id'], 'name': package['name'],
             'state': package['state']})
    names = sorted(rows, key=versions.sort_key)
    if marker is not None:
        after = [i for i, name in enumerate(names)
                 if versions.same(name, marker)]
        if not after:
            raise exception.MarkerNotFoundError(marker=marker)
        names = names[after[-1] + 1:]
    return [dict(rows[name], version=name) for name in names[:limit]]
