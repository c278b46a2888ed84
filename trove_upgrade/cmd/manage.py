"""trove-upgrade-manage: administration of the control plane's database.

``trove-upgrade-manage db sync [REVISION]`` brings the schema up to the
newest (or the given) migration; ``trove-upgrade-manage db version`` prints
the revision the database is at.
"""

import sys

from alembic import util as alembic_util
from oslo_config import cfg
from oslo_db import exception as db_exc

from trove_upgrade import conf
from trove_upgrade.db import migration
from trove_upgrade import version

CONF = conf.CONF


def _db_sync():
    migration.upgrade(CONF.command.revision)
    print('Database is at revision %s.' % migration.version())


def _db_version():
    print(migration.version() or 'None (the database was never synced)')


def _add_command_parsers(subparsers):
    db = subparsers.add_parser('db', help='Manage the database schema.')
    actions = db.add_subparsers(title='actions', dest='action')
    actions.required = True
    sync = actions.add_parser(
        'sync', help='Upgrade the schema to the newest or a given revision.')
    sync.add_argument('revision', nargs='?', default='head',
                      help='Alembic revision to upgrade to (default: head).')
    sync.set_defaults(func=_db_sync)
    ver = actions.add_parser(
        'version', help='Print the revision the database is at.')
    ver.set_defaults(func=_db_version)


command_opt = cfg.SubCommandOpt('command', title='Commands',
                                handler=_add_command_parsers,
                                help='Available commands.')


def main(argv=None):
    if command_opt.dest not in CONF:
        CONF.register_cli_opt(command_opt)
    CONF(sys.argv[1:] if argv is None else argv, project='trove-upgrade',
         prog='trove-upgrade-manage',
         version=version.version_info.version_string())
    try:
        CONF.command.func()
    except db_exc.DBError as exc:
        print('Database error: %s' % exc, file=sys.stderr)
        return 1
    except alembic_util.CommandError as exc:
        print('Migration error: %s' % exc, file=sys.stderr)
        return 1
    return 0
