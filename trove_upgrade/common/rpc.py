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

"""The one place that builds oslo.messaging objects.

Every RPC client, RPC server and notifier of trove-upgrade comes from here,
so they all share one transport per process, carry the request context
(and with it the request id) in every message, and talk on the
``trove_upgrade`` control exchange unless the configuration says otherwise.
The transports are built on first use, after the service has parsed its
configuration and, for a forking launcher, in the process that uses them.
"""

import contextlib
import importlib
import inspect
import re
import socket

from oslo_log import log as logging
import oslo_messaging as messaging
from oslo_messaging.rpc import dispatcher
from oslo_messaging.rpc import server as rpc_server

from trove_upgrade.common import context as tu_context
from trove_upgrade.common import exception
from trove_upgrade.common import exception as package_exc
from trove_upgrade import conf
from trove_upgrade import hosted_conf

CONF = conf.CONF
LOG = logging.getLogger(__name__)

# A caller gets these exceptions back as themselves, not as RemoteError.
ALLOWED_EXMODS = [exception.__name__]


def without_remote_traceback(error):
    """oslo.messaging's copy of a remote ``error``, without the traceback.

    The copy of an exception of ``ALLOWED_EXMODS`` is of a class made for
    it, whose message goes on with the server's traceback; a caller that
    logs it logs the traceback. The result is of the class the server
    raised, with the server's message and arguments.
    """
    cls = type(error)
    if not cls.__name__.endswith('_Remote'):
        return error
    return cls.__bases__[0](error.message, **error.kwargs)


_TRANSPORT = None
_NOTIFICATION_TRANSPORT = None
_NOTIFIER = None


DEFAULT_EXCHANGE = 'trove_upgrade'


def set_defaults(control_exchange=DEFAULT_EXCHANGE):
    """Make ``control_exchange`` the exchange when none is configured.

    oslo.messaging's own helper changes the default for every ConfigOpts
    of the process; inside trove-api (hosted) that would move Trove's own
    casts to our exchange, so there only our ConfigOpts gets the default.
    """
    if hosted_conf.is_private():
        messaging.TransportURL.parse(CONF)  # registers the transport options
        _register_global_only_opts(CONF)
        CONF.set_default('control_exchange', control_exchange)
    else:
        messaging.set_transport_defaults(control_exchange)


# oslo.messaging modules that register their options on the global CONF
# only, as they load, yet read them from the transport's ConfigOpts.
_GLOBAL_ONLY_OPTS = (
    ('oslo_messaging._metrics.client', 'oslo_messaging_metrics'),
    ('oslo_messaging._tracing.client', 'oslo_messaging_tracing'),
)


def _register_global_only_opts(conf):
    """Without them, a private ConfigOpts fails every send (NoSuchOptError)."""
    for module_name, group in _GLOBAL_ONLY_OPTS:
        try:
            module = importlib.import_module(module_name)
        except ImportError:  # a release without it reads nothing of it
            continue
        conf.register_opts(getattr(module, group), group=group)


# Importing this module is what every RPC user does first, so no entry point
# can forget the exchange and talk where nobody listens.
set_defaults()


class SerializedContext(dict):
    """A request context as :class:`RequestContextSerializer` sends it.

    Given to a send in place of the context, it is sent as it is: a caller
    that sends many messages with one context (``AgentAPI.upgrade_many``)
    serializes it once instead of once per message.
    """


def serialized_context(context):
    """``context`` as every message sends it, for many sends of it."""
    return SerializedContext(
        RequestContextSerializer().serialize_context(context))


class RequestContextSerializer(messaging.Serializer):
    """Send the request context with each message, rebuild it on arrival.

    Entities go through ``base`` (oslo.messaging's no-op serializer unless
    given another), the context through ``RequestContext.to_dict`` and
    ``from_dict``, so the receiver logs the sender's request id. The
    caller's token stays behind: the agents run inside tenants' instances
    and nothing on the other side of RPC calls another service with it.
    """

    def __init__(self, base=None):
        self._base = base or messaging.NoOpSerializer()

    def serialize_entity(self, context, entity):
        return self._base.serialize_entity(context, entity)

    def deserialize_entity(self, context, entity):
        return self._base.deserialize_entity(context, entity)

    def serialize_context(self, context):
        if isinstance(context, SerializedContext):
            return context
        values = context.to_dict()
        values.pop('auth_token', None)
        return values

    def deserialize_context(self, context):
        return tu_context.RequestContext.from_dict(context)


