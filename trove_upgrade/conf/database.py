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

"""Database options: oslo.db's, with defaults of trove-upgrade's own.

The connection defaults to SQLite under ``state_path``. The pool keeps as
many connections as a conductor has RPC threads (oslo.messaging's
``executor_thread_pool_size``, 64), since each message it serves holds
one: with oslo.db's 5, every message beyond the fifth at once opens and
closes a connection of its own, about one database session per upgrade
of a rollout. Connections are still
opened only when needed, so an idle service holds few.

oslo.db lists the options under its own namespace for the sample config.
``trove_upgrade.db`` registers them, not ``trove_upgrade.conf``: the
guest-side agent loads the latter and must not import oslo.db.
"""

from oslo_config import cfg
from oslo_db import options as db_options

from trove_upgrade import hosted_conf

_DEFAULTS = {
    'connection': 'sqlite:///$state_path/trove_upgrade.sqlite',
    'max_pool_size': 64,
}


def register_opts(conf):
    db_options.set_defaults(conf)
    if hosted_conf.is_private():
        # Inside trove-api the option objects are Trove's too: only our
        # ConfigOpts gets our defaults.
        for name, value in _DEFAULTS.items():
            conf.set_default(name, value, group='database')
    else:
        # On oslo.db's option objects themselves, not only on ``conf``:
        # the sample config generator reads the objects.
        cfg.set_defaults(db_options.database_opts, **_DEFAULTS)
