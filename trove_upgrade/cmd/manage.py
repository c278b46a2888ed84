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

"""trove-upgrade-manage: administration of the control plane's database.

``trove-upgrade-manage db sync [REVISION]`` brings the schema up to the
newest (or the given) migration; ``trove-upgrade-manage db version`` prints
the revision the database is at and what is pending.

A rolling upgrade of the control plane runs the phases one by one
(``trove_upgrade.db.migration``, ``doc/source/admin/upgrading.rst``):
``db expand`` while the previous release's API and conductors serve,
``db migrate`` before this release's start, ``db contract`` once the
previous release's are all gone. ``db check`` says what is pending and
exits 0 when nothing is, 2 when an expansion is, 3 a data migration, 4 a
contraction (keystone's ``db_sync --check`` codes).

``trove-upgrade-manage instance-key`` provisions the keys that seal the RPC
messages of one instance (see ``doc/source/admin/message-sealing.rst``):

* ``set <instance_id> --key-file F`` stores the keys of F (written by an
  earlier ``set`` or ``rotate``; it must be the caller's or root's, mode
  0600 or 0400, and not a link: ``secret_files``); when F does not exist,
  it generates a key, stores it and writes F. Either way the instance's
  other keys expire at once. F goes to the agent's ``[agent]
  instance_key_file``.
* ``rotate <instance_id> --output F [--grace SECONDS]`` adds a new key,
  which seals from now on; the older ones still open messages for
  ``--grace`` seconds, time to give the agent F (all the unexpired keys,
  newest first) and restart it.
* ``list [--instance-id ID]`` prints the keys' ids and dates, never them.
"""

import argparse
import os
import sys

from alembic import util as alembic_util
from oslo_config import cfg
from oslo_db import exception as db_exc
from oslo_utils import uuidutils

from trove_upgrade.cmd import short_lived
from trove_upgrade.common import context as tu_context
from trove_upgrade.common import exception
from trove_upgrade.common import exception as package_exc
from trove_upgrade.common import sealing
from trove_upgrade import conf
from trove_upgrade.db import common as db_common
from trove_upgrade.db import migration
from trove_upgrade.services import sealing_keys
from trove_upgrade import version

CONF = conf.CONF

# The longest --grace: ten years, well within what a date can hold.
MAX_GRACE = 10 * 366 * 86400


def _db_sync():
    migration.upgrade(CONF.command.revision)
    print('Database is at revision %s.' % migration.version())


def _db_version():
    current = migration.version()
    print(current or 'None (the database was never synced)')
    print('Pending: %s.' % migration.describe_pending(current))


def _db_step(phase):
    """``db expand``, ``db migrate`` or ``db contract``."""
    def step():
        current = migration.version()
        target = migration.step_target(phase, current)
        if target is None:
            print('Nothing to %s: the database is at revision %s; pending: '
                  '%s.' % (phase, current,
                           migration.describe_pending(current)))
            return
        migration.upgrade(target)
        current = migration.version()
        print('Database is at revision %s; pending: %s.'
              % (current, migration.describe_pending(current)))
    return step


# ``db check``'s exit codes by the first pending phase, keystone's.
CHECK_CODES = {None: 0, migration.EXPAND: 2, migration.MIGRATE: 3,
               migration.CONTRACT: 4}


def _db_check():
    current = migration.version()
    waiting = migration.pending(current)
    first = waiting[0][1] if waiting else None
    if first is None:
        print('The database is at revision %s: nothing is pending.'
              % current)
    else:
        print('The database is at revision %s; pending: %s. Next: '
              'trove-upgrade-manage db %s.'
              % (current, migration.describe_pending(current), first))
    return CHECK_CODES[first]


def _key_set():
    context = tu_context.get_admin_context()
    instance_id, path = CONF.command.instance_id, CONF.command.key_file
    # lexists: a link, dangling or not, is refused as one, not replaced.
    if os.path.lexists(path):
        keyring = sealing.load_key_file(path, instance_id)
        known = {k['key_id'] for k in sealing_keys.list_keys(
            context, instance_id)}
        # Oldest first, so the file's newest key seals; the first one
        # stored expires the keys the file does not hold.
        grace = 0
        for key_id, material in reversed(keyring.keys):
            if key_id not in known:
                sealing_keys.add_key(context, instance_id, material,
                                     key_id, grace=grace)
                grace = None
        print('Stored the %d keys of %s for instance %s.'
              % (len(keyring.keys), path, instance_id))
        return
    # The file first: a key stored that no file holds would seal the
    # instance's messages with a key its agent never gets.
    with sealing.key_file_writer(path) as write:
        key = sealing_keys.add_key(context, instance_id)
        write(sealing_keys.keyring(context, instance_id))
    print('Key %s of instance %s written to %s.'
          % (key['key_id'], instance_id, path))


def _key_rotate():
    context = tu_context.get_admin_context()
    instance_id = CONF.command.instance_id
    if not sealing_keys.keyring(context, instance_id):
        raise exception.InstanceKeyError(
            reason='instance %s has no key to rotate; use set'
            % instance_id)
    with sealing.key_file_writer(CONF.command.output) as write:
        key = sealing_keys.add_key(context, instance_id,
                                   grace=CONF.command.grace)
        write(sealing_keys.keyring(context, instance_id))
    print('Key %s of instance %s written to %s; older keys expire in %d '
          'seconds.' % (key['key_id'], instance_id, CONF.command.output,
                        CONF.command.grace))


