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

"""Schema migrations with alembic, for the manage command and the tests.

The revisions form one chain, and each belongs to a phase of a rolling
upgrade (its module's ``phase``; ``expand`` when it names none, as every
revision from before the phases did):

* ``expand`` only adds what the previous release ignores (tables, nullable
  or defaulted columns, indexes): applied while the previous release's
  API and conductors still serve;
* ``migrate`` moves data, online, between the expansion and the new
  services;
* ``contract`` removes what only the previous release used: applied once
  none of its API and conductors runs any more.

``trove-upgrade-manage db expand|migrate|contract`` applies the pending
revisions of its phase, as keystone's ``db_sync --expand/--migrate/
--contract`` and glance's ``db expand|migrate|contract`` do; ``db sync``
applies them all. One chain rather than alembic branches keeps one
revision in ``alembic_version``, which the previous release's services
read at start: a revision they do not know is served on (``NEWER``).
"""

import os

from alembic import command as alembic_command
from alembic import config as alembic_config
from alembic import migration as alembic_migration
from alembic import script as alembic_script
from alembic.script import revision as alembic_revision
from alembic import util as alembic_util
from oslo_log import log as logging
import sqlalchemy as sa

from trove_upgrade.common import exception
from trove_upgrade.db import common
from trove_upgrade.db import exception as errors

LOG = logging.getLogger(__name__)

# What the services' refusal tells an operator to run.
DB_SYNC = 'trove-upgrade-manage db sync'
ROLLING_STEPS = ('trove-upgrade-manage db expand, then trove-upgrade-manage '
                 'db migrate')

_SCRIPT_LOCATION = os.path.join(os.path.dirname(__file__), 'migrations')


def _alembic_config(connection=None, script_location=None):
    config = alembic_config.Config()
    config.set_main_option('script_location',
                           script_location or _SCRIPT_LOCATION)
    config.attributes['connection'] = connection
    return config


def upgrade(revision='head', engine=None, script_location=None):
    """Bring the schema up to ``revision``.

    The configured database by default, or the given engine's.
    """
    engine = engine or common.get_engine()
    with engine.begin() as connection:
        alembic_command.upgrade(
            _alembic_config(connection, script_location), revision)


def version(engine=None):
    """The revision the database is at, or None before the first sync."""
    engine = engine or common.get_engine()
    with engine.connect() as connection:
        context = alembic_migration.MigrationContext.configure(connection)
        return context.get_current_revision()


def script_directory(script_location=None):
    """The migration scripts; their head is the newest revision here."""
    return alembic_script.ScriptDirectory(script_location
                                          or _SCRIPT_LOCATION)


# Where a database's revision stands against this release's newest.
CURRENT = 'current'
EMPTY = 'empty'
NEWER = 'newer'
OLDER = 'older'


def compare_with_head(current):
    """CURRENT, EMPTY, NEWER (unknown here) or OLDER, for ``current``.

    A schema whose only pending revisions are contractions is CURRENT:
    this release serves on it from the moment it is expanded, and the
    contraction waits for the previous release's services to be gone.
    """
    scripts = script_directory()
    if current == scripts.get_current_head():
        return CURRENT
    if current is None:
        return EMPTY
    try:
        scripts.get_revision(current)
    except alembic_util.CommandError:
        return NEWER
    try:
        waiting = pending(current, scripts)
    # A head of another release's scripts.
    except (alembic_util.CommandError, alembic_revision.RevisionError):
        return OLDER
    if all(phase == CONTRACT for _, phase in waiting):
        return CURRENT
    return OLDER


# The phases of a rolling upgrade, in their order.
EXPAND = 'expand'
MIGRATE = 'migrate'
CONTRACT = 'contract'
PHASES = (EXPAND, MIGRATE, CONTRACT)


def phase_of(script):
    """The phase of an alembic ``Script``: its module's ``phase``."""
    phase = getattr(script.module, 'phase', EXPAND)
    if phase not in PHASES:
        raise exception.InvalidInputError(
            reason='revision %s has phase %r, not one of %s'
            % (script.revision, phase, ', '.join(PHASES)))
    return phase


def pending(current, scripts=None):
    """``(revision, phase)`` of each revision above ``current``, oldest first.

    ``current`` is a revision of ``scripts`` (this release's by default)
    or None for an empty database.
    """
    scripts = scripts or script_directory()
    found = scripts.iterate_revisions(scripts.get_current_head(),
                                      current or 'base')
    return [(script.revision, phase_of(script))
            for script in reversed(list(found))]


def step_target(phase, current, scripts=None):
    """The revision ``db <phase>`` upgrades to, or None when none is due.

    The leading pending revisions of ``phase``. When a revision of that
    phase is pending behind one of another phase (a contract left over
    from the previous upgrade before an expansion, an expansion before a
    data migration), Invalid names the step to run first.
    """
    waiting = pending(current, scripts)
    if not any(p == phase for _, p in waiting):
        return None
    target = None
    for revision, revision_phase in waiting:
        if revision_phase != phase:
            break
        target = revision
    if target is None:
        revision, first = waiting[0]
        raise exception.InvalidInputError(reason=(
            'revision %s, a %s step, is pending before the %s revisions: '
            'run trove-upgrade-manage db %s first'
            % (revision, first, phase, first)))
    return target


def describe_pending(current, scripts=None):
    """What is pending, phase by phase, as one line."""
    waiting = pending(current, scripts)
    if not waiting:
        return 'nothing is pending'
    return '; '.join(
        '%s: %s' % (phase, ', '.join(r for r, p in waiting if p == phase))
        for phase in PHASES if any(p == phase for _, p in waiting))


def check_schema_at_start(url):
    """Refuse to serve on a database without this release's schema.

    Against an empty or older schema every periodic task and request
    failed with a traceback for as long as the service ran. A newer
    schema, one a later release migrated during a rolling upgrade, is
    served with a warning; a database that cannot be reached is left to
    the services' outage handling. A throwaway engine without a pool
    reads the revision, so that no connection is left open for a forked
    process to inherit.
    """
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        current = version(engine)
    except errors.UNAVAILABLE_ERRORS as e:
        LOG.warning('Could not read the database schema\'s revision at '
                    'start: %s', errors.first_line(e))
        return
    finally:
        engine.dispose()
    state = compare_with_head(current)
    if state == CURRENT:
        return
    if state == EMPTY:
        raise exception.SchemaNotCurrentError(
            reason='the database has no schema; run: %s' % DB_SYNC)
    if state == NEWER:
        LOG.warning('The database schema is at revision %(current)s, which '
                    'this release does not know: a newer release migrated '
                    'it. Serving on, as during a rolling upgrade.',
                    {'current': current})
        return
    raise exception.SchemaNotCurrentError(
        reason='the database schema is at revision %s, not at %s, the '
               'newest of this release (pending: %s); run: %s, or %s '
               'during a rolling upgrade'
        % (current, script_directory().get_current_head(),
           describe_pending(current), DB_SYNC, ROLLING_STEPS))
