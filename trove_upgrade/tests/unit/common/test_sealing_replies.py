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

"""Answers to sealed calls: sealed with the call's key, bound to the call."""

import json

from trove_upgrade.common import sealing
from trove_upgrade.tests import base
from trove_upgrade.tests.unit.common import test_sealing

INSTANCE = test_sealing.INSTANCE
ARGS = {'instance_id': INSTANCE, 'upgrade_id': 'u-1', 'from_version': None}
RESULT = {'proceed': True, 'status': 'DOWNLOADING', 'reason': None}


class TestReplies(base.TestCase):

    def setUp(self):
        super().setUp()
        self.keys = test_sealing.keyring('k1')
        self.request = sealing.seal(self.keys, 'start_upgrade', '1.3',
                                    sealing.TO_CONDUCTOR, ARGS)

    def reply(self, result=RESULT, keys=None, request=None,
              method='start_upgrade'):
        return sealing.seal_reply(keys or self.keys, method,
                                  request or self.request, result)

    def open(self, reply, method='start_upgrade', request=None):
        return sealing.open_reply(self.keys, method, request or self.request,
                                  reply)

    def test_round_trip_and_only_the_seal_travels(self):
        reply = self.reply()
        self.assertEqual([sealing.SEALED_REPLY], list(reply))
        self.assertNotIn('DOWNLOADING', json.dumps(reply))
        self.assertEqual(RESULT, self.open(reply))

    def test_any_json_result(self):
        for result in ('1.3', [{'recorded': False}], None):
            self.assertEqual(result, self.open(self.reply(result)))

    def test_an_unsealed_answer_is_refused(self):
        for answer in (RESULT, None, '1.3', {'sealed_reply': None},
                       {'sealed_reply': self.reply()['sealed_reply'],
                        'proceed': True}):
            self.assertRaises(
                (sealing.UnsealedError, sealing.MalformedSealError),
                self.open, answer)

    def test_a_reply_sealed_with_another_key_is_refused(self):
        # Someone on the bus without the key, who guessed the key id.
        forger = test_sealing.keyring('k1')
        self.assertRaises(sealing.BadSealError, self.open,
                          self.reply(keys=forger))

    def test_the_reply_to_another_call_is_refused(self):
        other = sealing.seal(self.keys, 'start_upgrade', '1.3',
                             sealing.TO_CONDUCTOR, ARGS)
        self.assertRaises(sealing.ReplyMismatchError, self.open,
                          self.reply(request=other))

    def test_a_reply_moved_to_the_same_call_id_of_another_method(self):
        self.assertRaises(sealing.BadSealError, self.open,
                          self.reply(method='report_upgrade_state'))

    def test_a_changed_message_id_does_not_verify(self):
        reply = self.reply()
        other = sealing.seal(self.keys, 'start_upgrade', '1.3',
                             sealing.TO_CONDUCTOR, ARGS)
        reply['sealed_reply']['message_id'] = other['message_id']
        self.assertRaises(sealing.BadSealError,
                          self.open, reply, request=other)

    def test_a_request_is_no_reply(self):
        # The request's own seal, sent back, does not open as its answer.
        self.assertRaises(sealing.BadSealError, self.open,
                          {sealing.SEALED_REPLY: self.request})

    def test_a_key_the_replier_does_not_hold(self):
        self.assertRaises(sealing.UnknownKeyError, sealing.seal_reply,
                          test_sealing.keyring('k2'), 'start_upgrade',
                          self.request, RESULT)
