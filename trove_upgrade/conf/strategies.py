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

"""Options of the download strategies of trove-upgrade-agent.

The ``[agent]`` options below are read from the agent's own configuration.
The ``[swift]``, ``[http]``, ``[local]`` and ``[rsync]`` groups are NOT read
from it: each lives in its own drop-in file,
``<[agent] strategy_config_dir>/<strategy>.conf``, parsed into a private
``ConfigOpts`` by ``trove_upgrade.agent.strategies.base.load_settings``, so
that installing, configuring or removing one strategy never edits a file
another installer also edits. They are listed here only so that the sample
configuration and the documentation describe them.
"""

from oslo_config import cfg

from trove_upgrade.conf import agent
from trove_upgrade import strategy_plugins

strategy_opts = [
    cfg.StrOpt('strategy_config_dir',
               default='/etc/trove-upgrade/strategies.d',
               help='Directory of the drop-in strategy files: the settings '
                    'of strategy NAME are read from NAME.conf in this '
                    'directory, section [NAME]. A missing file means the '
                    'strategy runs with its defaults.'),
    cfg.ListOpt('allowed_strategies',
                default=strategy_plugins.built_in(),
                help='Strategies this agent may use to download an upgrade. '
                     'An upgrade naming another strategy is refused, even '
                     'when that strategy is installed. Strategies are '
                     'plugins in the entry point namespace %s; the default '
                     'is those trove-upgrade ships, and a strategy of '
                     'another package must be added here to be used.'
                     % strategy_plugins.NAMESPACE),
    cfg.IntOpt('download_retries',
               default=3,
               min=0,
               help='Times a download or a reachability check is retried '
                    'after a transient failure (connection refused or '
                    'reset, timeout, server error). Not-found, access '
                    'denied, other client errors and size-limit failures '
                    'are never retried.'),
    cfg.FloatOpt('download_timeout',
                 default=300.0,
                 min=0.1,
                 help='Seconds one download attempt may take in total; also '
                      'the socket timeout of each network operation.'),
    cfg.FloatOpt('download_retry_delay',
                 default=2.0,
                 min=0,
                 help='Seconds before the first retry; each further retry '
                      'waits twice as long as the one before, up to '
                      'download_retry_max_delay.'),
    cfg.FloatOpt('download_retry_max_delay',
                 default=60.0,
                 min=0,
                 help='Longest wait, in seconds, between two attempts.'),
]

_DROP_IN = ('Read from the drop-in file '
            '<[agent] strategy_config_dir>/%s.conf, not from the agent '
            'configuration file.')

swift_group = cfg.OptGroup(
    'swift', title='Swift download strategy',
    help='Credentials and endpoint of the "swift" strategy. ' +
         _DROP_IN % 'swift')

swift_opts = [
    cfg.StrOpt('auth_version',
               default='3',
               choices=[('1', 'Swift tempauth / v1 auth: user is '
                              '"account:user", key is its key.'),
                        ('3', 'Keystone v3 through a keystoneauth session.')],
               help='How the strategy authenticates to Swift.'),
    cfg.URIOpt('auth_url',
               schemes=['http', 'https'],
               help='Keystone v3 URL, or the tempauth URL ending in '
                    '/auth/v1.0. Required.'),
    cfg.StrOpt('user',
               help='User name ("account:user" for auth_version 1). '
                    'Required.'),
    cfg.StrOpt('key',
               secret=True,
               help='Password of the user. Required.'),
    cfg.StrOpt('project_name',
               help='Keystone v3 project (tenant) whose Swift account holds '
                    'the packages.'),
    cfg.StrOpt('user_domain_name',
               default='Default',
               help='Keystone v3 domain of the user.'),
    cfg.StrOpt('project_domain_name',
               default='Default',
               help='Keystone v3 domain of the project.'),
    cfg.StrOpt('region_name',
               help='Region of the object-store endpoint in the Keystone '
                    'catalog.'),
    cfg.StrOpt('endpoint_type',
               default='publicURL',
               choices=['publicURL', 'internalURL', 'adminURL'],
               help='Interface of the object-store endpoint in the Keystone '
                    'catalog.'),
    cfg.StrOpt('default_container',
               help='Container of locations written "swift:<object>", '
                    'without a container.'),
    cfg.BoolOpt('insecure',
                default=False,
                help='Do not verify the TLS certificates of Keystone and '
                     'Swift. Tests only.'),
    cfg.StrOpt('cacert',
               help='CA bundle verifying the TLS certificates of Keystone '
                    'and Swift; the system bundle when unset.'),
    cfg.IntOpt('chunk_size',
               default=65536,
               min=1024,
               help='Bytes read from Swift at a time.'),
]

http_group = cfg.OptGroup(
    'http', title='HTTP(S) download strategy',
    help='TLS settings of the "http" strategy. ' + _DROP_IN % 'http')

http_opts = [
    cfg.StrOpt('ca_file',
               help='CA bundle that verifies the servers\' certificates; '
                    'the system bundle when unset.'),
    cfg.StrOpt('cert_file',
               help='Client certificate (PEM) presented to servers that '
                    'require one.'),
    cfg.StrOpt('key_file',
               help='Private key (PEM) of cert_file, when it is not in '
                    'cert_file itself.'),
    cfg.BoolOpt('allow_insecure_http',
                default=False,
                help='Accept plain http:// locations. The package is still '
                     'verified against its signed manifest, but an '
                     'attacker on the path sees and can withhold it.'),
    cfg.IntOpt('chunk_size',
               default=65536,
               min=1024,
               help='Bytes read from the connection at a time.'),
]

local_group = cfg.OptGroup(
    'local', title='Local file strategy',
    help='Directories the "local" strategy may read. ' + _DROP_IN % 'local')

local_opts = [
    cfg.ListOpt('allowed_dirs',
                default=['/var/lib/trove-upgrade/packages'],
                help='Absolute directories a local location must be inside, '
                     'after symbolic links are resolved; anything else is '
                     'refused, so an upgrade cannot read arbitrary files of '
                     'the guest.'),
    cfg.IntOpt('chunk_size',
               default=1024 * 1024,
               min=1024,
               help='Bytes copied at a time.'),
]

rsync_group = cfg.OptGroup(
    'rsync', title='rsync download strategy',
    help='How the "rsync" strategy runs rsync. ' + _DROP_IN % 'rsync')

rsync_opts = [
    cfg.StrOpt('rsync_path',
               default='rsync',
               help='rsync program, looked up on PATH when not absolute.'),
    cfg.StrOpt('password_file',
               help='File holding the password of the rsync daemon user '
                    'named in the location (rsync://user@host/...). It is '
                    'read when the strategy is loaded, before the step '
                    'gives up root, and must not be readable by others; '
                    'rsync gets it through a pipe.'),
    cfg.ListOpt('extra_args',
                default=[],
                help='Further rsync options, for example --ipv4 or '
                     '--bwlimit=10m.'),
]

STRATEGY_OPTS = {
    'swift': (swift_group, swift_opts),
    'http': (http_group, http_opts),
    'local': (local_group, local_opts),
    'rsync': (rsync_group, rsync_opts),
}


def register_opts(conf):
    conf.register_group(agent.agent_group)
    conf.register_opts(strategy_opts, group=agent.agent_group)


def list_opts():
    listed = {agent.agent_group: strategy_opts}
    listed.update(dict(STRATEGY_OPTS.values()))
    return listed
