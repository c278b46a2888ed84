"""WSGI entry points, for any WSGI server.

A WSGI server passes no command line, so the configuration comes from the
environment: ``TROVE_UPGRADE_CONFIG_FILES`` and ``TROVE_UPGRADE_CONFIG_DIRS``
(each a ``;``-separated list) when set, oslo.config's default locations
(``/etc/trove-upgrade/trove-upgrade.conf`` and the drop-in directory
``/etc/trove-upgrade/trove-upgrade.conf.d``) otherwise.
"""

import os

# First: the threading backend, and no eventlet warning in the log.
import trove_upgrade.cmd  # noqa: F401

from oslo_log import log as logging  # noqa: E402

from trove_upgrade.api import deploy  # noqa: E402
from trove_upgrade import conf  # noqa: E402
from trove_upgrade.conf import opts  # noqa: E402
from trove_upgrade import version  # noqa: E402

LOG = logging.getLogger(__name__)

CONFIG_FILES_ENV = 'TROVE_UPGRADE_CONFIG_FILES'
CONFIG_DIRS_ENV = 'TROVE_UPGRADE_CONFIG_DIRS'


def _env_list(name):
    value = os.environ.get(name, '')
    return [item for item in value.split(';') if item] or None


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
    parse_config([], default_config_files=_env_list(CONFIG_FILES_ENV),
                 default_config_dirs=_env_list(CONFIG_DIRS_ENV))
    LOG.info('trove-upgrade API %s starting', version.version_string())
    return deploy.loadapp(conf.CONF)