def _key_list():
    context = tu_context.get_admin_context()
    instance_id = CONF.command.instance_id
    if instance_id is not None and not uuidutils.is_uuid_like(instance_id):
        # Not text the database takes, it ended in oslo.db's traceback.
        raise exception.InstanceKeyError(
            reason='instance ids are UUIDs, not %s'
            % package_exc.quoted(instance_id))
    for key in sealing_keys.list_keys(context, instance_id):
        print('%s %s created %s expires %s'
              % (key['instance_id'], key['key_id'],
                 key['created_at'].isoformat(),
                 key['expires_at'].isoformat() if key['expires_at']
                 else 'never'))


def _seconds(text):
    """An argparse type: a whole number of seconds, 0 to MAX_GRACE.

    A negative grace expired the older keys at once, before the agent had
    the new file: its messages were refused until it got it. One past
    what a date can hold ended the command in a traceback.
    """
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= MAX_GRACE:
        raise argparse.ArgumentTypeError(
            'a whole number of seconds from 0 to %d, not %s'
            % (MAX_GRACE, package_exc.quoted(text)))
    return value


def _revision(text):
    """An argparse type: an Alembic revision, never empty.

    An empty one ended ``db sync`` in Alembic's AssertionError traceback.
    """
    if not text.strip():
        raise argparse.ArgumentTypeError('the revision is empty')
    return text


def _add_key_parsers(subparsers):
    keys = subparsers.add_parser(
        'instance-key', help='Manage the keys sealing instances\' RPC.')
    actions = keys.add_subparsers(title='actions', dest='action')
    actions.required = True
    key_set = actions.add_parser(
        'set', help='Store the keys of a key file, or make one.')
    key_set.add_argument('instance_id')
    key_set.add_argument('--key-file', required=True,
                         help='Key file to import, or to create with a new '
                              'key when it does not exist.')
    key_set.set_defaults(func=_key_set)
    rotate = actions.add_parser('rotate', help='Add a newer key.')
    rotate.add_argument('instance_id')
    rotate.add_argument('--output', required=True,
                        help='Key file to write for the agent.')
    rotate.add_argument('--grace', type=_seconds, default=86400,
                        help='Seconds the older keys still open messages '
                             '(default: 86400).')
    rotate.set_defaults(func=_key_rotate)
    key_list = actions.add_parser('list', help='List keys (ids only).')
    key_list.add_argument('--instance-id')
    key_list.set_defaults(func=_key_list)


def _add_command_parsers(subparsers):
    db = subparsers.add_parser('db', help='Manage the database schema.')
    actions = db.add_subparsers(title='actions', dest='action')
    actions.required = True
    sync = actions.add_parser(
        'sync', help='Upgrade the schema to the newest or a given revision.')
    sync.add_argument('revision', nargs='?', default='head', type=_revision,
                      help='Alembic revision to upgrade to (default: head).')
    sync.set_defaults(func=_db_sync)
    ver = actions.add_parser(
        'version', help='Print the revision the database is at and what '
                        'is pending.')
    ver.set_defaults(func=_db_version)
    for phase, text in (
            (migration.EXPAND, 'Add what this release needs; the previous '
                               'release keeps serving.'),
            (migration.MIGRATE, 'Move data, after expand, before this '
                                'release\'s services start.'),
            (migration.CONTRACT, 'Remove what only the previous release '
                                 'used, once none of it serves.')):
        step = actions.add_parser(phase, help=text)
        step.set_defaults(func=_db_step(phase))
    check = actions.add_parser(
        'check', help='Say what is pending: exit 0 when nothing is, 2 for '
                      'expand, 3 for migrate, 4 for contract.')
    check.set_defaults(func=_db_check)
    _add_key_parsers(subparsers)


command_opt = cfg.SubCommandOpt('command', title='Commands',
                                handler=_add_command_parsers,
                                help='Available commands.')


@short_lived.command('trove-upgrade-manage')
def main(argv=None):
    if command_opt.dest not in CONF:
        CONF.register_cli_opt(command_opt)
    argv = sys.argv[1:] if argv is None else argv
    with conf.readable_config('trove-upgrade-manage', argv):
        CONF(argv,
             project='trove-upgrade',
             prog='trove-upgrade-manage',
             version=version.version_info.version_string())
    try:
        db_common.check_connection_url(CONF.database.connection)
        code = CONF.command.func()
    except db_exc.DBError as exc:
        print('Database error: %s' % exc, file=sys.stderr)
        return 1
    except alembic_util.CommandError as exc:
        print('Migration error: %s' % exc, file=sys.stderr)
        return 1
    except exception.TroveUpgradeError as exc:
        print('Error: %s' % exc, file=sys.stderr)
        return 1
    except cfg.Error as exc:
        print('Configuration error: %s' % exc, file=sys.stderr)
        return 1
    except BrokenPipeError:
        # stdout's reader went away: short_lived ends quietly.
        raise
    except OSError as exc:
        # A key file that cannot be read or written; no key was stored.
        print('Error: %s' % exc, file=sys.stderr)
        return 1
    return code or 0