@contextlib.contextmanager
def _url_named(options):
    """urllib's ValueError for a transport URL, as InvalidInputError.

    oslo.messaging lets it through (``Invalid IPv6 URL`` for an unclosed
    ``[``, a port that is no number): the services ended in a traceback.
    The URL is not quoted: it holds the broker's password.
    """
    try:
        yield
    except (ValueError, messaging.InvalidTransportURL) as e:
        raise exception.InvalidInputError(
            reason='%s is not a transport URL: %s'
            % (options, e)) from None


def check_transport_url():
    """Raise InvalidInputError when ``[DEFAULT] transport_url`` is bad.

    For a service's start: its transport is built in the process its
    launcher forks, which died of it and was forked again, for ever.
    """
    with _url_named('[DEFAULT] transport_url'):
        messaging.TransportURL.parse(CONF)


def get_transport():
    """The process-wide RPC transport, built from the configuration."""
    global _TRANSPORT
    if _TRANSPORT is None:
        with _url_named('[DEFAULT] transport_url'):
            _TRANSPORT = messaging.get_rpc_transport(
                CONF, allowed_remote_exmods=ALLOWED_EXMODS)
    return _TRANSPORT


# A mandatory message that no queue takes (its listeners' queue not
# declared again yet after a broker restart) is returned by RabbitMQ and
# the send raises MessageUndeliverable at once. Otherwise RabbitMQ drops
# it, and a call waits out rpc_response_timeout (60 s) for an answer that
# cannot come.
_MANDATORY = messaging.TransportOptions(at_least_once=True)


def get_rpc_client(target, version_cap=None, mandatory=False):
    """An RPC client for ``target`` that never sends above ``version_cap``.

    Its sends give up after ``[DEFAULT] rpc_send_retries`` attempts to
    reach the messaging server, so that a caller learns of an outage; with
    ``mandatory`` they raise ``MessageUndeliverable`` when no queue takes
    the message.
    """
    return messaging.get_rpc_client(
        get_transport(), target, version_cap=version_cap,
        serializer=RequestContextSerializer(), retry=CONF.rpc_send_retries,
        transport_options=_MANDATORY if mandatory else None)


_VERSION = re.compile(r'[0-9]{1,9}\.[0-9]{1,9}\Z')


class RefusingDispatcher(dispatcher.RPCDispatcher):
    """oslo.messaging's dispatcher; a malformed message costs one line.

    A message naming no method of ``interface`` (an ``rpc_interface``
    Interface), a version not served or not of the form x.y, or arguments
    its endpoint does not take (or that its version does not have), was
    logged by oslo.messaging with a traceback or broke inside it: anyone
    on the bus could fill the log.
    Such a message is refused with one warning; a caller that waits gets
    ``MalformedMessageError`` (``NoSuchMethod``, ``UnsupportedVersion`` as
    before).
    """

    def __init__(self, interface, endpoints, serializer, access_policy):
        super().__init__(endpoints, serializer, access_policy)
        self._interface = interface
        self._signatures = {name: inspect.signature(func)
                            for name, func in interface.served.items()}

    def dispatch(self, incoming):
        try:
            self._check(incoming.message)
            return super().dispatch(incoming)
        except (exception.MalformedMessageError, dispatcher.NoSuchMethod,
                dispatcher.UnsupportedVersion) as e:
            # Logged once out of the except: oslo.log would repeat e.
            refused, reason = dispatcher.ExpectedException(), str(e)
        LOG.warning('Refused RPC message: %s', package_exc.bounded(reason))
        raise refused

    def _check(self, message):
        method = message.get('method')

        def refuse(reason):
            raise exception.MalformedMessageError(
                method=package_exc.quoted(method), reason=reason)
        if not isinstance(method, str):
            refuse('the method is not a string')
        if method not in self._signatures:
            raise dispatcher.NoSuchMethod(package_exc.quoted(method))
        version = message.get('version', '1.0')
        if not isinstance(version, str) or not _VERSION.match(version):
            refuse('the version %s is not of the form x.y'
                   % package_exc.quoted(version))
        args = message.get('args', {})
        if not isinstance(args, dict) or not all(
                isinstance(name, str) for name in args):
            refuse('the arguments are not an object')
        try:
            # self and context, then the message's arguments.
            self._signatures[method].bind(None, None, **args)
        except TypeError as e:
            refuse('%s (it has %s)' % (
                e, package_exc.quoted(', '.join(sorted(args)))))
        self._interface.check_version_arguments(method, version, args)


