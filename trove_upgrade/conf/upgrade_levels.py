"""RPC version caps for rolling upgrades of the fleet."""

from oslo_config import cfg

upgrade_levels_group = cfg.OptGroup(
    'upgrade_levels', title='RPC version caps',
    help='Caps on the RPC versions this service sends, so that a fleet in '
         'which agents run different releases keeps working. Each value is '
         '"latest" (no cap), a release name from '
         'trove_upgrade.release_mappings, an explicit "x.y" version, or '
         '"auto".')

upgrade_levels_opts = [
    cfg.StrOpt('agent',
               default='latest',
               help='Cap for messages sent to the guest-side upgrade agents. '
                    '"auto" caps to the lowest RPC API version that the '
                    'registered agents reported, re-read on every send, so '
                    'an old agent joining the fleet lowers the cap at '
                    'once.'),
    cfg.StrOpt('conductor',
               default='latest',
               help='Cap for messages the agents send to the conductor. Set '
                    'it on agents while the conductors are older than the '
                    'agents.'),
]


def register_opts(conf):
    conf.register_group(upgrade_levels_group)
    conf.register_opts(upgrade_levels_opts, group=upgrade_levels_group)


def list_opts():
    return {upgrade_levels_group: upgrade_levels_opts}
