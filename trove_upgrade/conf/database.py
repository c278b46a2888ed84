"""Database options: oslo.db's, with defaults of trove-upgrade's own.

The connection defaults to SQLite under ``state_path``. The pool keeps as
many connections as a conductor has RPC threads (oslo.messaging's
``executor_thread_pool_size``, 64), since each message it serves holds
one: with oslo.db's 5, every message beyond the fifth at once opened and
closed a connection of its own, 2,076 PostgreSQL sessions for the 2,000
upgrades of ``tools/bench/rollout_scale.py``. Connections are still
opened only when needed, so an idle service holds few.
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


def list_opts():
    # oslo.db lists its own options under its own namespace; the sample
    # config takes them from there.
    return {}
