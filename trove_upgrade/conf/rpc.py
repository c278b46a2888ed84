"""Options of trove-upgrade's own use of oslo.messaging."""

from oslo_config import cfg

rpc_opts = [
    cfg.IntOpt('rpc_send_retries',
               default=2,
               min=-1,
               help='How many times sending an RPC message is retried while '
                    'the messaging server cannot be reached, before the '
                    'send fails; -1 retries forever. When the control '
                    'plane cannot send an upgrade, it records the upgrade '
                    'FAILED and the API answers 503 instead of waiting; '
                    'when an agent cannot send a report, the report stays '
                    'in its outbox for the next attempt.'),
]


def register_opts(conf):
    conf.register_opts(rpc_opts)


def list_opts():
    return {'DEFAULT': rpc_opts}
