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

"""Options of the REST API service."""

from oslo_config import cfg

api_group = cfg.OptGroup(
    'api', title='REST API options',
    help='Options of the trove-upgrade REST API service.')

api_opts = [
    cfg.HostAddressOpt('bind_host',
                       default='127.0.0.1',
                       help='Address on which trove-upgrade-api listens.'),
    cfg.PortOpt('bind_port',
                default=8790,
                help='Port on which trove-upgrade-api listens.'),
    cfg.StrOpt('auth_strategy',
               default='keystone',
               choices=[('keystone', 'Validate tokens with '
                                     'keystonemiddleware auth_token.'),
                        ('noauth2', 'Trust the X-User-Id, X-Project-Id and '
                                    'X-Roles headers. Development and demos '
                                    'only: anyone who can reach the API is '
                                    'whoever they claim to be.')],
               help='How API requests are authenticated.'),
    cfg.IntOpt('max_limit',
               default=1000,
               min=1,
               help='The largest page a list call returns, whatever the '
                    'limit the client asks for.'),
    cfg.IntOpt('max_request_body_size',
               default=65536,
               min=1024,
               help='Request bodies larger than this many bytes are '
                    'refused with 413 before they are parsed; '
                    'trove-upgrade-api refuses them before it reads them.'),
    cfg.IntOpt('client_socket_timeout',
               default=60,
               min=1,
               help='Seconds a client connection to trove-upgrade-api may '
                    'stay silent, waiting for its next request on a '
                    'kept-alive connection or in the middle of sending a '
                    'request or receiving a response, before the server '
                    'closes it. The WSGI servers that serve '
                    'trove_upgrade.wsgi.api have settings of their own.'),
    cfg.IntOpt('max_connections',
               default=1000,
               min=1,
               help='Client connections trove-upgrade-api keeps open at '
                    'once, idle or busy; with that many open it accepts no '
                    'more until one closes, and the next ones wait in the '
                    'kernel\'s queue. The default leaves a '
                    'process with the usual limit of 1024 open files room '
                    'for its database and message-bus connections; keep '
                    'it below that limit (ulimit -n, systemd LimitNOFILE) '
                    'less the database pool. The WSGI servers that serve '
                    'trove_upgrade.wsgi.api have settings of their own.'),
]


def register_opts(conf):
    conf.register_group(api_group)
    conf.register_opts(api_opts, group=api_group)


def list_opts():
    return {api_group: api_opts}
