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

"""RPC version caps for rolling upgrades of the fleet."""

from oslo_config import cfg

upgrade_levels_group = cfg.OptGroup(
    'upgrade_levels', title='RPC version caps',
    help='Caps on the RPC versions this service sends, so that a fleet in '
         'which agents run different releases keeps working. Each value is '
         '"latest" (no cap), a release name from '
         'trove_upgrade.common.release_mappings, an explicit "x.y" version, '
         'or "auto".')

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
