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

"""Options of the Trove API extension, read from trove.conf.

They live on Trove's ConfigOpts in the ``[trove_upgrade]`` group and only
say whether the extension serves and where trove-upgrade's own
configuration is; everything else (database, transport, exchange, policy)
comes from that file, on trove-upgrade's own ConfigOpts (see
``trove_upgrade.hosted_conf``). Not in ``trove_upgrade.conf``: importing
that package would put trove-upgrade's options on Trove's CONF.
"""

from oslo_config import cfg

GROUP = cfg.OptGroup(
    'trove_upgrade', title='trove-upgrade API extension',
    help='The trove-upgrade management API served by trove-api.')

OPTS = [
    cfg.BoolOpt('enabled',
                default=False,
                help='Serve the trove-upgrade management API (mgmt '
                     'upgrades, agents, rollouts, packages, desired '
                     'versions, targets) on Trove\'s endpoint and '
                     'answer Trove\'s POST /mgmt/instances/{id}/upgrade '
                     'with a recorded upgrade. Off, the installed '
                     'extension serves nothing and Trove\'s own route '
                     'stays as it was.'),
    cfg.ListOpt('config_files',
                default=[],
                help='trove-upgrade\'s own configuration files ([database], '
                     'transport_url, control_exchange, [oslo_policy], '
                     '...), the same ones its conductor reads. Empty: '
                     'oslo.config\'s default locations for trove-upgrade, '
                     '/etc/trove-upgrade/trove-upgrade.conf and the '
                     '/etc/trove-upgrade/trove-upgrade.conf.d directory.'),
    cfg.ListOpt('config_dirs',
                default=[],
                help='Drop-in directories of trove-upgrade\'s own '
                     'configuration, read after config_files: every file '
                     'ending in .conf, in name order, later values winning, '
                     'as --config-dir reads them. Empty: oslo.config\'s '
                     'default directory for trove-upgrade, '
                     '/etc/trove-upgrade/trove-upgrade.conf.d, when it '
                     'exists.'),
]


def register_opts(conf):
    conf.register_group(GROUP)
    conf.register_opts(OPTS, group=GROUP)


def list_opts():
    """For oslo-config-generator --namespace trove_upgrade.trove_extension."""
    return [(GROUP, OPTS)]