def get_rpc_server(target, endpoints, interface):
    """An RPC server dispatching ``target``'s messages to ``endpoints``.

    They serve ``interface``'s methods (``rpc_interface``); messages of
    any other method or shape are refused (``RefusingDispatcher``).
    oslo.messaging picks its threading executor because nothing in this
    project monkey-patches; the executor argument itself is deprecated.
    """
    return rpc_server.RPCServer(
        get_transport(), target,
        RefusingDispatcher(interface, endpoints, RequestContextSerializer(),
                           dispatcher.DefaultRPCAccessPolicy),
        None)


def init_notifier():
    """Build the process's notifier now, at the service's start.

    Building it loads its driver, and stevedore then reads the entry
    points of every installed package: about half a second of CPU, which
    the first upgrade recorded would otherwise wait for (a conductor's
    first claim, the API's first POST). It also registers the
    ``[oslo_messaging_notifications]`` options, so that a bad value of
    theirs stops the service at start and they are logged with the rest.
    """
    global _NOTIFICATION_TRANSPORT, _NOTIFIER
    if _NOTIFIER is None:
        with _url_named('[oslo_messaging_notifications] transport_url (or '
                        '[DEFAULT] transport_url)'):
            _NOTIFICATION_TRANSPORT = messaging.get_notification_transport(
                CONF)
        _NOTIFIER = messaging.Notifier(
            _NOTIFICATION_TRANSPORT,
            serializer=RequestContextSerializer(
                messaging.JsonPayloadSerializer()))
    return _NOTIFIER


def get_notifier(publisher_id=None):
    """A notifier using ``[oslo_messaging_notifications]``'s driver."""
    return init_notifier().prepare(
        publisher_id=publisher_id or default_publisher_id())


def notifications_enabled():
    """Whether ``[oslo_messaging_notifications] driver`` sends anywhere.

    No driver (the default) and ``noop`` both send nowhere, but the
    notifier's own ``is_enabled`` is true with no driver; building every
    payload for nothing cost the rollout reconciler 4% of its CPU.
    """
    init_notifier()  # which registers the option
    return bool(set(CONF.oslo_messaging_notifications.driver) - {'noop'})


def default_publisher_id():
    """``trove-upgrade.<host>``: which service host sent a notification."""
    return 'trove-upgrade.%s' % socket.gethostname()


def scoped_topic(name):
    """The topic ``name`` of this deployment: its queue's name too.

    RabbitMQ names a topic's queue after the topic alone, whatever the
    exchange, so two deployments on one vhost that differ only by
    ``control_exchange`` would share their queues and consume each
    other's messages. On any exchange but the default the topic is
    prefixed with the exchange; on the default it stays as it always was,
    so that a deployment upgraded in place keeps its queues.
    """
    get_transport()  # registers control_exchange
    exchange = CONF.control_exchange
    if exchange == DEFAULT_EXCHANGE:
        return name
    return '%s.%s' % (exchange, name)


def cleanup():
    """Close the transports; the next use builds them again."""
    global _TRANSPORT, _NOTIFICATION_TRANSPORT, _NOTIFIER
    for transport in (_TRANSPORT, _NOTIFICATION_TRANSPORT):
        if transport is not None:
            transport.cleanup()
    _TRANSPORT = _NOTIFICATION_TRANSPORT = _NOTIFIER = None
