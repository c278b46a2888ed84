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

"""Entry points for oslo-config-generator and the sample config."""

import itertools

from oslo_config import cfg
from oslo_log import log
from oslo_middleware.healthcheck import opts as healthcheck_opts
from oslo_policy import opts as policy_opts

from trove_upgrade import conf
from trove_upgrade.conf import database

# The API's [healthcheck] backends unless configured otherwise: its
# database's (trove_upgrade.api.healthcheck, named in setup.cfg), so that
# a node that cannot reach its database leaves its load balancer's pool.
HEALTHCHECK_BACKENDS = ('trove_upgrade_database',)


def list_opts():
    """Return (group, options) pairs of every trove-upgrade option."""
    merged = {}
    for area in conf.AREAS:
        for group, opts in area.list_opts().items():
            merged.setdefault(group, []).extend(opts)
    return [(group, sorted(opts, key=lambda o: o.name))
            for group, opts in sorted(merged.items(), key=_group_name)]


def set_defaults():
    """Defaults of library options that differ for trove-upgrade."""
    # Imported here: the generator needs it, the services import it first
    # thing anyway, and importing it at the top would drag oslo.messaging
    # into every user of the options.
    from trove_upgrade.common import rpc
    rpc.set_defaults()
    database.register_opts(conf.CONF)
    policy_opts.set_defaults(conf.CONF, policy_file='policy.yaml')
    log.set_defaults(default_log_levels=list(itertools.chain(
        log.get_default_log_levels(), ['keystonemiddleware=WARN'])))
    set_healthcheck_defaults()


def set_healthcheck_defaults():
    """Put the database backend in the API's health check by default.

    On oslo.middleware's option objects, which the sample config generator
    reads and the health check registers when the API builds it.
    """
    cfg.set_defaults(healthcheck_opts.HEALTHCHECK_OPTS,
                     backends=list(HEALTHCHECK_BACKENDS))


def _group_name(item):
    group = item[0]
    return getattr(group, 'name', group)
