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

"""Trove's secure RPC format, against vectors Trove's own code made.

The vectors were made by Trove 25.1.0's ``trove.common.crypto_utils`` (the
same in 26.0.0) in its virtualenv::

    from trove.common import crypto_utils as cu
    print(cu.encode_data(cu.encrypt_data(TEXT, KEY)))

``functional/trove/test_secure_rpc.py`` checks the format against Trove's
code of each release as it runs, and against its real guest agents.
"""

import base64
from unittest import mock

import fixtures
import oslo_messaging as messaging
from oslo_messaging import conffixture

from trove_upgrade.agent import supervisor
from trove_upgrade.agent import trove_guest
from trove_upgrade.agent import trove_secure_rpc as srpc
from trove_upgrade.common import trove_crypto
from trove_upgrade.tests import base
from trove_upgrade.tests.unit.agent import test_reasons

# (key, text, what Trove's encode_data(encrypt_data(text, key)) gave).
TROVE_VECTORS = [
    ('TbWqXvsoc2wNpf0Pq3bJ8Dj4mhyTqX1M', '"pong"',
     'PgFKlu08tz4au7T1dWn/5q84hPfAzx96M0ZZ+y+eOdo='),
    ('bzH6y0SGmjuoY0FNSTptrhgieGXNDX6PIhvz',
     '{"user": null, "request_id": "req-1", "limit": null}',
     'khJbMwFIyuxM7wQmUDW3/BNqEIxuKiRvR7ZHgZfqGLtMoPNysovcHrNIMKAwW3ZtWNMp'
     'uNIUrSwCML6xlZILs9aERuVPlImAl8jhYT/0mR0='),
    # A whole block of text: a whole block of padding.
    ('k', '0123456789abcdef',
     'XImI7T+odCkfsxkD9OWdIEWQisr+k1A1sRAk+0L5tlxFf6WnDG2jes647hT2lZYq'),
    ('clé', 'é ü', '/s6go4OoM8M14gYoFdwLNwwnFqsnLgOk8CQdmrTkyHc='),
    ('', 'null', 'zcJ3u606Yu+y4xR/OOecIpAuTa3O6gRPRlmaCT7B1lI='),
]


class TestTroveVectors(base.TestCase):

    def test_trove_vectors_decrypt(self):
        for key, text, encoded in TROVE_VECTORS:
            self.assertEqual(text.encode('utf-8'),
                             trove_crypto.decrypt(encoded, key))

    def test_encrypts_as_trove_for_the_same_iv(self):
        for key, text, encoded in TROVE_VECTORS:
            iv = base64.b64decode(encoded)[:trove_crypto.IV_SIZE]
            self.assertEqual(encoded, trove_crypto.encrypt(
                text.encode('utf-8'), key, iv=iv))

    def test_an_entity_is_trove_json_encrypted(self):
        key, text, encoded = TROVE_VECTORS[0]
        self.assertEqual('pong', srpc.loads(encoded, key))
        iv = base64.b64decode(encoded)[:trove_crypto.IV_SIZE]
        self.assertEqual(encoded, srpc.dumps('pong', key, iv=iv))

    def test_random_iv(self):
        self.assertNotEqual(trove_crypto.encrypt(b'x', 'k'),
                            trove_crypto.encrypt(b'x', 'k'))


class TestRefusals(base.TestCase):

    KEY = 'TbWqXvsoc2wNpf0Pq3bJ8Dj4mhyTqX1M'

    def assertUnreadable(self, encoded, key=KEY):
        self.assertRaises(srpc.UnreadableMessageError,
                          srpc.loads, encoded, key)

    def test_round_trip(self):
        for value in ('pong', None, 3, {'a': ['b', 'é', 1.5]}, 'x' * 100):
            self.assertEqual(value,
                             srpc.loads(srpc.dumps(value, self.KEY), self.KEY))

    def test_wrong_key(self):
        self.assertUnreadable(srpc.dumps({'a': 1}, self.KEY), self.KEY[::-1])

    def test_plain_answer(self):
        # What a guest agent without a key answers to a ping.
        self.assertUnreadable('pong')

    def test_not_text_or_not_base64_or_not_blocks(self):
        self.assertUnreadable({'context': 'x'})
        self.assertUnreadable('not base64!')
        self.assertUnreadable(base64.b64encode(b'\0' * 40).decode())
        self.assertUnreadable(base64.b64encode(b'\0' * 16).decode())

    def test_not_json(self):
        self.assertUnreadable(trove_crypto.encrypt(b'{not json', self.KEY))
        self.assertUnreadable(trove_crypto.encrypt(b'\xff', self.KEY))


