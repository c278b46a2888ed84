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

"""The trove-upgrade-agent service: RPC server, runner, reports, heartbeat.

Threads, each with one job:

* the RPC server on ``guestagent_upgrade.<instance id>``: validates and
  queues upgrades (``AgentManager.upgrade``), never runs them;
* the runner: first recovers whatever the journal says a killed agent
  left, then runs queued upgrades one at a time when the guest is
  running, and keeps the guest agent running in between. An upgrade
  whose end a full disk kept out of the journal is recovered in the
  same way, once the disk has room. It is the only
  thread that starts or stops the guest agent. A stop kills the download
  or verification in hand, leaving the upgrade at its step for the next
  start (``untrusted.StepStopped``);
* a timer sending the journal's outbox until the conductor confirms it
  (``agent.outbox``: progress by cast, the final report by call);
* a timer registering, then heartbeating, to the conductor.

Only one agent may own an install root: a second one exits at start.
"""

import fcntl
import os
import socket
import threading
import time

from oslo_log import log as logging
import oslo_messaging as messaging
from oslo_service import service

from trove_upgrade.agent import adopt
from trove_upgrade.agent import guest_state
from trove_upgrade.agent import init_system
from trove_upgrade.agent import install
from trove_upgrade.agent import journal as journal_mod
from trove_upgrade.agent import manager as manager_mod
from trove_upgrade.agent import nova_metadata
from trove_upgrade.agent import outbox as outbox_mod
from trove_upgrade.agent import pipeline as pipeline_mod
from trove_upgrade.agent import self_upgrade
from trove_upgrade.agent import trove_guest
from trove_upgrade.agent import trove_health
from trove_upgrade.agent import unprivileged
from trove_upgrade.agent import untrusted
from trove_upgrade.agent import verifier as verifier_mod
from trove_upgrade.common import conductor_rpcapi as conductor_rpcapi
from trove_upgrade.common import context as tu_context
from trove_upgrade.common import exception
from trove_upgrade.common import exception as package_exc
from trove_upgrade.common import rpc
from trove_upgrade.common import rpc_interface
from trove_upgrade.common import sealing
from trove_upgrade.common import trove_keys
from trove_upgrade import version

LOG = logging.getLogger(__name__)

AGENT_LOCK = 'agent.lock'
OWNER_WAIT = 30


class AgentConfigError(exception.TroveUpgradeError):
    """The agent's configuration cannot work; it refuses to start."""


def check_conf(conf):
    needed = ['instance_id']
    if conf.agent.service_manager == 'builtin':
        needed.append('guest_command')
    missing = [name for name in needed if not getattr(conf.agent, name)]
    if missing:
        raise AgentConfigError('[agent] %s must be set'
                               % ' and '.join(missing))
    if conf.agent.guest_automatic_updates and not (
            conf.agent.trusted_key_files and conf.agent.decryption_key_files):
        raise AgentConfigError(
            '[agent] guest_automatic_updates needs trusted_key_files and '
            'decryption_key_files: packages cannot be verified without them')
    try:
        unprivileged.ids(conf)
    except unprivileged.UntrustedUserError as e:
        raise AgentConfigError(str(e))
    problem = _labels_problem(conf.agent.labels)
    if problem:
        raise AgentConfigError('[agent] labels: %s: the conductor would '
                               'refuse every registration' % problem)
    if conf.agent.require_sealed and not (conf.agent.instance_key_file
                                          or conf.instance_rpc_encr_key):
        raise AgentConfigError(
            '[agent] require_sealed needs instance_key_file or Trove\'s '
            '[DEFAULT] instance_rpc_encr_key: upgrade messages cannot be '
            'authenticated without a key')


def _labels_problem(labels):
    """Why the conductor would refuse ``labels`` (``db.agents``), or None."""
    longest = rpc_interface.MAX_LABEL_LENGTH
    if len(labels) > rpc_interface.MAX_LABELS:
        return '%d labels, at most %d are allowed' % (
            len(labels), rpc_interface.MAX_LABELS)
    for key, value in labels.items():
        if not (0 < len(key) <= longest and len(value) <= longest):
            return ('label %s: keys have 1 to %d characters, values at '
                    'most %d' % (package_exc.quoted(key), longest, longest))
        if '\x00' in key + value:
            return 'label %s holds a NUL' % package_exc.quoted(key)
    return None


def load_trove_guest(conf):
    """Trove's guest configuration applied to ``conf``, or None."""
    try:
        guest = trove_guest.load(conf.trove_guest.config_dir)
    except trove_guest.TroveGuestConfigError as e:
        raise AgentConfigError(str(e))
    trove_guest.apply(conf, guest)
    return guest


