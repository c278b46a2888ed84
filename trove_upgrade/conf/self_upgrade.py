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

from oslo_config import cfg

self_upgrade_group = cfg.OptGroup(
    'self_upgrade', title='Upgrades of trove-upgrade-agent itself',
    help='How trove-upgrade-agent installs a newer trove-upgrade side by '
         'side, restarts its own service on it and hands over to it, or '
         'rolls back when the new agent does not confirm in time '
         '(agent/self_upgrade.py, agent/handover.py).')

self_upgrade_opts = [
    cfg.BoolOpt('enabled',
                default=False,
                help='Whether this agent accepts upgrades of itself. When '
                     'false, an upgrade of the upgrade-agent component is '
                     'recorded as FAILED with that reason.'),
    cfg.StrOpt('install_root',
               default='$state_path/agent-self',
               help='Directory of the agent\'s own side-by-side installs '
                    '(versions/<version>) and of the current symlink its '
                    'service runs: <install_root>/current/bin/'
                    'trove-upgrade-agent.'),
    cfg.StrOpt('service_manager',
               default='systemd',
               choices=[('systemd', 'systemctl restart service_name; the '
                         'hand-over watcher runs outside the unit, started '
                         'with systemd-run'),
                        ('supervisord', 'the agent\'s program must have '
                         'autorestart=true: the watcher ends the running '
                         'agent and supervisord starts the one current '
                         'points at; [agent] supervisord_serverurl or '
                         'supervisorctl_command reach it'),
                        ('builtin', 'the watcher ends the running agent '
                         'and starts agent_command itself')],
               help='What restarts trove-upgrade-agent on a new version.'),
    cfg.StrOpt('service_name',
               default='trove-upgrade-agent',
               help='The systemd unit or supervisord program of '
                    'trove-upgrade-agent.'),
    cfg.StrOpt('agent_command',
               help='With service_manager = builtin: the command line that '
                    'starts the agent, split like a shell would; a relative '
                    'program is resolved in the current install, e.g. '
                    '"bin/trove-upgrade-agent --config-file '
                    '/etc/trove-upgrade/agent.conf".'),
    cfg.IntOpt('handover_timeout',
               default=300,
               min=5,
               help='Seconds the new agent has to start, register with the '
                    'conductor and confirm the upgrade in the journal; past '
                    'them the previous version is restored and restarted '
                    'and the upgrade ends FAILED.'),
    cfg.FloatOpt('watch_interval',
                 default=1.0,
                 min=0.05,
                 help='Seconds between two looks of the hand-over watcher '
                      'at the journal.'),
]


def register_opts(conf):
    conf.register_group(self_upgrade_group)
    conf.register_opts(self_upgrade_opts, group=self_upgrade_group)


def list_opts():
    return {self_upgrade_group: self_upgrade_opts}
