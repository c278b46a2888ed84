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

"""Options of the conductor service."""

from oslo_config import cfg

conductor_group = cfg.OptGroup(
    'conductor', title='Conductor options',
    help='Options of trove-upgrade-conductor, which records what agents '
         'report and times out silent upgrades.')

conductor_opts = [
    cfg.StrOpt('topic',
               help='RPC topic on which the conductor listens for agent '
                    'registrations, heartbeats and upgrade reports; it '
                    'also names the conductors\' RabbitMQ queue. Unset, '
                    'it is trove_upgrade_conductor on the default '
                    '[DEFAULT] control_exchange trove_upgrade, and '
                    '<control_exchange>.trove_upgrade_conductor on any '
                    'other, so that deployments with different exchanges '
                    'on one vhost never share a queue. Set it only to the '
                    'same value on the conductors and the agents of one '
                    'deployment.'),
    cfg.IntOpt('upgrade_timeout',
               default=3600,
               min=1,
               help='Seconds an upgrade may stay in a non-final state, '
                    'counted from its creation, before the conductor marks '
                    'it TIMED_OUT.'),
    cfg.IntOpt('periodic_interval',
               default=30,
               min=1,
               help='Seconds between two runs of the conductor periodic '
                    'tasks, such as the upgrade timeout check.'),
    cfg.IntOpt('agent_down_time',
               default=120,
               min=1,
               help='An agent whose last heartbeat is older than this many '
                    'seconds is reported as unreachable.'),
    cfg.IntOpt('heartbeat_write_interval',
               default=60,
               min=0,
               help='Seconds a conductor leaves the stored heartbeat of an '
                    'agent alone when a heartbeat brings nothing new (same '
                    'versions, state, labels and host): it records it '
                    'only once the heartbeat it last stored is this old, '
                    'so most heartbeats cost no database write, and '
                    'writes it with the next batch, within a second. '
                    'Keep it below agent_down_time minus the agents\' '
                    'heartbeat_interval, or reachable agents would show '
                    'as unreachable; a value above half of agent_down_time '
                    'counts as that half. 0 records every heartbeat.'),
    cfg.FloatOpt('rollout_interval',
                 default=5.0,
                 min=0.1,
                 help='Seconds between two passes of the rollout '
                      'reconciler, which dispatches the upgrades of running '
                      'rollouts, pauses them on failures and completes '
                      'them, and sends the upgrades held DEFERRED that '
                      'nothing holds any more.'),
    cfg.IntOpt('resend_interval',
               default=10,
               min=1,
               help='Seconds after which a conductor casts an upgrade to '
                    'its agent again when the agent has neither claimed '
                    'it nor reported it DEFERRED: a cast can be lost, '
                    'for example when RabbitMQ restarted and the agent '
                    'has not declared its queue again yet. Each further '
                    'cast waits twice as long as the one before, up to '
                    'resend_max_interval, until the agent claims the '
                    'upgrade or upgrade_timeout ends it. The agent ignores '
                    'copies of an upgrade it has. The reconciler checks '
                    'every rollout_interval seconds. The API reads it '
                    'too, for the first cast again of the upgrades it '
                    'sends: set the same value on the API and the '
                    'conductors.'),
    cfg.IntOpt('resend_max_interval',
               default=300,
               min=1,
               help='The longest wait, in seconds, between two casts of an '
                    'upgrade its agent has not claimed (see '
                    'resend_interval).'),
    cfg.IntOpt('rollout_send_threads',
               default=8,
               min=1,
               help='Threads with which the rollout reconciler casts a '
                    'batch of upgrades. Each cast waits for RabbitMQ to '
                    'confirm it, which takes longest when the agents the '
                    'batch reached are answering at once; several threads '
                    'wait together. Each uses its own connection from the '
                    '[DEFAULT] rpc_conn_pool_size pool.'),
    cfg.IntOpt('rollout_lease_time',
               default=60,
               min=1,
               help='Seconds for which a conductor that reconciled a '
                    'rollout keeps the sole right to reconcile it. Another '
                    'conductor (or this one, restarted) takes a rollout '
                    'over once its lease expired.'),
    cfg.BoolOpt('require_sealed',
                default=True,
                help='Refuse registrations, heartbeats, claims and reports '
                     'of instances that have no key, and refuse to send '
                     'upgrades to them. Messages of an instance with a key '
                     'must be sealed with it whatever this says. An '
                     'instance has a key when one was set with '
                     '"trove-upgrade-manage instance-key", or, with '
                     '[trove] connection set, when Trove gave it one. '
                     'Turn off only on a message bus nobody else can '
                     'publish on.'),
    cfg.IntOpt('seal_max_age',
               default=300,
               min=1,
               help='Seconds a sealed agent message stays acceptable; '
                    'older ones are refused as stale. Accepted message '
                    'ids are kept in each conductor\'s memory this long '
                    'to refuse replays.'),
    cfg.IntOpt('instance_key_cache_time',
               default=5,
               min=0,
               help='Seconds between two looks of a conductor for '
                    'instances whose keys changed; it keeps the keys it '
                    'read until then, and those of instances without '
                    'keys or with keys derived from Trove\'s this long. '
                    'A key added, rotated out or expired takes effect on '
                    'agent messages up to this much later; 0 reads the '
                    'keys for every message, at the cost of a database '
                    'transaction each.'),
    cfg.StrOpt('instance_key_master_key_file',
               help='File holding a base64 AES-256 key that encrypts the '
                    'instance keys in the database. Needed by every '
                    'process that seals or opens messages (the API, the '
                    'conductors, trove-upgrade-manage) once set; without '
                    'it keys are stored unencrypted.'),
]


def register_opts(conf):
    conf.register_group(conductor_group)
    conf.register_opts(conductor_opts, group=conductor_group)


def list_opts():
    return {conductor_group: conductor_opts}
