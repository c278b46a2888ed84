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

"""Download strategies of trove-upgrade-agent, loaded as stevedore plugins.

A strategy is installed when a package registers it under the
``trove_upgrade.strategies`` entry point group, configured by its own
drop-in file and usable when ``[agent] allowed_strategies`` names it. See
:mod:`trove_upgrade.agent.strategies.base` for the contract.
"""

from stevedore import driver
from stevedore import exception as stevedore_exc

from trove_upgrade.agent.strategies import exception as exceptions
from trove_upgrade import conf as tu_conf
from trove_upgrade import strategy_plugins


def load(name, conf=tu_conf.CONF):
    """Return a ready strategy named ``name``, configured from ``conf``."""
    allowed = conf.agent.allowed_strategies
    if name not in allowed:
        raise exceptions.StrategyNotAllowedError(
            name=name, allowed=', '.join(allowed) or '(empty)')
    try:
        manager = driver.DriverManager(
            strategy_plugins.NAMESPACE, name, invoke_on_load=False,
            on_load_failure_callback=_not_loadable(name))
    except stevedore_exc.NoMatches:
        raise exceptions.StrategyNotInstalledError(
            name=name,
            reason='no plugin of that name in entry point group %s'
                   % strategy_plugins.NAMESPACE)
    return manager.driver(conf)


def _not_loadable(name):
    def fail(manager, entrypoint, exc):
        raise exceptions.StrategyNotInstalledError(
            name=name, reason='its plugin %s cannot be imported: %s'
                              % (entrypoint.value, exc)) from exc
    return fail
