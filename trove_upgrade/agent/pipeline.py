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

"""The upgrade runner: one upgrade from download to SUCCESS or rollback.

Steps, each recorded in the journal before it starts::

    accepted -> downloading -> verifying -> installing      (before the switch)
    -> switching -> restarting                               (after the switch)
    -> SUCCESS, or rolling_back -> FAILED

Before the switch nothing the running guest agent uses is touched: a
failure there deletes the new install and records FAILED. From
``switching`` on, a failure restores the last known good install, restarts
it, checks it and records FAILED with the reason and both versions.

Downloading and verifying read untrusted bytes: they run in a child
process killed at a deadline (:mod:`trove_upgrade.agent.untrusted`). Any
exception at all, expected or not, ends the upgrade the same way, with a
reason of bounded length, and clears it from the journal, so the agent
always takes the next upgrade.

:meth:`UpgradePipeline.recover` is what the agent does on start with an
upgrade the journal says was in progress; the table in
``doc/source/admin/agent.rst`` lists, step by step, where it converges.

Test hook (:mod:`trove_upgrade.agent.pause_hook`): the checkpoints
``downloading``, ``verifying``, ``installing``, ``switching``,
``restarting`` and ``health-check`` let the crash tests ``kill -9`` the
agent at a known step.

With ``trove_health`` (a Trove guest agent, :mod:`agent.trove_health`)
the restarted guest agent must also pass Trove's health gate: Trove's
status is asked before the switch and kept in the journal's upgrade, and
after the ping passes Trove must record a fresh heartbeat no worse, or
the upgrade rolls back.
"""

import contextlib
import functools
import os
import shutil

from oslo_log import log as logging
from oslo_utils import uuidutils

from trove_upgrade.agent import guest_files
from trove_upgrade.agent import install
from trove_upgrade.agent import pause_hook
from trove_upgrade.agent import reasons
from trove_upgrade.agent import strategies
from trove_upgrade.agent import supervisor as supervisor_mod
from trove_upgrade.agent import trove_health as trove_health_mod
from trove_upgrade.agent import untrusted
from trove_upgrade.common import exception
from trove_upgrade.common import exception as package_exc
from trove_upgrade.common import states

LOG = logging.getLogger(__name__)

ACCEPTED = 'accepted'
DOWNLOADING = 'downloading'
VERIFYING = 'verifying'
INSTALLING = 'installing'
SWITCHING = 'switching'
RESTARTING = 'restarting'
ROLLING_BACK = 'rolling_back'

BEFORE_SWITCH = (ACCEPTED, DOWNLOADING, VERIFYING, INSTALLING)

WORK_DIR = 'work'


class UpgradeStepError(exception.TroveUpgradeError):
    """A step before the switch failed; the reason is the message."""

    def __init__(self, reason):
        super().__init__(package_exc.bounded(reason))


