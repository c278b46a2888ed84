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

"""Every option of trove-upgrade, registered on one global CONF.

Each area keeps its options in its own module with ``register_opts`` and
``list_opts``; this package registers them all, and ``opts.list_opts`` lists
them all for oslo-config-generator and the documentation. Only
``[database]`` is registered by ``trove_upgrade.db``, which uses it: these
options are loaded by the guest-side agent too, which must not import
oslo.db and SQLAlchemy.
"""

import argparse
import contextlib
import glob
import os
import stat
import sys

from oslo_config import cfg
from oslo_log import log

from trove_upgrade.conf import agent
from trove_upgrade.conf import api
from trove_upgrade.conf import conductor
from trove_upgrade.conf import packages
from trove_upgrade.conf import paths
from trove_upgrade.conf import rpc
from trove_upgrade.conf import self_upgrade
from trove_upgrade.conf import strategies
from trove_upgrade.conf import trove
from trove_upgrade.conf import trove_guest
from trove_upgrade.conf import upgrade_levels
from trove_upgrade import hosted_conf

PROJECT = 'trove-upgrade'

# The global CONF, except inside another service's process (the Trove API
# extension), where it is trove-upgrade's own: see hosted_conf.
CONF = hosted_conf.conf()

AREAS = (
    agent,
    api,
    conductor,
    packages,
    paths,
    rpc,
    self_upgrade,
    strategies,
    trove,
    trove_guest,
    upgrade_levels,
)

for _area in AREAS:
    _area.register_opts(CONF)
log.register_options(CONF)


# What parsing raises for a configuration file it cannot read: missing, a
# directory or unreadable (OSError), not INI, not UTF-8, not readable by
# the command's user (oslo.config's own error for EACCES).
UNREADABLE_CONFIG = (cfg.ConfigFilesNotFoundError, cfg.ConfigDirNotFoundError,
                     cfg.ConfigFileParseError,
                     cfg.ConfigFilesPermissionDeniedError, OSError,
                     UnicodeDecodeError)


class _ConfigArgumentError(Exception):
    """The arguments do not parse: oslo.config's own parser says why."""


class _ConfigArgumentParser(argparse.ArgumentParser):
    """oslo.config's two file options alone, silent on any error."""

    def __init__(self):
        super().__init__(add_help=False, exit_on_error=False)
        self.add_argument('--config-file', action='append')
        self.add_argument('--config-dir', action='append')

    def error(self, message):
        raise _ConfigArgumentError(message)


def _config_files(prog, argv):
    """The files oslo.config would open for ``argv``, as it finds them.

    Its ``--config-file`` and ``--config-dir`` (abbreviations included)
    or, without them, its default files and directories for ``prog``.
    """
    try:
        given, _ = _ConfigArgumentParser().parse_known_args(argv)
    except (_ConfigArgumentError, argparse.ArgumentError):
        return []
    files = given.config_file
    if files is None:
        files = cfg.find_config_files(project=PROJECT, prog=prog)
    dirs = given.config_dir
    if dirs is None:
        dirs = cfg.find_config_dirs(project=PROJECT, prog=prog)
    found = [os.path.abspath(os.path.expanduser(f)) for f in files]
    for directory in dirs:
        found += sorted(glob.glob(os.path.join(
            os.path.abspath(os.path.expanduser(directory)), '*.conf')))
    return found


def _refuse_special_files(prog, argv):
    """Raise ConfigFileParseError for a file oslo.config cannot read.

    oslo.config opens each file and reads it to its end: a FIFO blocked
    the command for ever in that open, and ``/dev/zero`` would fill the
    memory. A missing file or a directory is left to oslo.config, which
    names it.
    """
    for path in _config_files(prog, argv):
        try:
            mode = os.stat(path).st_mode
        except OSError:
            continue
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            raise cfg.ConfigFileParseError(path, 'not a regular file')


@contextlib.contextmanager
def readable_config(prog, argv, status=2):
    """Around the parse of ``prog``'s configuration: one line, not a traceback.

    ``argv`` are the arguments the block parses. A file it cannot read
    exits ``status`` with the reason on stderr; it ended every command
    with oslo.config's traceback, before logging.
    """
    try:
        _refuse_special_files(prog, argv)
        yield
    except BrokenPipeError:
        # stdout's reader went away (``--help | head -1``): not a file.
        raise
    except UNREADABLE_CONFIG as e:
        if isinstance(e, UnicodeDecodeError):
            e = 'a configuration file is not UTF-8 text: %s' % e
        print('%s: cannot read its configuration: %s' % (prog, e),
              file=sys.stderr)
        raise SystemExit(status) from None
