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

"""The oslo.messaging plumbing: transport, serializer, servers, notifier."""

from unittest import mock

import fixtures
import oslo_messaging as messaging

from trove_upgrade.common import context
from trove_upgrade.common import exception
from trove_upgrade.common import rpc
from trove_upgrade.common import rpc_interface
from trove_upgrade.services import notifications
from trove_upgrade.tests import base
from trove_upgrade.tests.fixtures import rpc as rpc_fixture

ECHO = rpc_interface.Interface('echo', {'echo': ('call', ('value',))})


class EchoEndpoint:
    target = messaging.Target(version='1.0')

    @ECHO.endpoint
    def echo(self, context, value):
        return {'value': value, 'request_id': context.request_id,
                'context_class': type(context).__name__}


class TestRPC(base.TestCase):

    def setUp(self):
        super().setUp()
        self.transport = self.useFixture(rpc_fixture.FakeTransport())

    def test_control_exchange_defaults_to_trove_upgrade(self):
        rpc.get_transport()
        self.assertEqual('trove_upgrade', self.conf.control_exchange)

    def test_transport_is_shared_until_cleanup(self):
        first = rpc.get_transport()
        self.assertIs(first, rpc.get_transport())
        rpc.cleanup()
        self.assertIsNot(first, rpc.get_transport())

    def test_server_uses_the_threading_executor(self):
        server = rpc.get_rpc_server(
            messaging.Target(topic='t', server='h'), [EchoEndpoint()], ECHO)
        self.assertEqual('threading', server.executor_type)

    def test_call_carries_the_request_context(self):
        self.useFixture(rpc_fixture.RecordingServer(
            messaging.Target(topic='echo', server='h'), [EchoEndpoint()]))
        ctxt = context.RequestContext(user_id='u', project_id='p',
                                      auth_token='secret-token')
        client = rpc.get_rpc_client(messaging.Target(topic='echo'))
        self.assertEqual(
            {'value': 42, 'request_id': ctxt.request_id,
             'context_class': 'RequestContext'},
            client.call(ctxt, 'echo', value=42))

    def test_token_never_crosses_rpc(self):
        server = self.useFixture(rpc_fixture.RecordingServer(
            messaging.Target(topic='echo', server='h'), [EchoEndpoint()]))
        ctxt = context.RequestContext(user_id='u', project_id='p',
                                      auth_token='secret-token')
        client = rpc.get_rpc_client(messaging.Target(topic='echo'))
        client.cast(ctxt, 'echo', value=1)
        sent = server.wait_for(1)[0].context
        self.assertNotIn('auth_token', sent)
        self.assertNotIn('secret-token', repr(sent))
        self.assertEqual(('u', 'p', ctxt.request_id),
                         (sent['user'], sent['project_id'],
                          sent['request_id']))

    def test_serializer_round_trip(self):
        serializer = rpc.RequestContextSerializer()
        ctxt = context.RequestContext(user_id='u', project_id='p',
                                      is_admin=True, auth_token='t')
        back = serializer.deserialize_context(
            serializer.serialize_context(ctxt))
        self.assertIsInstance(back, context.RequestContext)
        self.assertEqual((ctxt.request_id, 'u', 'p', True, None),
                         (back.request_id, back.user_id, back.project_id,
                          back.is_admin, back.auth_token))
        self.assertEqual({'a': [1]},
                         serializer.deserialize_entity(
                             ctxt, serializer.serialize_entity(
                                 ctxt, {'a': [1]})))

    def test_a_serialized_context_is_sent_as_it_would_be(self):
        server = self.useFixture(rpc_fixture.RecordingServer(
            messaging.Target(topic='echo', server='h'), [EchoEndpoint()]))
        ctxt = context.RequestContext(user_id='u', project_id='p',
                                      auth_token='secret-token')
        serialized = rpc.serialized_context(ctxt)
        self.assertEqual(
            rpc.RequestContextSerializer().serialize_context(ctxt),
            serialized)
        self.assertIs(
            serialized,
            rpc.RequestContextSerializer().serialize_context(serialized))
        client = rpc.get_rpc_client(messaging.Target(topic='echo'))
        client.cast(serialized, 'echo', value=1)
        client.cast(ctxt, 'echo', value=2)
        first, second = server.wait_for(2)
        self.assertEqual(second.context, first.context)
        self.assertNotIn('auth_token', first.context)

    def test_version_cap_refuses_newer_messages(self):
        client = rpc.get_rpc_client(messaging.Target(topic='echo'),
                                    version_cap='1.0')
        self.assertTrue(client.can_send_version('1.0'))
        self.assertFalse(client.can_send_version('1.1'))
        self.assertRaises(messaging.RPCVersionCapError,
                          client.prepare(version='1.1').cast,
                          context.RequestContext(), 'echo', value=1)

    def test_sends_give_up_after_the_configured_retries(self):
        self.flags(rpc_send_retries=0)
        client = rpc.get_rpc_client(messaging.Target(topic='echo'))
        self.assertEqual(0, client.retry)
        self.assertEqual(0, client.prepare(version='1.0').retry)

    def test_notifier_uses_the_configured_driver(self):
        ctxt = context.RequestContext()
        rpc.get_notifier('test.host').info(ctxt, 'some.event', {'a': 1})
        [sent] = self.transport.notifications
        self.assertEqual(('test.host', 'some.event', 'INFO', {'a': 1},
                          ctxt.request_id),
                         (sent['publisher_id'], sent['event_type'],
                          sent['priority'], sent['payload'],
                          sent['context']['request_id']))

    def test_notifications_enabled_only_with_a_sending_driver(self):
        for drivers, enabled in (([], False), (['noop'], False),
                                 (['test'], True), (['noop', 'log'], True)):
            self.flags(driver=drivers, group='oslo_messaging_notifications')
            self.assertEqual(enabled, rpc.notifications_enabled(), drivers)

    def test_no_payload_is_built_for_no_driver(self):
        self.flags(driver=[], group='oslo_messaging_notifications')
        with mock.patch.object(notifications, 'payload') as payload:
            notifications.notify_upgrade(context.RequestContext(),
                                         notifications.CREATE, {'id': 'u'})
        payload.assert_not_called()

    def test_default_publisher_names_the_host(self):
        self.assertTrue(rpc.default_publisher_id().startswith(
            'trove-upgrade.'))


