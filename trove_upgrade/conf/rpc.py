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

"""Options of trove-upgrade's own use of oslo.messaging."""

from oslo_config import cfg

rpc_opts = [
    cfg.IntOpt('rpc_send_retries',
               default=2,
               min=-1,
               help='How many times sending an RPC message is retried while '
                    'the messaging server cannot be reached, before the '
                    'send fails; -1 retries forever. When the control '
                    'plane cannot send an upgrade, it records the upgrade '
                    'FAILED and the API answers 503 instead of waiting; '
                    'when an agent cannot send a report, the report stays '
                    'in its outbox for the next attempt.'),
]


def register_opts(conf):
    conf.register_opts(rpc_opts)


def list_opts():
    return {'DEFAULT': rpc_opts}
