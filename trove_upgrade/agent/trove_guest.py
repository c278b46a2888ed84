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

"""Trove's own guest configuration, and the RPC ping of its guest agent.

Trove writes ``guest_info.conf`` (``guest_id``, ``datastore_manager``) and
``trove-guestagent.conf`` (``transport_url``, ``control_exchange``,
``instance_rpc_encr_key``, ...) into ``/etc/trove/conf.d`` when it boots an
instance; ``trove-guestagent --config-dir=/etc/trove/conf.d`` reads them.
This module reads the same files, with the same option names, into a
ConfigOpts of its own: Trove's ``control_exchange`` (``trove``) must not
become this agent's, which talks to trove-upgrade's conductor.

Precedence: a value set in trove-upgrade's configuration wins; Trove's
fills what is unset (``[agent] instance_id`` from ``guest_id``,
``[DEFAULT] transport_url`` and ``instance_rpc_encr_key`` from the same
names).

Healthy, for a Trove guest agent, means it answers oslo.messaging's
``oslo_rpc_server_ping`` on topic ``guestagent.<guest_id>``, server
``<guest_id>``, on Trove's exchange. It needs ``rpc_ping_enabled`` in the
guest agent's configuration: :func:`write_managed_config` puts it in a file
of its own in the directory, so Trove's files stay as Trove wrote them.
The ping goes through this agent's own oslo.messaging; Trove is never
imported.
"""

import glob
import os
import re
import tempfile

from oslo_config import cfg
from oslo_log import log as logging
import oslo_messaging as messaging
from oslo_messaging import transport as messaging_transport

from trove_upgrade.agent import guest_files
from trove_upgrade.agent import reasons
from trove_upgrade.agent import supervisor as supervisor_mod
from trove_upgrade.agent import trove_secure_rpc
from trove_upgrade.common import exception
from trove_upgrade.common import exception as package_exc

LOG = logging.getLogger(__name__)

MANAGED_FILE = 'trove-upgrade-managed.conf'
TOPIC_PREFIX = 'guestagent.'
PING_METHOD = 'oslo_rpc_server_ping'
PONG = 'pong'
# Trove writes two files of a few lines; these bound what else is there.
MAX_CONFIG_FILES = 64
MAX_VALUE_LENGTH = 4096
# Trove's guest_id is the instance's UUID; it becomes an instance id and a
# topic name, so no separator, space or control character gets through.
_GUEST_ID_RE = re.compile(r'[A-Za-z0-9][A-Za-z0-9._-]{0,254}')

# Trove's names and defaults (trove/common/cfg.py, oslo.messaging).
TROVE_OPTS = [
    cfg.StrOpt('guest_id'),
    cfg.StrOpt('transport_url', secret=True),
    cfg.StrOpt('control_exchange', default='trove'),
    cfg.BoolOpt('rpc_ping_enabled', default=False),
    cfg.StrOpt('datastore_manager'),
    cfg.StrOpt('instance_rpc_encr_key', secret=True),
]

MANAGED_TEXT = """\
# Written by trove-upgrade-agent ([trove_guest] manage_rpc_ping): lets the
# upgrade agent check that this guest agent serves its RPC topic.
[DEFAULT]
rpc_ping_enabled = True
"""


class TroveGuestConfigError(exception.TroveUpgradeError):
    """Trove's guest configuration exists but cannot be read."""

    def __init__(self, message):
        super().__init__(guest_files.bounded(message))


