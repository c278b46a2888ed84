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

"""Options for Trove's own guest configuration and its guest agent's RPC.

An upgrade agent on a Trove guest reads the instance id, the bus URL and
the control exchange from the directory Trove writes at boot
(``guest_info.conf``, ``trove-guestagent.conf``), so nobody writes them a
second time; see ``doc/source/install/guest-image.rst`` for the precedence.
"""

from oslo_config import cfg

trove_guest_group = cfg.OptGroup(
    'trove_guest', title='Trove guest configuration',
    help='Where the upgrade agent finds the configuration Trove injects '
         'into its guests, and how it checks that a Trove guest agent '
         'serves its RPC topic.')

trove_guest_opts = [
    cfg.StrOpt('config_dir',
               default='/etc/trove/conf.d',
               help='Trove\'s guest configuration directory, read like '
                    'trove-guestagent reads it (--config-dir: every file '
                    'ending in .conf, in name order). Its [DEFAULT] guest_id, '
                    'transport_url and control_exchange are used when this '
                    'agent\'s own [agent] instance_id and [DEFAULT] '
                    'transport_url are not set. Ignored when the directory '
                    'does not exist.'),
    cfg.BoolOpt('manage_rpc_ping',
                default=True,
                help='Write trove-upgrade-managed.conf into config_dir, '
                     'setting [DEFAULT] rpc_ping_enabled = True, so that '
                     'the Trove guest agent answers oslo.messaging\'s '
                     'server ping from its next start on.'),
    cfg.BoolOpt('health_rpc_ping',
                default=True,
                help='When Trove\'s guest configuration gives guest_id and '
                     'transport_url, a restarted guest agent is healthy '
                     'only once it answers oslo_rpc_server_ping on topic '
                     'guestagent.<guest_id>, server <guest_id>, on Trove\'s '
                     'control exchange, within the health timeout.'),
    cfg.FloatOpt('ping_timeout',
                 default=2.0,
                 min=0.1,
                 help='Seconds one RPC ping of the guest agent may take; '
                      'pings are repeated until the health timeout.'),
]


def register_opts(conf):
    conf.register_group(trove_guest_group)
    conf.register_opts(trove_guest_opts, group=trove_guest_group)


def list_opts():
    return {trove_guest_group: trove_guest_opts}
