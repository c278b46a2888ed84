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

"""The agent's RPC endpoint and the queue of upgrades it accepted.

``upgrade()`` follows the Trove design's message handling: validate
(guest_automatic_updates, the strategy, the arguments), record the event,
process. Validation failures are recorded as FAILED with the reason.
Validation never waits on the network: a store that hangs would hold the
accept lock, and with it every other upgrade message, for as long as the
strategy's timeouts and retries last; whether the location is reachable is
the download step's first question, in its child process. An
accepted upgrade goes to the journal's queue and the call returns: the
single runner thread (:meth:`AgentManager.run_next`) takes it from there, so
an upgrade is never lost between the message and the work, and the RPC
server is never blocked by an upgrade.

The runner starts the head of the queue only when the guest is running;
while it is busy (backup, restore, resize, restart, error) the upgrade is
reported DEFERRED once and waits, across agent restarts too. Before the
work starts the runner claims the upgrade from the conductor, which says
no when the upgrade was cancelled meanwhile; a conductor that cannot be
reached leaves the upgrade queued for the next try.

An agent holding its instance's keys (``[agent] instance_key_file``)
first opens the message's seal (RPC API 1.1, ``trove_upgrade.common.sealing``):
an unsealed, forged, modified, stale or replayed message is logged and
dropped before anything else, and nothing is recorded or reported under
its upgrade id, since nobody can tell whether that id is genuine. The ids
of accepted messages stay in the journal for ``[agent] seal_max_age``
seconds, across restarts, to refuse replays.

From version 1.3 an upgrade names its ``component``: the guest agent
(the default) or the upgrade agent itself (``agent.self_upgrade``). Both
go through the one queue and the one runner, so that upgrades of the two
never overlap on an instance.

From version 1.2 an upgrade may name the package it expects
(``expected_manifest``: the SHA-256 of its manifest file, the package
name the manifest signs): the download step then refuses any other
manifest before it fetches a byte of the payload
(``packaging.verify.check_expected_manifest``).
"""

import threading

from oslo_log import log as logging
import oslo_messaging as messaging
from oslo_utils import uuidutils

from trove_upgrade.agent import guest_state
from trove_upgrade.agent import install
from trove_upgrade.agent import journal as journal_mod
from trove_upgrade.agent import self_upgrade
from trove_upgrade.agent import strategies
from trove_upgrade.agent.strategies import exception as strategy_exc
from trove_upgrade.common import exception
from trove_upgrade.common import exception as package_exc
from trove_upgrade.common import rpc_interface
from trove_upgrade.common import sealing
from trove_upgrade.common import states
from trove_upgrade.package_format import manifest as manifest_mod

LOG = logging.getLogger(__name__)

RPC_API_VERSION = '1.3'


def _is_upgrade_id(value):
    """A UUID, as the control plane's upgrade ids are.

    The id names the upgrade's work directory, its journal entries and
    its log lines: anything else (``/etc``, a newline) is refused where it
    arrives, before the journal keeps it.
    """
    return isinstance(value, str) and uuidutils.is_uuid_like(value)


def _is_version_name(value):
    try:
        install.check_version_name(value)
    except install.InstallError:
        return False
    return True


def _metadata_problem(metadata):
    """Why ``metadata`` is not what the API accepts, or None.

    The API sends a flat object of bounded strings, numbers, booleans and
    nulls; anything else (a nesting deeper than the journal's parser goes
    once made the journal unreadable, and the agent with it) is refused.
    """
    if not isinstance(metadata, dict):
        return 'the metadata must be an object'
    if len(metadata) > rpc_interface.MAX_METADATA_ITEMS:
        return ('the metadata has %d keys, at most %d are allowed'
                % (len(metadata), rpc_interface.MAX_METADATA_ITEMS))
    for key, value in metadata.items():
        if not (_is_upgrade_text(key, rpc_interface.MAX_METADATA_KEY_LENGTH)
                and (value is None or type(value) in (bool, int, float)
                     or _is_upgrade_text(
                         value, rpc_interface.MAX_METADATA_VALUE_LENGTH,
                         allow_empty=True))):
            return ('the metadata key %s must be a string of 1 to %d '
                    'characters, its value null, a boolean, a number or a '
                    'string of at most %d characters'
                    % (package_exc.quoted(key),
                       rpc_interface.MAX_METADATA_KEY_LENGTH,
                       rpc_interface.MAX_METADATA_VALUE_LENGTH))
    return None