class TestMalformedMessages(base.TestCase):
    """A served endpoint refuses malformed messages in one log line.

    Each was logged by oslo.messaging with a traceback, for any sender.
    """

    def setUp(self):
        super().setUp()
        self.useFixture(rpc_fixture.FakeTransport())
        self.log = self.useFixture(fixtures.FakeLogger(level='WARNING'))
        server = rpc.get_rpc_server(
            messaging.Target(topic='echo', server='h'), [EchoEndpoint()],
            ECHO)
        server.start()
        self.addCleanup(server.wait)
        self.addCleanup(server.stop)
        self.client = rpc.get_rpc_client(
            messaging.Target(topic='echo')).prepare(timeout=30)
        self.ctxt = context.RequestContext()

    def assertRefused(self, error, detail, method='echo', **args):
        raised = self.assertRaises(error, self.client.call, self.ctxt,
                                   method, **args)
        self.assertIn(detail, str(raised))
        self.assertIn('Refused RPC message: ', self.log.output)
        self.assertNotIn('Traceback', self.log.output)
        self.assertEqual(1, len(self.log.output.splitlines()),
                         self.log.output)

    def test_missing_argument(self):
        self.assertRefused(exception.MalformedMessageError,
                           "missing a required argument: 'value'")

    def test_unexpected_argument(self):
        self.assertRefused(exception.MalformedMessageError,
                           "unexpected keyword argument 'bogus'",
                           value=1, bogus=2)

    def test_version_not_of_the_form_x_y(self):
        # prepare() refuses it; a Target does not, nor does the bus.
        self.client = rpc.get_rpc_client(
            messaging.Target(topic='echo', version='x.y')).prepare(timeout=30)
        self.assertRefused(exception.MalformedMessageError,
                           "the version 'x.y' is not of the form x.y",
                           value=1)

    def test_unsupported_version(self):
        self.client = self.client.prepare(version='2.0')
        self.assertRefused(messaging.UnsupportedVersion,
                           'does not support RPC version 2.0', value=1)

    def test_method_not_declared(self):
        # An attribute of the endpoint that is not a method of its API.
        self.assertRefused(messaging.NoSuchMethod,
                           "does not support RPC method 'target'",
                           method='target')

    def test_still_serving(self):
        self.assertRefused(messaging.NoSuchMethod, "'nothing'",
                           method='nothing')
        self.assertEqual(7, self.client.call(self.ctxt, 'echo',
                                             value=7)['value'])