def trove_probe(conf, guest):
    """The RPC ping of the Trove guest agent, when it can be pinged."""
    if (guest is None or not conf.trove_guest.health_rpc_ping
            or not (guest.guest_id and guest.transport_url)):
        return None
    if conf.trove_guest.manage_rpc_ping:
        try:
            trove_guest.write_managed_config(guest.config_dir)
        except trove_guest.TroveGuestConfigError as e:
            raise AgentConfigError(str(e))
    return trove_guest.RpcPing.from_guest(guest,
                                          conf.trove_guest.ping_timeout)


def load_instance_keys(conf):
    """The instance's sealing keys, or None when it has none.

    The key file (``trove-upgrade-manage instance-key``) takes precedence
    over the key derived from the one Trove gave the instance.
    """
    if conf.agent.instance_key_file:
        try:
            return sealing.load_key_file(conf.agent.instance_key_file,
                                         conf.agent.instance_id)
        except package_exc.KeyFileError as e:
            raise AgentConfigError(str(e))
    if conf.instance_rpc_encr_key:
        try:
            return trove_keys.keyring(conf.agent.instance_id,
                                      conf.instance_rpc_encr_key)
        except trove_keys.TroveKeyError as e:
            raise AgentConfigError(str(e))
    return None


def build_verifier(conf):
    """The package verifier, or None when no keys are configured."""
    if not conf.agent.trusted_key_files:
        return None
    return verifier_mod.PackageVerifier.from_conf(conf)


