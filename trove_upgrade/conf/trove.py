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

"""Options of trove-upgrade's read-only use of Trove's own data.

``[trove]`` is for the control plane (API, conductors,
trove-upgrade-manage): where Trove's database is and the key Trove
encrypts its instance keys with. ``instance_rpc_encr_key`` is for the
guest-side agent: the same option, in the same ``[DEFAULT]`` group, that
Trove writes into each guest's configuration.
"""

from oslo_config import cfg

trove_group = cfg.OptGroup(
    'trove', title='Trove integration options',
    help='Read-only access to the database of the Trove deployment whose '
         'guest agents trove-upgrade upgrades. Without a connection '
         'trove-upgrade knows nothing of Trove: it neither checks that an '
         'instance exists nor waits while Trove works on it, and '
         'instances need keys set with "trove-upgrade-manage '
         'instance-key" for sealing.')

trove_opts = [
    cfg.StrOpt('connection',
               secret=True,
               help='SQLAlchemy URL of Trove\'s database, for example '
                    'mysql+pymysql://trove_ro:secret@db/trove. Only read, '
                    'never written: grant a user SELECT on the instances, '
                    'datastores, datastore_versions, backups and '
                    'service_statuses tables. '
                    'When set, an upgrade must name an instance Trove '
                    'knows (by id or by name), is held DEFERRED while '
                    'Trove works on the instance or its agent has not '
                    'registered yet, rollouts may select by Trove\'s '
                    'facts, and rollouts and desired versions follow '
                    'Trove\'s replication sets and clusters '
                    '(instances.slave_of_id and cluster_id), and Trove\'s '
                    'health gates upgrades of Trove guest agents '
                    '(health_gate).'),
    cfg.StrOpt('inst_rpc_key_encr_key',
               default='emYjgHFqfXNB1NGehAFIUeoyw4V4XwWHEaKP',
               secret=True,
               help='The value of Trove\'s own [DEFAULT] '
                    'inst_rpc_key_encr_key (Trove\'s default when unset '
                    'there), with which Trove encrypts each instance\'s '
                    'RPC key in its database. The control plane decrypts '
                    'those keys to derive the instances\' sealing keys.'),
    cfg.BoolOpt('health_gate',
                default=True,
                help='When [trove] connection is set, an upgrade of a Trove '
                     'guest agent ends SUCCESS only once Trove\'s conductor '
                     'has recorded a heartbeat of the restarted guest agent '
                     '(service_statuses.updated_at after the restart) whose '
                     'status is no worse than before the upgrade; otherwise '
                     'the agent rolls back after health_gate_timeout and the '
                     'upgrade ends FAILED with Trove\'s status in the '
                     'reason. The agents ask the conductors (RPC API 1.4); '
                     'an agent whose conductor is older checks the RPC '
                     'ping only.'),
    cfg.IntOpt('health_gate_timeout',
               default=180,
               min=5,
               max=3600,
               help='Seconds a restarted Trove guest agent has, after it '
                    'answers the RPC ping, for Trove to record a fresh '
                    'heartbeat no worse than before the upgrade. A Trove '
                    'guest agent heartbeats about once a minute (its '
                    'status task runs every 60 s, looked at every '
                    'report_interval of its configuration, 30 s by '
                    'default), the first time about a minute after it '
                    'starts: keep this well above 90 s.'),
]

guest_opts = [
    cfg.StrOpt('instance_rpc_encr_key',
               secret=True,
               help='The RPC key Trove gives this instance, as Trove '
                    'writes it into the guest agent\'s configuration '
                    '(guest_info.conf). The agent derives its message '
                    'sealing key from it when [agent] instance_key_file '
                    'is not set.'),
]


def register_opts(conf):
    conf.register_group(trove_group)
    conf.register_opts(trove_opts, group=trove_group)
    conf.register_opts(guest_opts)


def list_opts():
    return {trove_group: trove_opts, 'DEFAULT': guest_opts}