def _expected_manifest_problem(expected):
    """Why ``expected`` is not an upgrade's ``expected_manifest``, or None.

    None (no expectation) or an object of a lower-case hex SHA-256 and a
    package name, either null; its values are checked as the manifest's
    own are (``packaging.manifest``).
    """
    if expected is None:
        return None
    if not isinstance(expected, dict) or set(expected) != set(
            rpc_interface.EXPECTED_MANIFEST_FIELDS):
        return ('expected_manifest must be null or an object of exactly %s'
                % ', '.join(rpc_interface.EXPECTED_MANIFEST_FIELDS))
    try:
        manifest_mod.check_expectation(expected['sha256'],
                                       expected['package'])
    except package_exc.PackageError as e:
        return 'expected_manifest: %s' % e
    return None


def _is_upgrade_text(value, limit, allow_empty=False):
    """A string of at most ``limit`` characters with a UTF-8 form."""
    return (isinstance(value, str) and len(value) <= limit
            and bool(value or allow_empty) and sealing.sealable_text(value))


class JournalReplayCache(sealing.ReplayCache):
    """Accepted message ids, in the journal so a restart keeps them."""

    def __init__(self, journal):
        self.journal = journal

    def add(self, message_id, expires_at, now):
        with self.journal.update() as data:
            seen = data['seen_messages']
            sealing.prune(seen, now)
            if message_id in seen:
                raise sealing.ReplayedMessageError(
                    'message %s was already accepted' % message_id)
            seen[message_id] = expires_at


