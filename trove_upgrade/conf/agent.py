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

"""Options of the guest-side upgrade agent, trove-upgrade-agent.

The strategy options of the same ``[agent]`` group (``strategy_config_dir``,
``allowed_strategies``, ``download_retries``, ``download_timeout``) live in
``conf/strategies.py`` with the strategies they configure. The defaults of
library options that differ for the agent are set by :func:`set_defaults`.
"""

from oslo_config import cfg

agent_group = cfg.OptGroup(
    'agent', title='Guest upgrade agent options',
    help='Options of trove-upgrade-agent, the updater that runs beside the '
         'guest agent of one Trove instance, installs new versions of it '
         'side by side, restarts it, checks it and rolls it back.')

agent_opts = [
    cfg.StrOpt('instance_id',
               help='Trove instance this agent serves. It names the RPC '
                    'topic the agent consumes and identifies the agent to '
                    'the conductor. Required.'),
    cfg.BoolOpt('guest_automatic_updates',
                default=False,
                help='Whether this guest accepts upgrades at all, as in the '
                     'Trove design. When false every upgrade is recorded '
                     'as FAILED with that reason.'),
    cfg.StrOpt('install_root',
               default='$state_path/agent',
               help='Directory holding the side-by-side installs '
                    '(versions/<version>), the current symlink, the '
                    'journal, the lock file and the guest logs.'),
    cfg.StrOpt('guest_command',
               help='Command line of the guest agent, split like a shell '
                    'would. A relative program is resolved inside the '
                    'current install, for example "bin/trove-guestagent '
                    '--config-file /etc/trove/guest.conf". Required.'),
    cfg.StrOpt('health_command',
               help='Command checking the guest agent, used when the '
                    'package manifest carries none; a relative program is '
                    'resolved inside the install it checks. It runs with '
                    'TROVE_UPGRADE_PHASE=preflight on a new install before '
                    'the switch, and TROVE_UPGRADE_PHASE=running against '
                    'the running guest agent. Exit status 0 means healthy.'),
    cfg.FloatOpt('health_grace',
                 default=5.0,
                 min=0,
                 help='Seconds the restarted guest agent must stay alive '
                      'before it can be declared healthy.'),
    cfg.FloatOpt('health_timeout',
                 default=30.0,
                 min=0.1,
                 help='Seconds, after the grace period, within which the '
                      'health command must pass, when the package manifest '
                      'sets no timeout of its own.'),
    cfg.FloatOpt('stop_timeout',
                 default=10.0,
                 min=0.1,
                 help='Seconds the guest agent has to exit after SIGTERM '
                      'before it is killed: by the agent (builtin, and '
                      'supervisord through supervisord_serverurl) or by '
                      'systemd (TimeoutStopSec in the drop-in written at '
                      'adoption). The guest agent is down from SIGTERM on; '
                      'Trove\'s gains nothing from a long one (0.5 is '
                      'recommended, see the guest image guide).'),
    cfg.IntOpt('restart_retries',
               default=3,
               min=1,
               help='Attempts to start a guest agent and see it healthy '
                    'before the start counts as failed.'),
    cfg.IntOpt('keep_versions',
               default=3,
               min=2,
               help='Installed versions kept under install_root/versions. '
                    'The current version and the last known good one are '
                    'never pruned.'),
    cfg.IntOpt('max_package_size',
               default=512 * 1024 * 1024,
               min=1,
               help='Largest upgrade payload, in bytes, the agent '
                    'downloads and decrypts.'),
    cfg.FloatOpt('download_step_timeout',
                 default=3600,
                 min=1,
                 help='Seconds the download step (manifest, its checks and '
                      'the payload, retries included) may take. It runs in '
                      'a child process that is killed at this deadline and '
                      'the upgrade ends FAILED.'),
    cfg.FloatOpt('verify_step_timeout',
                 default=1800,
                 min=1,
                 help='Seconds decrypting, verifying and writing out the '
                      'package may take, in a child process killed at this '
                      'deadline; the upgrade then ends FAILED.'),
    cfg.StrOpt('untrusted_user',
               default='nobody',
               help='User the download and verify steps run as when the '
                    'agent runs as root: the strategies\' clients (TLS, '
                    'HTTP, rsync) and the parsing of the package never run '
                    'as root. The step starts as root only to read the '
                    'keys, settings and secrets it needs, then switches to '
                    'this user and its primary group, in a directory the '
                    'user owns; root takes over only the wheels that match '
                    'the signed manifest. A user of its own (no login, no '
                    'other process) is better than the shared nobody. Any '
                    'strategy source on the guest (the local strategy\'s '
                    'directories) must be readable by it. Empty: the steps '
                    'run as the agent\'s own user.'),
    cfg.IntOpt('max_resume_attempts',
               default=3,
               min=1,
               help='Times an interrupted upgrade is resumed after the '
                    'agent restarts before it is recorded as FAILED; stops '
                    'a package that crashes the agent from looping.'),
    cfg.FloatOpt('heartbeat_interval',
                 default=30.0,
                 min=1,
                 help='Seconds between two heartbeats to the conductor.'),
    cfg.FloatOpt('report_interval',
                 default=1.0,
                 min=0.1,
                 help='Seconds between two attempts to resend the reports '
                      'the conductor has not received yet. An attempt '
                      'with nothing to resend only reads the journal; a '
                      'short interval brings the reports of an outage to '
                      'the conductor soon after the broker is back.'),
    cfg.FloatOpt('report_confirm_interval',
                 default=30.0,
                 min=1,
                 help='Seconds the reports of progress (the stages before '
                      'the final state) sent to the conductor by cast may '
                      'stay unconfirmed. Each report goes by cast with '
                      'every report not yet confirmed, and the final one '
                      'by call, whose answer confirms them all; reports '
                      'last cast this long ago are sent by call then. '
                      'Longer spares the conductor calls during long '
                      'stages; shorter brings sooner a stage whose cast '
                      'was lost (a conductor that died while handling it) '
                      'to the conductor.'),
    cfg.FloatOpt('deferred_check_interval',
                 default=10.0,
                 min=0.1,
                 help='Seconds between two checks of whether a deferred '
                      'upgrade may start.'),
    cfg.FloatOpt('supervise_interval',
                 default=10.0,
                 min=0.1,
                 help='Seconds between two checks that the guest agent is '
                      'still running.'),
    cfg.DictOpt('labels',
                default={},
                help='Labels reported to the conductor, used by rollouts to '
                     'select agents, for example group:blue,datastore:mysql.'
                     ' An availability_zone label here is the instance\'s '
                     'availability zone, whatever nova_metadata_file says.'),
    cfg.StrOpt('nova_metadata_file',
               help='Nova\'s metadata of this instance as JSON, the '
                    'openstack/latest/meta_data.json of its config drive '
                    '(mounted, or copied at boot), for example '
                    '/mnt/config/openstack/latest/meta_data.json. Its '
                    'availability_zone is reported as the '
                    'availability_zone label, by which rollouts select a '
                    'zone: Trove does not record it. Unset, or the file '
                    'missing, no zone is reported.'),
    cfg.ListOpt('trusted_key_files',
                default=[],
                help='Public keys (PEM, Ed25519) that may sign package '
                     'manifests.'),
    cfg.IntOpt('signature_threshold',
               default=1,
               min=1,
               help='Distinct trusted keys whose signatures a manifest '
                    'needs.'),
    cfg.ListOpt('decryption_key_files',
                default=[],
                help='Payload decryption key files, selected by the key id '
                     'the manifest names; list several to rotate keys.'),
    cfg.StrOpt('instance_key_file',
               help='File (mode 0600) holding the keys of this instance '
                    'that seal RPC messages, as written by '
                    '"trove-upgrade-manage instance-key set|rotate". When '
                    'set, the agent seals everything it sends to the '
                    'conductor and refuses every upgrade message not '
                    'sealed with one of these keys. It takes precedence '
                    'over the key derived from Trove\'s [DEFAULT] '
                    'instance_rpc_encr_key.'),
    cfg.BoolOpt('require_sealed',
                default=True,
                help='Refuse to start without a key: instance_key_file, or '
                     'Trove\'s [DEFAULT] instance_rpc_encr_key, from which '
                     'the agent derives its sealing key. So the agent '
                     'never accepts an unsealed upgrade message. Turn off '
                     'only on a message bus nobody else can publish on.'),
    cfg.IntOpt('seal_max_age',
               default=300,
               min=1,
               help='Seconds a sealed upgrade message stays acceptable; '
                    'older ones (or ones this far in the future) are '
                    'refused as stale. Accepted message ids are kept in '
                    'the journal this long to refuse replays.'),
    cfg.StrOpt('guest_state_provider',
               default='file',
               help='Where the guest state comes from: "file" reads '
                    'guest_state_file, "command" runs guest_state_command, '
                    'or the name of a trove_upgrade.guest_state entry '
                    'point.'),
    cfg.StrOpt('guest_state_file',
               default='$install_root/guest-state',
               help='File holding the guest state (running, backup, '
                    'restore, resize, restart, error); a missing file '
                    'means running.'),
    cfg.StrOpt('guest_state_command',
               help='Command printing the guest state on its standard '
                    'output.'),
    cfg.FloatOpt('guest_state_timeout',
                 default=10.0,
                 min=0.1,
                 help='Seconds the guest state command may take.'),
]

