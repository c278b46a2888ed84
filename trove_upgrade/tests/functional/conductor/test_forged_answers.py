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

"""An answer from someone on the bus without the instance's key is refused.

Anyone with the broker's credentials can consume from the conductors'
queue. Here such a party, a real RPC server on the conductors' topic of
the real RabbitMQ, answers an agent's claim with "proceed" and its report
with "recorded"; the agent's client, which seals its calls with the
instance's key, refuses every such answer (conductor API 1.3).
"""

import oslo_messaging as messaging
from oslo_utils import uuidutils

from trove_upgrade.common import conductor_rpcapi as rpcapi
from trove_upgrade.common import context
from trove_upgrade.common import exception
from trove_upgrade.common import sealing
from trove_upgrade.common import states
from trove_upgrade.tests import base
from trove_upgrade.tests.fixtures import rpc as rpc_fixture
from trove_upgrade.tests.functional import rabbit


class ForgingConductor:
    """Answers as a conductor would, without the instance's key."""

    target = messaging.Target(version='1.3')

    def __init__(self):
        self.answer = None

    def start_upgrade(self, context, **kwargs):
        return self.answer(kwargs, {'proceed': True,
                                    'status': states.DOWNLOADING,
                                    'reason': None})

    def report_upgrade_state(self, context, **kwargs):
        return self.answer(kwargs, {'recorded': True,
                                    'status': states.SUCCESS,
                                    'reason': None})


class TestForgedAnswers(base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(rabbit.RabbitMQ())
        self.instance_id = uuidutils.generate_uuid()
        self.keys = sealing.InstanceKeys(self.instance_id, [
            (sealing.new_key_id(), sealing.generate_key())])
        self.forger = ForgingConductor()
        self.server = self.useFixture(rpc_fixture.RecordingServer(
            messaging.Target(topic=rpcapi.topic(), server='forger'),
            [self.forger]))
        self.context = context.get_admin_context()

    def claim(self):
        return rpcapi.ConductorAPI(self.keys).start_upgrade(
            self.context, self.instance_id, uuidutils.generate_uuid(),
            '1.0.0')

    def report(self):
        return rpcapi.ConductorAPI(self.keys).report_upgrade_state(
            self.context, self.instance_id, uuidutils.generate_uuid(),
            states.SUCCESS, None, '1.0.0', '2.0.0')

    def assertRefused(self, call):
        e = self.assertRaises(exception.ReplyNotAuthenticatedError, call)
        self.assertIn(self.instance_id, str(e))
        return str(e)

    def test_a_plain_proceed_and_recorded_are_refused(self):
        self.forger.answer = lambda call, answer: answer
        self.assertIn('UnsealedError', self.assertRefused(self.claim))
        self.assertIn('UnsealedError', self.assertRefused(self.report))
        # The calls reached the forger, sealed at 1.3.
        messages = self.server.wait_for(2)
        self.assertEqual(['1.3', '1.3'], [m.version for m in messages])

    def test_an_answer_sealed_with_a_guessed_key_is_refused(self):
        def sealed_with_another_key(call, answer):
            request = call['sealed']
            guessed = sealing.InstanceKeys(self.instance_id, [
                (request['key_id'], sealing.generate_key())])
            return sealing.seal_reply(guessed, 'start_upgrade', request,
                                      answer)
        self.forger.answer = sealed_with_another_key
        self.assertIn('BadSealError', self.assertRefused(self.claim))

    def test_the_request_sent_back_is_no_answer(self):
        self.forger.answer = lambda call, answer: {
            sealing.SEALED_REPLY: call['sealed']}
        self.assertIn('BadSealError', self.assertRefused(self.claim))

    def test_an_agent_capped_below_1_3_takes_any_answer(self):
        # The cap for conductors of older releases, which answer
        # unsealed: the window closes when the cap is lifted.
        self.flags(group='upgrade_levels', conductor='1.2')
        self.forger.answer = lambda call, answer: answer
        self.assertTrue(self.claim()['proceed'])