class TestSecureSerializer(base.TestCase):

    KEY = 'QkTm3ZrIY6uLbVv0xjq9cDsWnE2pHg8A'

    def test_without_key_everything_passes(self):
        s = srpc.SecureSerializer(None)
        self.assertEqual({'a': 1}, s.serialize_context({'a': 1}))
        self.assertEqual('pong', s.serialize_entity({}, 'pong'))
        self.assertEqual('pong', s.deserialize_entity({}, 'pong'))
        self.assertEqual({'a': 1}, s.deserialize_context({'a': 1}))

    def test_context_is_one_encrypted_field(self):
        s = srpc.SecureSerializer(self.KEY)
        ctxt = srpc.trove_context()
        wire = s.serialize_context(ctxt)
        self.assertEqual([srpc.CONTEXT_FIELD], list(wire))
        self.assertEqual(ctxt, srpc.loads(wire['context'], self.KEY))
        self.assertEqual(ctxt, s.deserialize_context(wire))
        self.assertEqual('pong', s.deserialize_entity(
            ctxt, s.serialize_entity(ctxt, 'pong')))

    def test_plain_context_is_refused(self):
        s = srpc.SecureSerializer(self.KEY)
        self.assertRaises(srpc.UnreadableMessageError, s.deserialize_context,
                          {'user': None})

    def test_empty_key_is_a_key_as_in_trove(self):
        s = srpc.SecureSerializer('')
        self.assertEqual('pong', srpc.loads(s.serialize_entity({}, 'pong'),
                                            ''))

    def test_trove_context_fields(self):
        ctxt = srpc.trove_context()
        for name in ('limit', 'marker', 'service_catalog'):
            self.assertIn(name, ctxt)
        self.assertTrue(ctxt['request_id'].startswith('req-'))
        self.assertNotEqual(ctxt['request_id'],
                            srpc.trove_context()['request_id'])


class _RefusingSerializer(srpc.SecureSerializer):
    """Refuses every context with ``error``, as the guest agent sends it.

    The in-memory driver raises a server's exception itself in the caller;
    ``error`` is what RabbitMQ's driver gives the caller instead.
    """

    def __init__(self, error):
        super().__init__(None)
        self.error = error

    def deserialize_context(self, ctxt):
        raise self.error


class _PingEndpoint:
    """Answers the ping as oslo.messaging's ping endpoint does."""

    def __init__(self, answer='pong'):
        self.answer = answer

    def oslo_rpc_server_ping(self, ctxt, **kwargs):
        return self.answer


class TestRpcPing(base.TestCase):
    """RpcPing against a server on oslo.messaging's in-memory driver."""

    KEY = 'Hn4cVq8ZyP1sLr0WdXe7KbTg2uMa9FjQ'
    GUEST = '5f1d9c3e-0a7b-4e3d-9c51-2f7e8a6b4d10'

    def setUp(self):
        super().setUp()
        conf = self.useFixture(conffixture.ConfFixture(self.conf)).conf
        self.transport = messaging.get_rpc_transport(conf, url='fake:/')
        self.addCleanup(self.transport.cleanup)
        # RpcPing makes its transport from the URL; the in-memory driver
        # only connects the ends of one transport.
        self.useFixture(fixtures.MockPatchObject(
            messaging, 'get_rpc_transport',
            mock.Mock(return_value=self.transport)))

    def serve(self, key, endpoint=None, serializer=None):
        target = messaging.Target(exchange='trove', topic=(
            trove_guest.TOPIC_PREFIX + self.GUEST), server=self.GUEST)
        server = messaging.get_rpc_server(
            self.transport, target, [endpoint or _PingEndpoint()],
            executor='threading',
            serializer=serializer or srpc.SecureSerializer(key))
        server.start()
        self.addCleanup(server.wait)
        self.addCleanup(server.stop)

    def ping(self, key):
        pinger = trove_guest.RpcPing('fake:/', 'trove', self.GUEST, 30,
                                     key=key)
        return pinger.ping()

    def test_keyed_ping_answers(self):
        self.serve(self.KEY)
        self.assertIsNone(self.ping(self.KEY))

    def test_plain_ping_answers_a_plain_server(self):
        self.serve(None)
        self.assertIsNone(self.ping(None))

    def assertRefused(self, reason, *parts):
        self.assertIsInstance(reason, supervisor.Refused)
        for part in parts:
            self.assertIn(part, reason)
        self.assertNotIn('Traceback', reason)
        self.assertNotIn(test_reasons.GUEST_PATH, reason)
        self.assertNotIn('\n', reason)

    def test_plain_ping_refused_by_a_keyed_guest_says_why(self):
        # Trove's SecureSerializer reads ctxt['context'].
        self.serve(None, serializer=_RefusingSerializer(
            test_reasons.remote(KeyError('context'))))
        self.assertRefused(self.ping(None), 'refused oslo_rpc_server_ping',
                           'no instance_rpc_encr_key', "KeyError: 'context'")

    def test_refusal_of_a_module_not_allowed(self):
        self.serve(None, serializer=_RefusingSerializer(
            test_reasons.remote(ValueError('bad\nthing'))))
        self.assertRefused(self.ping(self.KEY),
                           'refused oslo_rpc_server_ping: ValueError: thing')

    def test_reply_of_another_key_cannot_be_read(self):
        self.serve(None)
        reason = self.ping(self.KEY)
        self.assertIsInstance(reason, supervisor.Refused)
        self.assertIn('cannot read the reply', reason)
        self.assertIn('runs with another key or none', reason)

    def test_other_answer_is_refused(self):
        self.serve(self.KEY, _PingEndpoint('x' * 1000))
        reason = self.ping(self.KEY)
        self.assertIsInstance(reason, supervisor.Refused)
        self.assertIn("answered 'xxx", reason)
        self.assertLess(len(reason), 200)

    def test_no_server_times_out_not_refused(self):
        pinger = trove_guest.RpcPing('fake:/', 'trove', self.GUEST, 0.2,
                                     key=self.KEY)
        reason = pinger.ping()
        self.assertNotIsInstance(reason, supervisor.Refused)
        self.assertIn('did not answer', reason)