class TroveGuestConfig:
    """The values of Trove's guest configuration directory.

    The files belong to the instance's owner. Each is read once, bounded
    (:func:`guest_files.read_text`), into a private copy that oslo.config
    parses, so a file swapped or grown meanwhile is never read whole; every
    value, ``$name`` substitutions included, is resolved and checked here,
    so that a malformed one is refused at load, not when first used.
    """

    def __init__(self, config_dir):
        self.config_dir = config_dir
        self.files = sorted(glob.glob(os.path.join(config_dir, '*.conf')))
        if len(self.files) > MAX_CONFIG_FILES:
            raise TroveGuestConfigError(
                '%s holds %d .conf files, at most %d are read'
                % (config_dir, len(self.files), MAX_CONFIG_FILES))
        try:
            texts = [(os.path.basename(path), guest_files.read_text(path))
                     for path in self.files]
        except guest_files.UnreadableFileError as e:
            raise TroveGuestConfigError(
                'cannot read Trove\'s guest configuration: %s' % e)
        self.conf = cfg.ConfigOpts()
        self.conf.register_opts(TROVE_OPTS)
        with tempfile.TemporaryDirectory(prefix='trove-guest-') as copy:
            try:
                for name, text in texts:
                    with open(os.path.join(copy, name), 'w',
                              encoding='utf-8') as f:
                        f.write(text)
                self.conf(args=['--config-dir', copy], project=None,
                          default_config_files=[], default_config_dirs=[],
                          use_env=False)
            except (cfg.Error, OSError) as e:
                raise TroveGuestConfigError(
                    'cannot read Trove\'s guest configuration in %s: %s'
                    % (config_dir, str(e).replace(copy, config_dir)))
            values = {opt.name: self._resolve(opt.name, copy)
                      for opt in TROVE_OPTS}
        _check_values(config_dir, values)

    def _resolve(self, name, copy):
        """The value of ``name``, its ``$`` substitutions done."""
        try:
            return self.conf[name]
        except cfg.NoSuchOptError:
            reason = ('a $name in it is no option or a loop of them (write '
                      '$$ for a dollar sign)')
        except cfg.Error as e:
            reason = str(e).replace(copy, self.config_dir)
        raise TroveGuestConfigError('%s in %s: %s'
                                    % (name, self.config_dir, reason))

    @property
    def guest_id(self):
        return self.conf.guest_id

    @property
    def transport_url(self):
        return self.conf.transport_url

    @property
    def control_exchange(self):
        return self.conf.control_exchange

    @property
    def instance_rpc_encr_key(self):
        return self.conf.instance_rpc_encr_key

    @property
    def topic(self):
        return TOPIC_PREFIX + self.guest_id if self.guest_id else None


def _check_values(config_dir, values):
    """Refuse what would become an instance id, a topic or a URL badly."""
    for name, value in values.items():
        if not isinstance(value, str):
            continue
        if len(value) > MAX_VALUE_LENGTH or not value.isprintable():
            raise TroveGuestConfigError(
                '%s in %s: %s is not one printable line of at most %d '
                'characters' % (name, config_dir, package_exc.quoted(value),
                                MAX_VALUE_LENGTH))
    guest_id = values['guest_id']
    if guest_id is not None and not _GUEST_ID_RE.fullmatch(guest_id):
        raise TroveGuestConfigError(
            'guest_id in %s: %s cannot name an instance: use letters, '
            'digits and "._-", at most 255 characters'
            % (config_dir, package_exc.quoted(guest_id)))


def load(config_dir):
    """Trove's guest configuration, or None when the directory is absent."""
    if not config_dir or not os.path.isdir(config_dir):
        return None
    return TroveGuestConfig(config_dir)


def apply(conf, guest):
    """Fill this agent's unset options from Trove's; return what was used."""
    used = []
    if guest is None:
        return used
    if not conf.agent.instance_id and guest.guest_id:
        conf.set_default('instance_id', guest.guest_id, group='agent')
        used.append('guest_id')
    # The same option objects oslo.messaging registers when it builds a
    # transport: registering them first is a no-op for it.
    opts = messaging_transport._transport_opts
    conf.register_opts(opts)
    # oslo.messaging's default ("rabbit://", localhost) means "not set".
    default = [o.default for o in opts if o.name == 'transport_url'][0]
    if conf.transport_url in (None, default) and guest.transport_url:
        conf.set_default('transport_url', guest.transport_url)
        used.append('transport_url')
    # Registered by conf/trove.py; the sealing key is derived from it.
    if ('instance_rpc_encr_key' in conf and not conf.instance_rpc_encr_key
            and guest.instance_rpc_encr_key):
        conf.set_default('instance_rpc_encr_key',
                         guest.instance_rpc_encr_key)
        used.append('instance_rpc_encr_key')
    if used:
        LOG.info('Using %s from Trove\'s guest configuration in %s',
                 ' and '.join(used), guest.config_dir)
    return used