class UpgradePipeline:
    """Runs upgrades recorded in the journal; one at a time.

    ``steps`` runs the download and verify steps; by default each in a
    child process with a deadline. Injecting ``load_strategy`` (unit tests)
    runs them in this process instead, with that strategy loader.
    """

    def __init__(self, conf, journal, installs, supervisor, verifier,
                 load_strategy=None, steps=None, trove_health=None):
        self.conf = conf
        self.trove_health = trove_health
        self.journal = journal
        self.installs = installs
        self.supervisor = supervisor
        self.verifier = verifier
        if steps is None and load_strategy is not None:
            steps = untrusted.InProcessSteps(conf, verifier, load_strategy,
                                             store=installs.wheel_store)
        self.steps = steps or untrusted.ChildProcessSteps(
            conf, verifier, store=installs.wheel_store)
        self.load_strategy = load_strategy or (
            lambda name: strategies.load(name, conf=conf))
        self.work_root = os.path.join(installs.root, WORK_DIR)

    # Journal helpers.

    def _set_step(self, upgrade, step, report=None, detail=''):
        with self.journal.update() as data:
            current = data['current_upgrade']
            current['step'] = step
            if detail:
                current['detail'] = detail
            if report:
                self.journal.add_report(
                    data, upgrade['id'], report, detail,
                    upgrade['from_version'], upgrade['to_version'])
        upgrade['step'] = step
        LOG.info('Upgrade %s: %s %s', upgrade['id'], step, detail)

    def _finish(self, upgrade, state, detail, last_known_good=None):
        with self.journal.update() as data:
            data['current_upgrade'] = None
            data['processed'][upgrade['id']] = state
            if last_known_good:
                data['last_known_good'] = last_known_good
            self.journal.add_report(
                data, upgrade['id'], state, detail,
                upgrade['from_version'], upgrade['to_version'])
        # An id that makes no path had no work directory.
        with contextlib.suppress(exception.InvalidUpgradeIdError):
            shutil.rmtree(self._work_dir(upgrade), ignore_errors=True)
        LOG.info('Upgrade %s: %s: %s', upgrade['id'], state, detail)

    def _checkpoint(self, name):
        pause_hook.pause_at(self.installs.root, name)

    def _work_dir(self, upgrade):
        """The upgrade's directory; the id is checked where it becomes a path.

        :raises: InvalidUpgradeIdError: an id of ``/etc`` made the work
            directory ``/etc``, removed and made again as root.
        """
        if not uuidutils.is_uuid_like(upgrade['id']):
            raise exception.InvalidUpgradeIdError(
                upgrade_id=package_exc.quoted(upgrade['id']))
        return os.path.join(self.work_root, upgrade['id'])

    def _health(self, version):
        """``(command, timeout)`` checking ``version``.

        The package's own health check, recorded at install, comes first;
        ``[agent] health_command`` and ``health_timeout`` fill the gaps.
        """
        command, timeout = self.installs.health_check(version)
        return (command or self.conf.agent.health_command,
                timeout or self.conf.agent.health_timeout)

    # Entry points.

    def run(self, upgrade):
        """Run an upgrade from the beginning up to a final state.

        Never raises an Exception but ``untrusted.StepStopped``, which
        leaves the upgrade at its step for the next start, and the error
        of a journal that cannot record the end either (a full disk),
        which leaves it for the runner to recover: whatever else goes
        wrong ends the upgrade FAILED, rolled back if the switch was
        made.
        """
        try:
            return self._run(upgrade)
        except untrusted.StepStopped as e:
            LOG.warning('Upgrade %s left at step %s, the next start takes '
                        'it up: %s', upgrade['id'], upgrade.get('step'), e)
            raise
        except Exception as e:
            return self._fail_unexpectedly(upgrade, e)

    def _fail_unexpectedly(self, upgrade, error):
        LOG.exception('Upgrade %s: unexpected error at step %s',
                      upgrade['id'], upgrade.get('step'))
        reason = untrusted.describe(error)
        try:
            if upgrade.get('step') in BEFORE_SWITCH:
                self._fail_before_switch(upgrade, reason)
            else:
                self._roll_back(upgrade, reason)
        except Exception:
            LOG.exception('Upgrade %s: recording the failure failed too; '
                          'recording FAILED only', upgrade['id'])
            self._finish(upgrade, states.FAILED, '%s; cleaning up failed'
                         % reason)
        return states.FAILED

    def _run(self, upgrade):
        to_version = upgrade['to_version']
        if (to_version == self.installs.current_version()
                and self.supervisor.is_running()):
            self._finish(upgrade, states.SUCCESS,
                         'version %s is already running' % to_version,
                         last_known_good=to_version)
            return states.SUCCESS
        try:
            self._before_switch(upgrade)
        except (UpgradeStepError, exception.InvalidUpgradeIdError) as e:
            self._fail_before_switch(upgrade, str(e))
            return states.FAILED
        return self._after_switch(upgrade)

    def recover(self):
        """Finish what a killed agent left; make sure a guest agent runs."""
        self.installs.remove_incomplete()
        self.supervisor.adopt()
        self.supervisor.sweep_orphans()
        upgrade = self.journal.read()['current_upgrade']
        if upgrade is None:
            self._clean_work_root()
            self.ensure_guest_running()
            return None
        with self.journal.update() as data:
            data['current_upgrade']['attempts'] += 1
            upgrade = dict(data['current_upgrade'])
        LOG.warning('Upgrade %s was interrupted at step %s (attempt %d)',
                    upgrade['id'], upgrade['step'], upgrade['attempts'])
        too_many = upgrade['attempts'] > self.conf.agent.max_resume_attempts
        reason = ('the agent restarted %d times during this upgrade'
                  % (upgrade['attempts'] - 1))
        step = upgrade['step']
        if step in BEFORE_SWITCH:
            self.ensure_guest_running()
            if too_many:
                self._fail_before_switch(upgrade, reason)
                return states.FAILED
            return self.run(upgrade)
        if step == ROLLING_BACK:
            return self._roll_back(upgrade, upgrade.get('detail') or reason)
        if too_many:
            return self._roll_back(upgrade, reason)
        return self._after_switch(upgrade)

    def stop(self):
        """End the download or verification in hand: the agent stops.

        The steps before them and after are short or must not be cut:
        they run on, and ``run`` raises ``untrusted.StepStopped`` at the
        next untrusted step.
        """
        self.steps.stop()

    # Before the switch: nothing the guest agent uses is touched.

    def _before_switch(self, upgrade):
        work = self._work_dir(upgrade)
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        # Not reported: the claim (``AgentManager.run_next``) recorded
        # DOWNLOADING, so the report would be a duplicate the conductor
        # ignores, costing it a call for each upgrade.
        self._set_step(upgrade, DOWNLOADING,
                       detail='downloading %s with strategy %s'
                       % (upgrade['location'], upgrade['strategy']))
        self._checkpoint('downloading')
        if self.verifier is None:
            raise UpgradeStepError(
                'no trusted keys are configured: set [agent] '
                'trusted_key_files and decryption_key_files')
        try:
            fetched = self.steps.download(upgrade, work)
            self._set_step(upgrade, VERIFYING, states.VERIFYING,
                           'verifying and decrypting %d bytes fetched; %d '
                           'wheel(s) kept from earlier installs'
                           % (fetched['size'], fetched['kept']))
            self._checkpoint('verifying')
            result = self.steps.verify(upgrade, work)
        except untrusted.StepError as e:
            shutil.rmtree(work, ignore_errors=True)
            raise UpgradeStepError(str(e))
        wheels = result['wheels']
        command = result['health_command'] or self.conf.agent.health_command
        timeout = result['health_timeout'] or self.conf.agent.health_timeout
        self._set_step(upgrade, INSTALLING, states.INSTALLING,
                       'installing %d wheel(s) into a new virtualenv'
                       % len(wheels))
        self._checkpoint('installing')
        try:
            self.installs.install(upgrade['to_version'], wheels,
                                  health_command=command,
                                  health_timeout=timeout,
                                  console_script=result['console_script'])
        except install.InstallError as e:
            raise UpgradeStepError('install failed: %s' % e)

    def _fail_before_switch(self, upgrade, reason):
        version = upgrade['to_version']
        data = self.journal.read()
        if version not in (self.installs.current_version(),
                           data['last_known_good']):
            with self.installs.lock:
                shutil.rmtree(self.installs.path(version), ignore_errors=True)
        self._finish(upgrade, states.FAILED,
                     '%s; the running guest agent %s was not touched'
                     % (package_exc.bounded(reason),
                        upgrade['from_version'] or '(none)'))

    # The switch and after: failures roll back.

    def _after_switch(self, upgrade):
        to_version = upgrade['to_version']
        gate = self._trove_gate(upgrade)
        self._set_step(upgrade, SWITCHING)
        self._checkpoint('switching')
        try:
            self.installs.switch(to_version)
        except install.InstallError as e:
            return self._roll_back(upgrade, 'switch failed: %s' % e)

        self._set_step(upgrade, RESTARTING, states.RESTARTING,
                       'restarting the guest agent on %s' % to_version)
        self._checkpoint('restarting')
        try:
            self._restart(to_version, upgrading=True)
        except supervisor_mod.GuestStartError as e:
            return self._roll_back(upgrade, str(e))
        except Exception as e:
            return self._roll_back(upgrade, untrusted.describe(e))
        trove_said = None
        if gate is not None:
            failure, trove_said = self.trove_health.wait(upgrade, gate)
            if failure:
                return self._roll_back(upgrade, failure)
        self._finish(upgrade, states.SUCCESS,
                     'guest agent %s is running and healthy%s' % (
                         to_version, '; %s' % trove_said if trove_said
                         else ''),
                     last_known_good=to_version)
        self._prune()
        return states.SUCCESS

    def _trove_gate(self, upgrade):
        """Trove's health gate of ``upgrade``, asked once and journaled.

        None without a gate; a restarted agent keeps the first baseline,
        taken before the switch.
        """
        if self.trove_health is None:
            return None
        key = trove_health_mod.JOURNAL_KEY
        if key not in upgrade:
            gate = self.trove_health.baseline(upgrade)
            with self.journal.update() as data:
                data['current_upgrade'][key] = gate
            upgrade[key] = gate
        return upgrade[key]

    def _restart(self, version, upgrading=False, keep_unhealthy=False):
        """Restart the guest agent of ``current`` and check ``version``."""
        agent = self.conf.agent
        command, timeout = self._health(version)
        on_started = None
        if upgrading:
            on_started = functools.partial(self._checkpoint, 'health-check')
        return self.supervisor.restart(
            command, agent.health_grace, timeout, agent.restart_retries,
            on_started=on_started, keep_unhealthy=keep_unhealthy)

    def _roll_back(self, upgrade, reason):
        reason = package_exc.bounded(reason)
        self._set_step(upgrade, ROLLING_BACK, detail=reason)
        good = self.journal.read()['last_known_good']
        good = good or upgrade['from_version']
        if not good or not self.installs.is_installed(good):
            detail = '%s; no previous version to roll back to' % reason
            try:
                self.supervisor.stop()
            except Exception as e:
                LOG.exception('Upgrade %s: stopping the guest agent failed',
                              upgrade['id'])
                detail += '; stopping the guest agent failed too: %s' % (
                    untrusted.describe(e))
            self._finish(upgrade, states.FAILED, detail)
            return states.FAILED
        failure = None
        try:
            self.installs.switch(good)
            self._restart(good, keep_unhealthy=True)
        except Exception as e:
            LOG.warning('Upgrade %s: rolling back to %s: %s', upgrade['id'],
                        good, e)
            failure = guest_files.bounded(
                str(e) if isinstance(e, exception.TroveUpgradeError)
                else reasons.of_error(e))
        self._finish(upgrade, states.FAILED, '%s; %s' % (
            reason, self._rollback_outcome(good, failure)))
        return states.FAILED

    def _rollback_outcome(self, good, failure):
        """What runs after rolling back to ``good``, judged by looking.

        The old release answering on its topic (the probe) is a rollback
        done, whatever its first health checks said; a rollback that
        failed says what runs instead, if anything.
        """
        running = self.supervisor.running_version()
        if running == good:
            if failure is None:
                return 'rolled back to %s, which is running' % good
            probe = self.supervisor.probe
            now = probe() if probe is not None else failure
            if now is None:
                return 'rolled back to %s, which is running' % good
            return ('rolled back to %s, which is running but not healthy: '
                    '%s' % (good, failure))
        return 'rolling back to %s failed too: %s; %s' % (
            good, failure or 'it is not running',
            '%s is running' % running if running else
            'no guest agent is running')

    # Housekeeping.

    def _prune(self):
        good = self.journal.read()['last_known_good']
        self.installs.prune(self.conf.agent.keep_versions, protect=[good])

    def _clean_work_root(self):
        shutil.rmtree(self.work_root, ignore_errors=True)

    def ensure_guest_running(self):
        """Adopt or start the guest agent of ``current``; True when healthy.

        Also records ``current`` as last known good the first time a
        guest agent installed by other means is seen healthy.
        """
        version = self.installs.current_version()
        if version is None:
            return False
        running = self.supervisor.is_running() or self.supervisor.adopt()
        if running and self.supervisor.running_version() == version:
            healthy = True
        else:
            try:
                self._restart(version)
                healthy = True
            except supervisor_mod.GuestStartError as e:
                LOG.error('The guest agent %s does not start: %s',
                          version, e)
                healthy = False
        if healthy:
            with self.journal.update() as data:
                if data['last_known_good'] is None:
                    data['last_known_good'] = version
        return healthy