class AgentManager:
    """Server side of ``trove_upgrade.services.agent_rpcapi.AgentAPI``."""

    RPC_API_VERSION = RPC_API_VERSION

    target = messaging.Target(version=RPC_API_VERSION)

    def __init__(self, conf, journal, pipeline, state_provider,
                 conductor_api, admin_context, load_strategy=None,
                 keyring=None):
        self.conf = conf
        self.keyring = keyring
        self.replay_cache = JournalReplayCache(journal)
        self.journal = journal
        self.pipeline = pipeline
        self.state_provider = state_provider
        self.conductor_api = conductor_api
        self.admin_context = admin_context
        self.load_strategy = load_strategy or (
            lambda name: strategies.load(name, conf=conf))
        self.work_available = threading.Event()
        self._accept_lock = threading.Lock()

    # RPC.

    @rpc_interface.AGENT.endpoint
    def upgrade(self, context, upgrade_id, instance_id, instance_version,
                strategy, location, metadata=None, allow_downgrade=False,
                expected_manifest=None, component=None, sealed=None):
        """Validate and queue an upgrade; the runner carries it out."""
        if not _is_upgrade_id(upgrade_id):
            # Nothing can be recorded or reported under it: the journal's
            # keys and the conductor's lookups take strings only.
            LOG.warning('Refused upgrade message: %s',
                        exception.InvalidUpgradeIdError(
                            upgrade_id=package_exc.quoted(upgrade_id)))
            return
        if self.keyring is not None:
            try:
                # The arguments of the version sealed, no others.
                args = rpc_interface.AGENT.received(
                    'upgrade', locals(),
                    rpc_interface.sealed_version(sealed))
                sealing.open_sealed(self.keyring, sealed, 'upgrade',
                                    sealing.TO_AGENT, args,
                                    self.conf.agent.seal_max_age,
                                    self.replay_cache)
            except (sealing.SealError, journal_mod.JournalError,
                    exception.MalformedMessageError) as e:
                # Unsealed, the instance id is anyone's, of any size.
                LOG.warning('Refused upgrade message (upgrade id %s, '
                            'instance %s): %s: %s', upgrade_id,
                            package_exc.quoted(instance_id),
                            type(e).__name__, package_exc.bounded(e))
                return
        upgrade = {'id': upgrade_id, 'instance_version': instance_version,
                   'strategy': strategy, 'location': location,
                   'metadata': metadata if metadata is not None else {},
                   'allow_downgrade': allow_downgrade,
                   'expected_manifest': expected_manifest,
                   'component': component or rpc_interface.GUEST_AGENT,
                   'deferred_reported': False}
        with self._accept_lock:
            if self.journal.is_known(upgrade_id):
                LOG.info('Upgrade %s was already received; ignoring this '
                         'copy', upgrade_id)
                return
            reason = self._invalid(instance_id, upgrade)
            if reason:
                reason = package_exc.bounded(reason)
            with self.journal.update() as data:
                if reason:
                    data['processed'][upgrade_id] = states.FAILED
                    # Only a version the conductor accepts in a report:
                    # one it refuses would hold the outbox for ever.
                    self.journal.add_report(
                        data, upgrade_id, states.FAILED, reason,
                        self.pipeline.installs.current_version(),
                        instance_version if _is_version_name(
                            instance_version) else None)
                else:
                    data['queue'].append(upgrade)
        if reason:
            LOG.warning('Upgrade %s refused: %s', upgrade_id, reason)
        else:
            LOG.info('Upgrade %s to %s queued', upgrade_id, instance_version)
        self.work_available.set()

    def _invalid(self, instance_id, upgrade):
        """Why the upgrade cannot be carried out, or None."""
        if not self.conf.agent.guest_automatic_updates:
            return ('guest_automatic_updates is disabled on this guest: '
                    'the agent does not install upgrades')
        if instance_id != self.conf.agent.instance_id:
            return ('the upgrade is for instance %s, this agent serves %s'
                    % (instance_id, self.conf.agent.instance_id))
        try:
            install.check_version_name(upgrade['instance_version'])
        except install.InstallError as e:
            return str(e)
        if not isinstance(upgrade['location'], str):
            return 'the location must be a string'
        problem = _metadata_problem(upgrade['metadata'])
        if problem:
            return problem
        # bool() of the string "false" is True: a downgrade is allowed
        # only by a boolean that says so.
        if not isinstance(upgrade['allow_downgrade'], bool):
            return 'allow_downgrade must be a boolean, not %s' % (
                package_exc.quoted(upgrade['allow_downgrade']))
        problem = _expected_manifest_problem(upgrade['expected_manifest'])
        if problem:
            return problem
        problem = self_upgrade.component_problem(self.conf,
                                                 upgrade['component'])
        if problem:
            return problem
        try:
            # Loaded, not asked: the location's check talks to its server,
            # which the download step does (untrusted.InProcessSteps).
            self.load_strategy(upgrade['strategy'])
        except Exception as e:
            # A plugin's bug refuses this upgrade, never the RPC server.
            if not isinstance(e, strategy_exc.StrategyError):
                LOG.exception('Strategy %s failed to load',
                              package_exc.quoted(upgrade['strategy']))
            return 'strategy %s: %s' % (
                package_exc.quoted(upgrade['strategy']), e)
        return None

    # The runner.

    def run_next(self):
        """Start the head of the queue when possible; True when it ran."""
        data = self.journal.read()
        if data['current_upgrade'] is not None or not data['queue']:
            return False
        upgrade = data['queue'][0]
        state = guest_state.current_state(self.state_provider)
        if not guest_state.is_upgradeable(state):
            self._defer(upgrade, state)
            return False
        from_version = self_upgrade.running_version(
            upgrade, self.pipeline.installs)
        try:
            claim = self.conductor_api.start_upgrade(
                self.admin_context, self.conf.agent.instance_id,
                upgrade['id'], from_version)
        except Exception as e:
            LOG.warning('Cannot claim upgrade %s from the conductor, will '
                        'retry: %s', upgrade['id'], e)
            return False
        if not claim.get('proceed'):
            LOG.info('Upgrade %s skipped: %s (status %s)', upgrade['id'],
                     claim.get('reason'), claim.get('status'))
            with self.journal.update() as data:
                self._dequeue(data, upgrade['id'])
                data['processed'][upgrade['id']] = (
                    claim.get('status') or states.CANCELLED)
            return False
        with self.journal.update() as data:
            self._dequeue(data, upgrade['id'])
            entry = dict(upgrade)
            entry.pop('deferred_reported', None)
            entry.update(step='accepted', attempts=1, detail='',
                         from_version=from_version,
                         to_version=upgrade['instance_version'])
            data['current_upgrade'] = entry
        self.pipeline.run(entry)
        return True

    def _dequeue(self, data, upgrade_id):
        data['queue'] = [u for u in data['queue'] if u['id'] != upgrade_id]

    def _defer(self, upgrade, state):
        if upgrade.get('deferred_reported'):
            return
        LOG.info('Upgrade %s deferred: the guest is %s', upgrade['id'],
                 state)
        with self.journal.update() as data:
            for queued in data['queue']:
                if queued['id'] == upgrade['id']:
                    queued['deferred_reported'] = True
            self.journal.add_report(
                data, upgrade['id'], states.DEFERRED,
                'the guest is %s; the upgrade starts when it is running'
                % state, self_upgrade.running_version(
                    upgrade, self.pipeline.installs),
                upgrade['instance_version'])
