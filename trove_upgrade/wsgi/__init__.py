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

"""WSGI entry points, for any WSGI server.

A WSGI server passes no command line, so the configuration comes from the
environment, named as in nova and placement:

``OS_TROVE_UPGRADE_CONFIG_DIR``
    The configuration directory (``/etc/trove-upgrade`` when only
    ``OS_TROVE_UPGRADE_CONFIG_FILES`` is set). Its drop-in directory
    ``trove-upgrade.conf.d`` is read too when it exists.
``OS_TROVE_UPGRADE_CONFIG_FILES``
    A ``;``-separated list of files in that directory (absolute paths are
    taken as they are); ``trove-upgrade.conf`` when unset.

With neither set, oslo.config's default locations apply
(``/etc/trove-upgrade/trove-upgrade.conf`` and its drop-in directory
``/etc/trove-upgrade/trove-upgrade.conf.d`` among them). The names of the
first releases, ``TROVE_UPGRADE_CONFIG_FILES`` and
``TROVE_UPGRADE_CONFIG_DIRS`` (lists of files and of drop-in directories),
still work when the new ones are unset, with a deprecation warning.
"""

import os

# First: the threading backend, and no eventlet warning in the log.
from trove_upgrade.common import threading_backend  # noqa: F401

from oslo_log import log as logging  # noqa: E402
from oslo_log import versionutils  # noqa: E402

from trove_upgrade.api import deploy  # noqa: E402
from trove_upgrade import conf  # noqa: E402
from trove_upgrade.conf import opts  # noqa: E402
from trove_upgrade import version  # noqa: E402

LOG = logging.getLogger(__name__)

CONFIG_DIR_ENV = 'OS_TROVE_UPGRADE_CONFIG_DIR'
CONFIG_FILES_ENV = 'OS_TROVE_UPGRADE_CONFIG_FILES'
DEFAULT_CONFIG_DIR = '/etc/trove-upgrade'
DEFAULT_CONFIG_FILE = 'trove-upgrade.conf'
DROP_IN_DIR = 'trove-upgrade.conf.d'

# Deprecated in 2026.2: the names of the first releases.
OLD_CONFIG_FILES_ENV = 'TROVE_UPGRADE_CONFIG_FILES'
OLD_CONFIG_DIRS_ENV = 'TROVE_UPGRADE_CONFIG_DIRS'


def _env_list(env, name):
    value = env.get(name, '').strip()
    return [item.strip() for item in value.split(';') if item.strip()]


def config_locations(env=None):
    """(files, drop-in dirs, deprecation warnings) named by ``env``.

    None for the files and dirs means oslo.config's default locations.
    """
    env = os.environ if env is None else env
    new = [name for name in (CONFIG_DIR_ENV, CONFIG_FILES_ENV)
           if env.get(name, '').strip()]
    old = [name for name in (OLD_CONFIG_FILES_ENV, OLD_CONFIG_DIRS_ENV)
           if env.get(name, '').strip()]
    if new:
        directory = env.get(CONFIG_DIR_ENV, '').strip() or DEFAULT_CONFIG_DIR
        names = _env_list(env, CONFIG_FILES_ENV) or [DEFAULT_CONFIG_FILE]
        files = [os.path.join(directory, name) for name in names]
        drop_in = os.path.join(directory, DROP_IN_DIR)
        dirs = [drop_in] if os.path.isdir(drop_in) else []
        warnings = ['environment variable %s, ignored since %s is set.'
                    % (name, ' and '.join(new)) for name in old]
        return files, dirs, warnings
    if old:
        warnings = ['environment variable %s, replaced by %s.' % (
            name, CONFIG_DIR_ENV if name == OLD_CONFIG_DIRS_ENV
            else CONFIG_FILES_ENV) for name in old]
        return (_env_list(env, OLD_CONFIG_FILES_ENV) or None,
                _env_list(env, OLD_CONFIG_DIRS_ENV) or None, warnings)
    return None, None, []


def parse_config(argv, default_config_files=None, default_config_dirs=None):
    """Parse the configuration and set up logging, as every service does."""
    opts.set_defaults()
    conf.CONF(argv, project='trove-upgrade',
              version=version.version_string(),
              default_config_files=default_config_files,
              default_config_dirs=default_config_dirs)
    logging.setup(conf.CONF, 'trove-upgrade')
    return conf.CONF


def init_application():
    """Parse the configuration from the environment and build the app."""
    files, dirs, warnings = config_locations()
    parse_config([], default_config_files=files, default_config_dirs=dirs)
    for warning in warnings:
        versionutils.report_deprecated_feature(LOG, warning)
    LOG.info('trove-upgrade API %s starting', version.version_string())
    return deploy.loadapp(conf.CONF)
