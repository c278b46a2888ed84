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

"""trove-upgrade-agent upgrading itself: install, hand over, confirm.

An upgrade of the ``upgrade-agent`` component (agent RPC API 1.3) runs the
guest agent's pipeline up to the install, into the agent's own install
root (``[self_upgrade] install_root``): downloaded, verified and built in a
new virtualenv by ``install.InstallRoot``, nothing the running agent uses
touched. Then, instead of a switch, the hand-over::

    handover (journal: from, to, deadline) -> watcher started
    watcher: a trial start of the new version (handover.AgentRestarter)
    new agent: registers with the conductor, then confirms: current points
    at it, SUCCESS
    or the new agent ends unconfirmed: its service starts the previous
    version, which records FAILED
    or the deadline passes: rolling_back -> the watcher restarts the
    previous version, which records FAILED

The watcher (:mod:`trove_upgrade.agent.handover`) is a process of its own,
so that neither the agent it stops nor the one it starts carries the
hand-over. Whichever agent starts while a hand-over is unfinished and no
watcher holds its lock starts one (:meth:`SelfUpgradePipeline.recover`),
so a ``kill -9`` of the old agent, the new one or the watcher at any step
leaves one agent running a version the journal names. The previous agent
records the rollback's FAILED itself, once it runs: the record says what
is true.

Both components share the journal's one queue and its one runner, so an
upgrade of the guest agent and one of the upgrade agent never overlap.
"""

import time

from oslo_log import log as logging

from trove_upgrade.agent import handover
from trove_upgrade.agent import install
from trove_upgrade.agent import pause_hook
from trove_upgrade.agent import pipeline as pipeline_mod
from trove_upgrade.common import exception as package_exc
from trove_upgrade.common import rpc_interface
from trove_upgrade.common import states
from trove_upgrade import version as version_mod

LOG = logging.getLogger(__name__)

HANDOVER = handover.HANDOVER
ROLLING_BACK = pipeline_mod.ROLLING_BACK


def own_version():
    """The version of trove-upgrade this agent runs."""
    return version_mod.version_info.version_string()


def is_self_upgrade(upgrade):
    return bool(upgrade) and (
        upgrade.get('component') == rpc_interface.UPGRADE_AGENT)


def component_problem(conf, component):
    """Why this agent cannot take an upgrade of ``component``, or None."""
    if component not in rpc_interface.COMPONENTS:
        return 'component %s is none of %s' % (
            package_exc.quoted(component),
            ', '.join(rpc_interface.COMPONENTS))
    if component == rpc_interface.UPGRADE_AGENT and not (
            conf.self_upgrade.enabled):
        return ('[self_upgrade] enabled is false on this guest: the agent '
                'does not upgrade itself')
    return None


def running_version(upgrade, guest_installs):
    """What an upgrade of ``upgrade``'s component starts from."""
    if is_self_upgrade(upgrade):
        return own_version()
    return guest_installs.current_version()


class _AgentItself:
    """The supervisor's questions the pipeline asks, about this agent."""

    def is_running(self):
        return True

    def running_version(self):
        return own_version()

    def adopt(self):
        return True

    def sweep_orphans(self):
        return []


