"""Where the services keep their local state."""

from oslo_config import cfg

path_opts = [
    cfg.StrOpt('state_path',
               default='/var/lib/trove-upgrade',
               help='Top-level directory for local state: the default SQLite '
                    'database of the control plane and the lock files.'),
]


def register_opts(conf):
    conf.register_opts(path_opts)


def list_opts():
    return {'DEFAULT': path_opts}