def write_managed_config(config_dir):
    """Enable the RPC ping for the guest agent's next start; idempotent.

    Written to a temporary file, fsynced and renamed, so the guest agent
    never reads half a file. Whatever was in the file's place (a larger
    file, a FIFO) is replaced, never read whole. Returns True when the file
    changed; raises TroveGuestConfigError when it cannot be written.
    """
    path = os.path.join(config_dir, MANAGED_FILE)
    try:
        if guest_files.read_text(path, len(MANAGED_TEXT)) == MANAGED_TEXT:
            return False
    except guest_files.UnreadableFileError:
        pass
    try:
        guest_files.write_text(path, MANAGED_TEXT)
    except OSError as e:
        raise TroveGuestConfigError('cannot write %s: %s' % (path, e))
    LOG.info('Wrote %s: rpc_ping_enabled = True', path)
    return True


class RpcPing:
    """Pings one Trove guest agent over its own topic and exchange.

    With the instance's key (``instance_rpc_encr_key``), the ping is sent
    in Trove's secure RPC format (:mod:`trove_secure_rpc`), as Trove's
    control plane sends its calls; without one, plain.
    """

    def __init__(self, transport_url, exchange, guest_id, timeout,
                 key=None):
        self.transport_url = transport_url
        self.target = messaging.Target(
            exchange=exchange, topic=TOPIC_PREFIX + guest_id,
            server=guest_id)
        self.timeout = timeout
        self.key = key
        self._transport = None
        self._client = None

    @classmethod
    def from_guest(cls, guest, timeout):
        return cls(guest.transport_url, guest.control_exchange,
                   guest.guest_id, timeout, key=guest.instance_rpc_encr_key)

    def _get_client(self):
        if self._client is None:
            # The process's own configuration: oslo.messaging registers
            # some of its options on the global one only. The exchange is
            # the target's, so the process's own exchange is not touched.
            self._transport = messaging.get_rpc_transport(
                cfg.CONF, url=self.transport_url)
            self._client = messaging.get_rpc_client(
                self._transport, self.target, timeout=self.timeout,
                retry=0, serializer=trove_secure_rpc.SecureSerializer(
                    self.key))
        return self._client

    def ping(self):
        """None when the guest agent answered ``pong``, else why not.

        An answer other than ``pong`` (a refusal, a reply this key cannot
        read) is a ``supervisor.Refused`` reason: the guest agent runs and
        answers, and asking again gets the same answer.
        """
        try:
            answer = self._get_client().call(
                trove_secure_rpc.trove_context(), PING_METHOD)
        except messaging.MessagingTimeout:
            return ('the guest agent did not answer %s on topic %s within '
                    '%.1fs' % (PING_METHOD, self.target.topic,
                               self.timeout))
        except trove_secure_rpc.UnreadableMessageError as e:
            return supervisor_mod.Refused(
                'the guest agent on topic %s answered %s, but the instance '
                'key (instance_rpc_encr_key) cannot read the reply (%s): the '
                'guest agent runs with another key or none'
                % (self.target.topic, PING_METHOD, e))
        except Exception as e:
            if not _is_remote(e):
                self.close()
                return ('pinging the guest agent on topic %s failed: %s'
                        % (self.target.topic, reasons.of_error(e)))
            return self._refused(e)
        if answer != PONG:
            return supervisor_mod.Refused(
                'the guest agent answered %s to %s'
                % (package_exc.quoted(answer), PING_METHOD))
        return None

    __call__ = ping

    def _refused(self, error):
        note = ''
        if self.key is None:
            note = (' (sent without Trove\'s secure RPC: its configuration '
                    'has no instance_rpc_encr_key)')
        return supervisor_mod.Refused(
            'the guest agent on topic %s refused %s%s: %s'
            % (self.target.topic, PING_METHOD, note, reasons.of_error(error)))

    def close(self):
        if self._transport is not None:
            self._transport.cleanup()
        self._transport = self._client = None


def _is_remote(error):
    """Whether ``error`` is the guest agent's, given back by oslo.messaging.

    An exception of a module the transport does not allow is a
    RemoteError; a built-in one is rebuilt, as a class of its own
    (``..._Remote``) or, where Python refuses that, as itself with the
    remote traceback after its message.
    """
    if isinstance(error, messaging.RemoteError):
        return True
    if type(error).__module__.endswith('_Remote'):
        return True
    args = getattr(error, 'args', ())
    return bool(args) and isinstance(args[0], str) and (
        '\nTraceback (most recent call last):' in args[0])