class SelfUpgradePipeline(pipeline_mod.UpgradePipeline):
    """The guest pipeline's steps before the switch, then the hand-over."""

    def __init__(self, conf, journal, verifier, steps=None,
                 is_registered=lambda: False):
        installs = install.InstallRoot(conf.self_upgrade.install_root,
                                       journal.lock)
        super().__init__(conf, journal, installs, _AgentItself(), verifier,
                         steps=steps)
        self.is_registered = is_registered

    def _finish(self, upgrade, state, detail, last_known_good=None):
        # The journal's last known good is the guest agent's.
        super()._finish(upgrade, state, detail)

    def ensure_guest_running(self):
        """This agent runs: there is nothing to start."""
        return True

    def _fail_before_switch(self, upgrade, reason):
        version = upgrade['to_version']
        with self.installs.lock:
            if version != self.installs.current_version():
                install.remove_tree(self.installs.path(version))
        self._finish(upgrade, states.FAILED,
                     '%s; the running upgrade agent %s was not touched'
                     % (package_exc.bounded(reason), upgrade['from_version']))

    def _after_switch(self, upgrade):
        deadline = time.time() + self.conf.self_upgrade.handover_timeout
        with self.journal.update() as data:
            current = data['current_upgrade']
            current.update(step=HANDOVER, deadline=deadline,
                           restarted=False)
            self.journal.add_report(
                data, upgrade['id'], states.RESTARTING,
                'restarting the upgrade agent on %s; it must confirm '
                'within %ds' % (upgrade['to_version'],
                                self.conf.self_upgrade.handover_timeout),
                upgrade['from_version'], upgrade['to_version'])
        upgrade.update(step=HANDOVER, deadline=deadline)
        LOG.info('Upgrade %s: handing over to upgrade agent %s',
                 upgrade['id'], upgrade['to_version'])
        pause_hook.pause_once(self.installs.root, 'handover')
        handover.ensure_watcher(self.conf)
        return states.RESTARTING

    def recover(self):
        """Carry on a hand-over the journal records; True while it lasts.

        Only one agent runs at a time (the install root's agent lock), so
        the one that runs knows: the new version confirms once registered
        and before the deadline; the previous version, once the new one
        had its trial start, knows it ended unconfirmed and rolls back, as
        it does past the deadline when no watcher runs; otherwise a
        watcher carries the hand-over on.
        """
        upgrade = self.journal.read()['current_upgrade']
        if not is_self_upgrade(upgrade):
            return False
        step = upgrade['step']
        if step in pipeline_mod.BEFORE_SWITCH:
            self.installs.remove_incomplete(protect=[own_version()])
            return super().recover() == states.RESTARTING
        if step not in (HANDOVER, ROLLING_BACK):
            self._finish(upgrade, states.FAILED,
                         'the hand-over stopped at step %s' % step)
            return False
        mine = own_version()
        if mine == upgrade['to_version'] and step == HANDOVER:
            if self.is_registered():
                pause_hook.pause_once(self.installs.root, 'confirm')
                if self._confirm(upgrade):
                    return False
            handover.ensure_watcher(self.conf)
            return True
        if mine == upgrade['to_version']:
            # Rolling back: the watcher restarts the previous version.
            handover.ensure_watcher(self.conf)
            return True
        if step == ROLLING_BACK:
            self._finish_rollback(upgrade, upgrade.get('detail'))
            return False
        if upgrade.get('restarted'):
            self._finish_rollback(upgrade, (
                'upgrade agent %s stopped before it confirmed the upgrade'
                % upgrade['to_version']))
            return False
        if (time.time() > upgrade['deadline']
                and not handover.watcher_running(self.conf)):
            self._finish_rollback(upgrade, (
                'the hand-over to upgrade agent %s did not start within '
                '%ds' % (upgrade['to_version'],
                         self.conf.self_upgrade.handover_timeout)))
            return False
        handover.ensure_watcher(self.conf)
        return True

    def _confirm(self, upgrade):
        """Record SUCCESS, unless the deadline passed or a rollback began.

        The program link points at this version from now on.
        """
        with self.journal.update() as data:
            current = data['current_upgrade']
            if not (current and current['id'] == upgrade['id']
                    and current['step'] == HANDOVER
                    and time.time() <= current['deadline']):
                return False
            self.installs.switch(upgrade['to_version'])
            data['current_upgrade'] = None
            data['processed'][upgrade['id']] = states.SUCCESS
            self.journal.add_report(
                data, upgrade['id'], states.SUCCESS,
                'upgrade agent %s is running and registered'
                % upgrade['to_version'],
                upgrade['from_version'], upgrade['to_version'])
        LOG.info('Upgrade %s: upgrade agent %s confirmed the hand-over',
                 upgrade['id'], upgrade['to_version'])
        self.installs.prune(self.conf.agent.keep_versions,
                            protect=[upgrade['from_version']])
        return True

    def _finish_rollback(self, upgrade, reason):
        """This agent, the previous version, runs again: FAILED."""
        self.installs.switch(upgrade['from_version'])
        version = upgrade['to_version']
        with self.installs.lock:
            if version != upgrade['from_version']:
                install.remove_tree(self.installs.path(version))
        self._finish(upgrade, states.FAILED, '%s; rolled back to %s, which '
                     'is running' % (reason or 'the hand-over failed',
                                     upgrade['from_version']))


class Pipelines:
    """The guest agent's pipeline and the agent's own, as one runner sees.

    The service's runner and the manager call what they called on the
    guest pipeline; an upgrade goes to the pipeline of its component.
    """

    def __init__(self, guest, agent):
        self.guest = guest
        self.agent = agent
        self.installs = guest.installs

    def run(self, upgrade):
        if is_self_upgrade(upgrade):
            return self.agent.run(upgrade)
        return self.guest.run(upgrade)

    def recover(self):
        if self.agent is not None and is_self_upgrade(
                self.agent.journal.read()['current_upgrade']):
            self.guest.ensure_guest_running()
            return self.agent.recover()
        return self.guest.recover()

    def stop(self):
        self.guest.stop()
        if self.agent is not None:
            self.agent.stop()

    def ensure_guest_running(self):
        return self.guest.ensure_guest_running()
