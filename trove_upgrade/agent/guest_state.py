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

"""Where the agent learns whether the guest may be upgraded now.

The Trove design forbids upgrading while the guest is busy (backup,
restore, resize, restart) or broken (error). What the guest is doing is
known to Trove's guest agent, not to the updater, so the source is
pluggable: ``file`` reads a file the guest agent (or an operator) writes,
``command`` runs a command that prints the state. Other providers register
under the ``trove_upgrade.guest_state`` entry point group and are built
with the agent's configuration.
"""

import shlex

from oslo_log import log as logging
from stevedore import driver

from trove_upgrade.agent import child_process
from trove_upgrade.agent import reasons
from trove_upgrade.common import exception

LOG = logging.getLogger(__name__)

RUNNING = 'running'
NON_UPGRADEABLE = frozenset(['backup', 'restore', 'resize', 'restart',
                             'error'])
ENTRY_POINT_GROUP = 'trove_upgrade.guest_state'
UNKNOWN = 'unknown'
# Characters of a state file, bytes of a state command's output, read.
STATE_LIMIT = 256


class GuestStateError(exception.TroveUpgradeError):
    """The guest state could not be read."""


def normalise(text):
    state = (text or '').strip().lower()
    return state or UNKNOWN


def is_upgradeable(state):
    """Only a running guest is upgraded; an unknown state is not safe."""
    return state == RUNNING


class FileStateProvider:
    """Reads the state from a file; a missing file means running.

    A missing file means running because a guest agent that never wrote
    a state is not doing any of the long operations the rule protects.
    """

    def __init__(self, conf):
        self.path = conf.agent.guest_state_file

    def get_state(self):
        try:
            with open(self.path, encoding='utf-8') as f:
                return normalise(f.read(STATE_LIMIT))
        except FileNotFoundError:
            return RUNNING
        except OSError as e:
            raise GuestStateError('cannot read the guest state file %s: %s'
                                  % (self.path, e))


class CommandStateProvider:
    """Runs a command and takes the first line of its output as the state."""

    def __init__(self, conf):
        if not conf.agent.guest_state_command:
            raise GuestStateError('[agent] guest_state_command is not set')
        self.argv = shlex.split(conf.agent.guest_state_command)
        self.timeout = conf.agent.guest_state_timeout

    def get_state(self):
        try:
            proc = child_process.run(self.argv, self.timeout,
                                     head=STATE_LIMIT)
        except (OSError, child_process.ChildTimeoutError) as e:
            raise GuestStateError('guest state command failed: %s' % e)
        if proc.returncode != 0:
            raise GuestStateError(
                'guest state command exited with %d: %s'
                % (proc.returncode, reasons.error_line(proc.stderr.tail)))
        lines = proc.stdout.head.splitlines()
        return normalise(lines[0] if lines else '')


BUILT_IN = {
    'file': FileStateProvider,
    'command': CommandStateProvider,
}


def load(conf):
    """The provider named by ``[agent] guest_state_provider``."""
    name = conf.agent.guest_state_provider
    if name in BUILT_IN:
        return BUILT_IN[name](conf)
    try:
        return driver.DriverManager(ENTRY_POINT_GROUP, name,
                                    invoke_on_load=True,
                                    invoke_args=(conf,)).driver
    except Exception as e:
        raise GuestStateError('unknown guest state provider %r: %s'
                              % (name, e))


def current_state(provider):
    """The guest state, ``unknown`` when the provider fails."""
    try:
        return provider.get_state()
    except GuestStateError as e:
        LOG.warning('%s', e)
        return UNKNOWN
