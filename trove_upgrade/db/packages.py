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

"""Database API of the package registry and of the fleet's versions.

Kept apart from ``db.api``, one module per resource; it uses the same
enginefacade context manager and returns plain dicts. Version ranges and
wildcards are PEP 440 matches, which SQL cannot do: callers filter the
rows these functions return (``package_registry``).
"""

from oslo_db import exception as db_exc
from oslo_utils import timeutils
from oslo_utils import uuidutils
import sqlalchemy as sa

from trove_upgrade.common import exception
from trove_upgrade.common import states
from trove_upgrade.db import common
from trove_upgrade.db import models

_REQUIRED = frozenset([
    'name', 'version', 'strategy', 'location', 'state', 'size', 'sha256',
    'signer_key_ids', 'manifest_created_at', 'manifest_expires_at'])
_OPTIONAL = frozenset(['min_upgrade_from', 'manifest_sha256',
                       'manifest_package'])
_FILTERS = frozenset(['name', 'state', 'version'])

# An upgrade that ended in one of these did not leave its version running.
FAILED_STATES = frozenset([states.FAILED, states.ROLLED_BACK,
                           states.TIMED_OUT])


def _package_dict(row):
    return {
        'id': row.id,
        'name': row.name,
        'version': row.version,
        'strategy': row.strategy,
        'location': row.location,
        'state': row.state,
        'size': row.size,
        'sha256': row.sha256,
        'min_upgrade_from': row.min_upgrade_from,
        'signer_key_ids': [k for k in row.signer_key_ids.split(',') if k],
        'manifest_created_at': row.manifest_created_at,
        'manifest_expires_at': row.manifest_expires_at,
        'manifest_sha256': row.manifest_sha256,
        'manifest_package': row.manifest_package,
        # What every upgrade to it expects; None for a package registered
        # before its manifest's hash was kept.
        'expected_manifest': row.manifest_sha256 and {
            'sha256': row.manifest_sha256, 'package': row.manifest_package},
        'project_id': row.project_id,
        'user_id': row.user_id,
        'created_at': row.created_at,
        'updated_at': row.updated_at,
    }


def _get_row(session, package_id):
    row = session.get(models.Package, package_id)
    if row is None:
        raise exception.PackageNotFoundError(package=package_id)
    return row


def create_package(context, values):
    """Record a verified package.

    :raises: PackageConflictError when the name and version are registered.
    """
    common.check_keys('package field', values, _REQUIRED | _OPTIONAL,
                      _REQUIRED)
    common.check_strings(models.Package, values,
                         ['name', 'version', 'strategy', 'location',
                          'state', 'sha256', 'min_upgrade_from',
                          'manifest_sha256', 'manifest_package'])
    now = timeutils.utcnow()
    row = models.Package(
        id=uuidutils.generate_uuid(),
        project_id=context.project_id, user_id=context.user_id,
        created_at=now, updated_at=now,
        **dict(values, signer_key_ids=','.join(values['signer_key_ids']),
               manifest_created_at=timeutils.normalize_time(
                   values['manifest_created_at']),
               manifest_expires_at=timeutils.normalize_time(
                   values['manifest_expires_at'])))
    try:
        with common.context_manager.writer.using(context) as session:
            session.add(row)
            session.flush()
            return _package_dict(row)
    except db_exc.DBDuplicateEntry:
        raise exception.PackageConflictError(reason=(
            'Package %s version %s is registered already.'
            % (values['name'], values['version'])))


def get_package(context, package_id):
    with common.context_manager.reader.using(context) as session:
        return _package_dict(_get_row(session, package_id))


def find_package(context, name, version):
    """The package of ``name`` at exactly ``version``, or None."""
    with common.context_manager.reader.using(context) as session:
        row = session.scalars(
            sa.select(models.Package)
            .where(models.Package.name == name,
                   models.Package.version == version)).first()
        return row and _package_dict(row)


