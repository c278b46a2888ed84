"""Alembic environment: runs on the connection migration.py hands over."""

from alembic import context

from trove_upgrade.db import models

target_metadata = models.Base.metadata


def run_migrations_online():
    connection = context.config.attributes['connection']
    context.configure(connection=connection, target_metadata=target_metadata,
                      render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


run_migrations_online()