# How the guest agent is started and stopped (agent/init_system.py).
service_manager_opts = [
    cfg.StrOpt('service_manager',
               default='builtin',
               choices=[('builtin', 'the agent starts guest_command itself '
                         'and supervises it (images without a service '
                         'manager)'),
                        ('systemd', 'systemctl start/stop service_name; '
                         'the unit runs the current install through a '
                         'drop-in'),
                        ('supervisord', 'supervisorctl start/stop '
                         'service_name')],
               help='Who runs the guest agent.'),
    cfg.StrOpt('service_name',
               default='guest-agent',
               help='The guest agent\'s service: the systemd unit '
                    '(guest-agent.service on Trove\'s images; ".service" '
                    'may be left out) or the supervisord program name.'),
    cfg.StrOpt('systemctl_command',
               default='systemctl',
               help='systemctl command line, split like a shell would.'),
    cfg.StrOpt('systemd_unit_dir',
               default='/etc/systemd/system',
               help='Directory of the guest agent\'s unit, where the '
                    'drop-in pointing it at the current install is '
                    'written.'),
    cfg.StrOpt('supervisorctl_command',
               default='supervisorctl',
               help='supervisorctl command line, split like a shell would, '
                    'e.g. "supervisorctl -c /etc/supervisor/'
                    'supervisord.conf". Used when supervisord_serverurl '
                    'is not set.'),
    cfg.StrOpt('supervisord_serverurl',
               help='supervisord\'s XML-RPC server, as supervisorctl\'s '
                    'serverurl: unix:///var/run/supervisor.sock or '
                    'http://127.0.0.1:9001. When set, the agent talks to '
                    'supervisord directly instead of running supervisorctl '
                    'for each command, which takes a Python start-up off '
                    'the restart\'s critical path.'),
    cfg.StrOpt('guest_program_link',
               default='/usr/local/bin/guest-agent',
               help='Symlink the guest agent\'s service runs on Trove\'s '
                    'images (ExecStart=/usr/local/bin/guest-agent, linked '
                    'to /opt/guest-agent-venv/bin/trove-guestagent). '
                    'Adoption points it at <install_root>/current/bin/'
                    '<guest_console_script>, so every service manager runs '
                    'the current install from the next start on. Left '
                    'alone when it does not exist.'),
    cfg.StrOpt('guest_console_script',
               default='trove-guestagent',
               help='Console script of the guest agent inside an install, '
                    'when the package manifest names none; the systemd '
                    'drop-in runs <install_root>/current/bin/<this>.'),
]


