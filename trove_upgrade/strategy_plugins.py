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

"""The download strategies, as plugins, named without importing them.

A strategy is a plugin in the entry point namespace :data:`NAMESPACE`;
trove-upgrade's own are registered the same way as anyone else's. The API,
the CLI and the configuration read the names from the installed
distributions' metadata, so that an installed plugin can be asked for
everywhere while only the agent that runs it imports its code.
"""

from importlib import metadata

NAMESPACE = 'trove_upgrade.strategies'
DISTRIBUTION = 'trove-upgrade'


def installed():
    """The names of every installed strategy, sorted."""
    return sorted({entry_point.name for entry_point
                   in metadata.entry_points(group=NAMESPACE)})


def built_in():
    """The names of the strategies trove-upgrade itself ships, sorted."""
    return sorted({entry_point.name for entry_point
                   in metadata.distribution(DISTRIBUTION).entry_points
                   if entry_point.group == NAMESPACE})


# The CLI's help of --strategy. The CLI offers no choices: the strategy
# the agents run need not be installed where the CLI runs, and the API
# refuses one its host does not know.
HELP = ('How the agents fetch the package: the name of a strategy plugin '
        '(entry point namespace %s); installed here: %%s' % NAMESPACE)


def listing():
    """The installed strategies as a sentence, for help texts."""
    return ', '.join(installed()) or 'none'
