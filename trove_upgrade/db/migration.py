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

"""Schema migrations with alembic, for the manage command and the tests."""

import os

from alembic import command as alembic_command
from alembic import config as alembic_config
from alembic import migration as alembic_migration
from alembic import script as alembic_script
from alembic import util as alembic_util
from oslo_log import log as logging
import sqlalchemy as sa

from trove_upgrade.common import exception
from trove_upgrade.db import common
from trove_upgrade.db import exception as errors

LOG = logging.getLogger(__name__)

# What the services' refusal tells an operator to run.
DB_SYNC = 'trove-upgrade-manage db sync'

_SCRIPT_LOCATION = os.path.join(os.path.dirname(__file__), 'migrations')


def _alembic_config(connection=None):
    config = alembic_config.Config()
    config.set_main_option('script_location', _SCRIPT_LOCATION)
    config.attributes['connection'] = connection
    return config


def upgrade(revision='head', engine=None):
    """Bring the schema up to ``revision``.

    The configured database by default, or the given engine's.
    """
    engine = engine or common.get_engine()
    with engine.begin() as connection:
        alembic_command.upgrade(_alembic_config(connection), revision)


def version(engine=None):
    """The revision the database is at, or None before the first sync."""
    engine = engine or common.get_engine()
    with engine.connect() as connection:
        context = alembic_migration.MigrationContext.configure(connection)
        return context.get_current_revision()


def script_directory():
    """The migration scripts; their head is the newest revision here."""
    return alembic_script.ScriptDirectory(_SCRIPT_LOCATION)


# Where a database's revision stands against this release's newest.
CURRENT = 'current'
EMPTY = 'empty'
NEWER = 'newer'
OLDER = 'older'


def compare_with_head(current):
    """CURRENT, EMPTY, NEWER (unknown here) or OLDER, for ``current``."""
    scripts = script_directory()
    if current == scripts.get_current_head():
        return CURRENT
    if current is None:
        return EMPTY
    try:
        scripts.get_revision(current)
    except alembic_util.CommandError:
        return NEWER
    return OLDER


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
               'newest of this release; run: %s'
        % (current, script_directory().get_current_head(), DB_SYNC))