def list_packages(context, filters=None):
    """Packages matching ``filters`` exactly, by name then registration."""
    filters = filters or {}
    common.check_keys('package filter', filters, _FILTERS)
    query = sa.select(models.Package).order_by(
        models.Package.name, models.Package.created_at, models.Package.id)
    for key, value in filters.items():
        query = query.where(getattr(models.Package, key) == value)
    with common.context_manager.reader.using(context) as session:
        return [_package_dict(row) for row in session.scalars(query)]


def update_package_state(context, package_id, state):
    with common.context_manager.writer.using(context) as session:
        # The write first: on SQLite, a transaction that reads and then
        # writes is refused at once ("database is locked") when another
        # wrote in between (the conductor, say); one that writes first
        # waits for the lock.
        _write_first(session, sa.update(models.Package)
                     .where(models.Package.id == package_id)
                     .values(state=state, updated_at=timeutils.utcnow()),
                     package_id)
        return _package_dict(_get_row(session, package_id))


def delete_package(context, package_id):
    with common.context_manager.writer.using(context) as session:
        _write_first(session, sa.delete(models.Package)
                     .where(models.Package.id == package_id), package_id)


def _write_first(session, statement, package_id):
    """Run ``statement`` on the package's row; PackageNotFoundError if none."""
    changed = session.execute(
        statement.execution_options(synchronize_session=False)).rowcount
    if not changed:
        raise exception.PackageNotFoundError(package=package_id)


def list_unfinished_upgrades_of(context, strategy, location):
    """Ids of the upgrades in flight that fetch ``location``."""
    upgrade = models.Upgrade
    with common.context_manager.reader.using(context) as session:
        return list(session.scalars(
            sa.select(upgrade.id)
            .where(upgrade.strategy == strategy,
                   upgrade.location == location,
                   upgrade.status.not_in(states.FINAL_STATES))
            .order_by(upgrade.created_at, upgrade.id)))


def list_rollouts_of(context, strategy, location, statuses):
    """Ids and names of the rollouts in ``statuses`` sending ``location``."""
    rollout = models.Rollout
    with common.context_manager.reader.using(context) as session:
        return [{'id': r[0], 'name': r[1]} for r in session.execute(
            sa.select(rollout.id, rollout.name)
            .where(rollout.strategy == strategy,
                   rollout.location == location,
                   rollout.status.in_(sorted(statuses)))
            .order_by(rollout.created_at, rollout.id))]


def count_agents_by_version(context):
    """``{guest_version: number of agents}``: what the fleet runs."""
    agent = models.Agent
    with common.context_manager.reader.using(context) as session:
        return dict(session.execute(
            sa.select(agent.guest_version, sa.func.count())
            .group_by(agent.guest_version)).all())


def list_agents_running(context, versions):
    """Instance ids of the agents reporting one of ``versions``."""
    agent = models.Agent
    with common.context_manager.reader.using(context) as session:
        return list(session.scalars(
            sa.select(agent.instance_id)
            .where(agent.guest_version.in_(sorted(versions)))
            .order_by(agent.instance_id)))


def count_latest_upgrades(context):
    """Instances counted by their newest upgrade and their agent's version.

    Returns ``[(upgrade version, status, version the agent runs or None,
    count)]``: what the fleet view counts as in flight or failed, grouped
    in SQL so that the fleet's size does not reach Python. The newest
    upgrade is the last created, the greatest id among equals.
    """
    upgrade = models.Upgrade
    agent = models.Agent
    ranked = sa.select(
        upgrade.instance_id, upgrade.instance_version, upgrade.status,
        sa.func.row_number().over(
            partition_by=upgrade.instance_id,
            order_by=(upgrade.created_at.desc(), upgrade.id.desc())
        ).label('rank')).subquery()
    with common.context_manager.reader.using(context) as session:
        return [tuple(r) for r in session.execute(
            sa.select(ranked.c.instance_version, ranked.c.status,
                      agent.guest_version, sa.func.count())
            .select_from(ranked)
            .outerjoin(agent, agent.instance_id == ranked.c.instance_id)
            .where(ranked.c.rank == 1)
            .group_by(ranked.c.instance_version, ranked.c.status,
                      agent.guest_version)).all()]