class AgentService(service.Service):
    """One instance's upgrade agent."""

    def __init__(self, conf, host=None):
        super().__init__()
        self.trove_guest = load_trove_guest(conf)
        check_conf(conf)
        self.conf = conf
        self.host = host or socket.gethostname()
        agent = conf.agent
        self.instance_id = agent.instance_id
        self.journal = journal_mod.UpgradeJournal(agent.install_root)
        # An unreadable journal stops the agent here, before it acts.
        self.journal.read()
        self._owner_fd = self._own_install_root(agent.install_root)
        if adopt.interrupted(agent.install_root):
            os.close(self._owner_fd)
            raise AgentConfigError(
                'an adoption of install root %s was interrupted; run '
                'trove-upgrade-adopt to finish it' % agent.install_root)
        self.installs = install.InstallRoot(agent.install_root,
                                            self.journal.lock)
        self.supervisor = init_system.load(
            conf, self.installs, probe=trove_probe(conf, self.trove_guest))
        self.state_provider = guest_state.load(conf)
        verifier = build_verifier(conf)
        self.pipeline = self_upgrade.Pipelines(
            pipeline_mod.UpgradePipeline(
                conf, self.journal, self.installs, self.supervisor,
                verifier),
            self_upgrade.SelfUpgradePipeline(
                conf, self.journal, verifier,
                is_registered=lambda: self.registered)
            if conf.self_upgrade.enabled else None)
        self.keyring = load_instance_keys(conf)
        self.labels = nova_metadata.labels(conf)
        self.context = tu_context.get_admin_context()
        self.conductor_api = None
        self.manager = None
        self.outbox = None
        self.rpcserver = None
        self.registered = False
        self._stopping = threading.Event()

    @staticmethod
    def _own_install_root(root, wait=OWNER_WAIT):
        """Lock the install root for this agent for its whole life.

        A predecessor that is still shutting down (a restart by the
        service manager) gets ``wait`` seconds to let go.
        """
        fd = os.open(os.path.join(root, AGENT_LOCK),
                     os.O_RDWR | os.O_CREAT, 0o600)
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise AgentConfigError(
                        'another trove-upgrade-agent still runs on install '
                        'root %s after %ds' % (root, wait))
                time.sleep(0.2)
        os.ftruncate(fd, 0)
        os.write(fd, b'%d\n' % os.getpid())
        return fd

    def start(self):
        super().start()
        self.conductor_api = conductor_rpcapi.ConductorAPI(self.keyring)
        if self.supervisor.probe is not None:
            # A Trove guest agent: Trove's own view gates its upgrades.
            self.pipeline.guest.trove_health = trove_health.TroveHealthGate(
                self.conductor_api, self.context, self.instance_id)
        self.outbox = outbox_mod.Outbox(
            self.journal, self.conductor_api, self.context, self.instance_id,
            self.conf.agent.report_confirm_interval)
        self.manager = manager_mod.AgentManager(
            self.conf, self.journal, self.pipeline, self.state_provider,
            self.conductor_api, self.context, keyring=self.keyring)
        target = messaging.Target(
            topic=rpc_interface.agent_topic(self.instance_id),
            server=self.host)
        self.rpcserver = rpc.get_rpc_server(target, [self.manager],
                                            rpc_interface.AGENT)
        self.rpcserver.start()
        agent = self.conf.agent
        self.tg.add_thread(self._run)
        self.tg.add_timer_args(agent.report_interval, self._flush_outbox,
                               stop_on_exception=False)
        self.tg.add_timer_args(agent.heartbeat_interval, self.heartbeat,
                               stop_on_exception=False)
        LOG.info('Upgrade agent of instance %s listening on topic %s',
                 self.instance_id, target.topic)

    # The runner thread.

    def _run(self):
        """The runner; ends at the stop, or when the stop ended a step."""
        try:
            self.pipeline.recover()
        except untrusted.StepStopped:
            return
        except Exception:
            LOG.exception('Recovery of the interrupted upgrade failed')
        agent = self.conf.agent
        wait = min(agent.deferred_check_interval, agent.supervise_interval)
        while not self._stopping.is_set():
            try:
                self.manager.work_available.clear()
                if self.journal.read()['current_upgrade'] is not None:
                    # Nobody runs it: a full disk refused to record its
                    # end, or the recovery above. Taken up as after a
                    # kill -9, it ends once the disk has room again.
                    self.pipeline.recover()
                    self.outbox.flush()
                    # A hand-over of the agent itself lasts: looked at
                    # again after the wait.
                    if self.journal.read()['current_upgrade'] is None:
                        continue
                else:
                    if self.manager.run_next():
                        self.outbox.flush()
                        continue
                    self._supervise()
            except untrusted.StepStopped:
                return
            except OSError as e:
                # A full disk, each try while it lasts: one line, no
                # traceback.
                LOG.warning('Upgrade runner: %s; trying again in %gs',
                            e, wait)
            except Exception:
                LOG.exception('Upgrade runner error; continuing')
            self.manager.work_available.wait(wait)

    def _supervise(self):
        if self.supervisor.is_running():
            return
        if self.installs.current_version() is None:
            return
        LOG.warning('The guest agent is not running; starting it')
        self.pipeline.ensure_guest_running()

    # Conductor.

    def _flush_outbox(self):
        """The outbox's timer; a journal it cannot write costs one line.

        A full disk fails the journal's write after a report was sent;
        the report stays in the outbox, sent again once the disk has
        room, and the conductor ignores the repeat. The timer's own
        handler would log a traceback every ``report_interval``.
        """
        try:
            self.outbox.flush()
        except OSError as e:
            LOG.warning('The outbox could not record what it sent, the '
                        'journal cannot be written; the next try is in %s '
                        's: %s', self.conf.agent.report_interval, e)

    def _agent_info(self):
        return dict(
            instance_id=self.instance_id,
            agent_version=version.version_info.version_string(),
            guest_version=(self.supervisor.running_version()
                           or self.installs.current_version()),
            rpc_api_version=manager_mod.RPC_API_VERSION,
            state=guest_state.current_state(self.state_provider),
            labels=dict(self.labels),
            host=self.host)

    def heartbeat(self):
        """Register until the conductor answers, then heartbeat.

        A conductor that is down, unreachable or refusing costs one
        warning per interval, not the timer's traceback; the next interval
        tries again.
        """
        info = self._agent_info()
        what = 'heartbeat' if self.registered else 'registration'
        try:
            if not self.registered:
                self.conductor_api.register_agent(self.context, **info)
                self.registered = True
                LOG.info('Registered with the conductor')
            else:
                self.conductor_api.heartbeat(self.context, **info)
        except (messaging.MessagingException, messaging.MessageUndeliverable,
                exception.TroveUpgradeError) as e:
            # MessageUndeliverable says nothing of itself.
            reason = '%s: %s' % (type(e).__name__, str(e) or 'no conductor '
                                 'listens on its topic')
        else:
            return
        # Out of the except: oslo.log would repeat the exception.
        LOG.warning('The %s with the conductor failed; the next one is in '
                    '%s s: %s', what, self.conf.agent.heartbeat_interval,
                    package_exc.bounded(reason))

    def stop(self, graceful=True):
        self._stopping.set()
        self.pipeline.stop()
        if self.manager is not None:
            self.manager.work_available.set()
        if self.rpcserver is not None:
            self.rpcserver.stop()
            self.rpcserver.wait()
            self.rpcserver = None
        super().stop(graceful=graceful)
        rpc.cleanup()
        LOG.info('Upgrade agent of instance %s stopped; the guest agent '
                 'keeps running', self.instance_id)
