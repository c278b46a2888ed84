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

"""Options of the package registry (``/mgmt/packages``).

The control plane fetches the signed manifest of every package it
registers with the agent's own download strategies, configured here
rather than by the agent's ``[agent]`` options, and verifies it with keys
of its own: an operator may trust fewer keys on the control plane than
the agents do, never more by accident.
"""

from oslo_config import cfg

from trove_upgrade import strategy_plugins

packages_group = cfg.OptGroup(
    'packages', title='Package registry options',
    help='How the control plane fetches and verifies the signed manifest '
         'of a package before it registers it.')

packages_opts = [
    cfg.ListOpt('trusted_key_files',
                default=[],
                help='Public keys (PEM, Ed25519) that may sign the '
                     'manifests of registered packages. With none, every '
                     'registration is refused.'),
    cfg.IntOpt('signature_threshold',
               default=1,
               min=1,
               help='Distinct trusted keys whose signatures a registered '
                    "package's manifest needs."),
    cfg.IntOpt('max_payload_size',
               default=512 * 1024 * 1024,
               min=1,
               help='Largest payload, in bytes, a registered package may '
                    'announce in its manifest.'),
    cfg.StrOpt('strategy_config_dir',
               default='/etc/trove-upgrade/strategies.d',
               help='Directory of the drop-in strategy files the control '
                    'plane fetches manifests with (NAME.conf, section '
                    '[NAME], as on the agents).'),
    cfg.ListOpt('allowed_strategies',
                default=strategy_plugins.built_in(),
                help='Strategies a registered package may name.'),
    cfg.FloatOpt('fetch_timeout',
                 default=30.0,
                 min=0.1,
                 help='Seconds one attempt to fetch a manifest may take.'),
    cfg.IntOpt('fetch_retries',
               default=1,
               min=0,
               help='Times a manifest fetch is retried after a transient '
                    'failure.'),
]


def register_opts(conf):
    conf.register_group(packages_group)
    conf.register_opts(packages_opts, group=packages_group)


def list_opts():
    return {packages_group: packages_opts}
