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

from oslo_config import cfg
from oslo_log import log as logging
import oslo_messaging as messaging
from oslo_messaging import transport as messaging_transport

from trove_upgrade.agent import journal as journal_mod

LOG = logging.getLogger(__name__)

MANAGED_FILE = 'trove-upgrade-managed.conf'
TOPIC_PREFIX = 'guestagent.'
PING_METHOD = 'oslo_rpc_server_ping'
PONG = 'pong'

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


class TroveGuestConfigError(Exception):
    """Trove's guest configuration exists but cannot be read."""


class TroveGuestConfig:
    """The values of Trove's guest configuration directory."""

    def __init__(self, config_dir, extra_opts=()):
        self.config_dir = config_dir
        self.files = sorted(glob.glob(os.path.join(config_dir, '*.conf')))
        self.conf = cfg.ConfigOpts()
        self.conf.register_opts(TROVE_OPTS)
        self.conf.register_opts(list(extra_opts))
        try:
            self.conf(args=['--config-dir', config_dir], project=None,
                      default_config_files=[], default_config_dirs=[],
                      use_env=False)
        except (cfg.Error, OSError) as e:
            raise TroveGuestConfigError(
                'cannot read Trove\'s guest configuration in %s: %s'
                % (config_dir, e))

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
    def topic(self):
        return TOPIC_PREFIX + self.guest_id if self.guest_id else None


def load(config_dir, extra_opts=()):
    """Trove's guest configuration, or None when the directory is absent."""
    if not config_dir or not os.path.isdir(config_dir):
        return None
    return TroveGuestConfig(config_dir, extra_opts)


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
            and guest.conf.instance_rpc_encr_key):
        conf.set_default('instance_rpc_encr_key',
                         guest.conf.instance_rpc_encr_key)
        used.append('instance_rpc_encr_key')
    if used:
        LOG.info('Using %s from Trove\'s guest configuration in %s',
                 ' and '.join(used), guest.config_dir)
    return used


def write_managed_config(config_dir):
    """Enable the RPC ping for the guest agent's next start; idempotent.

    Written to a temporary file, fsynced and renamed, so the guest agent
    never reads half a file. Returns True when the file changed.
    """
    path = os.path.join(config_dir, MANAGED_FILE)
    try:
        with open(path) as f:
            if f.read() == MANAGED_TEXT:
                return False
    except FileNotFoundError:
        pass
    tmp = path + '.tmp'
    with open(tmp, 'w') as f:
        f.write(MANAGED_TEXT)
        f.flush()
        os.fsync(f.fileno())
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    journal_mod.fsync_dir(config_dir)
    LOG.info('Wrote %s: rpc_ping_enabled = True', path)
    return True


class RpcPing:
    """Pings one Trove guest agent over its own topic and exchange."""

    def __init__(self, transport_url, exchange, guest_id, timeout):
        self.transport_url = transport_url
        self.target = messaging.Target(
            exchange=exchange, topic=TOPIC_PREFIX + guest_id,
            server=guest_id)
        self.timeout = timeout
        self._transport = None
        self._client = None

    @classmethod
    def from_guest(cls, guest, timeout):
        return cls(guest.transport_url, guest.control_exchange,
                   guest.guest_id, timeout)

    def _get_client(self):
        if self._client is None:
            # The process's own configuration: oslo.messaging registers
            # some of its options on the global one only. The exchange is
            # the target's, so the process's own exchange is not touched.
            self._transport = messaging.get_rpc_transport(
                cfg.CONF, url=self.transport_url)
            self._client = messaging.get_rpc_client(
                self._transport, self.target, timeout=self.timeout,
                retry=0)
        return self._client

    def ping(self):
        """None when the guest agent answered ``pong``, else why not."""
        try:
            answer = self._get_client().call({}, PING_METHOD)
        except messaging.MessagingTimeout:
            return ('the guest agent did not answer %s on topic %s within '
                    '%.1fs' % (PING_METHOD, self.target.topic,
                               self.timeout))
        except Exception as e:
            self.close()
            return ('pinging the guest agent on topic %s failed: %s: %s'
                    % (self.target.topic, type(e).__name__, e))
        if answer != PONG:
            return ('the guest agent answered %r to %s'
                    % (answer, PING_METHOD))
        return None

    __call__ = ping

    def close(self):
        if self._transport is not None:
            self._transport.cleanup()
        self._transport = self._client = None
