"""Database options: oslo.db's, with SQLite under state_path as default."""

from oslo_db import options as db_options

_DEFAULT_CONNECTION = 'sqlite:///$state_path/trove_upgrade.sqlite'


def register_opts(conf):
    db_options.set_defaults(conf, connection=_DEFAULT_CONNECTION)


def list_opts():
    # oslo.db lists its own options under its own namespace; the sample
    # config takes them from there.
    return {}
