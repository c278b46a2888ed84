"""Schema migrations with alembic, for the manage command and the tests."""

import os

from alembic import command as alembic_command
from alembic import config as alembic_config
from alembic import migration as alembic_migration
from alembic import script as alembic_script

from trove_upgrade.db import common

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