# oslo.log's options, for the agent's own log file on the guest's disk, where
# a full disk takes the database down: rotated by size, so that the files
# kept hold at most (5 + 1) x 10 MiB (and the launcher's: see the agent
# guide, Logs). The agent logs at INFO only on events (a start, an upgrade's
# steps, a restart of the guest agent), so 10 MiB keeps a long history; what
# grows without end is a warning that repeats (a broker gone for days) or
# DEBUG, and this bounds both. 60 MiB is little beside a guest's root disk; 5
# rotated files, not oslo.log's 30, as the total is what the guest pays.
LOG_DEFAULTS = {
    'log_rotation_type': 'size',
    'max_logfile_size_mb': 10,
    'max_logfile_count': 5,
}


def set_defaults(conf):
    """Defaults of library options that differ for trove-upgrade-agent.

    On ``conf`` only, not on the option objects: the control plane's
    services and the sample config keep oslo.log's defaults. Called by the
    agent's entry point before it parses its configuration; a value in a
    configuration file still wins.
    """
    for name, value in LOG_DEFAULTS.items():
        conf.set_default(name, value)


def register_opts(conf):
    conf.register_group(agent_group)
    conf.register_opts(agent_opts, group=agent_group)
    conf.register_opts(service_manager_opts, group=agent_group)


def list_opts():
    return {agent_group: agent_opts + service_manager_opts}
