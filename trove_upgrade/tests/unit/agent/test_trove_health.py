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

"""The agent's side of Trove's health gate, the conductor mocked."""

from unittest import mock

import oslo_messaging as messaging

from trove_upgrade.agent import trove_health
from trove_upgrade.tests import base

UPGRADE = {'id': '6f1b8c9e-2d3a-4b5c-8d7e-9f0a1b2c3d4e'}
INSTANCE = '8a1f0c2e-3b4d-4e5f-9a6b-7c8d9e0f1a2b'
MARKER = '2026-12-07T22:00:00'


class FakeClock:

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def answer(gate=True, status='healthy', verdict=None, reason=None,
           timeout=10):
    return {'gate': gate, 'status': status, 'updated_at': None,
            'now': MARKER, 'timeout': timeout, 'verdict': verdict,
            'reason': reason}


class TestTroveHealthGate(base.TestCase):

    def setUp(self):
        super().setUp()
        self.api = mock.Mock()
        self.api.can_ask_trove_health.return_value = True
        self.clock = FakeClock()
        self.gate = trove_health.TroveHealthGate(
            self.api, 'ctx', INSTANCE, poll_interval=2,
            sleep=self.clock.sleep, clock=self.clock)

    def test_baseline_keeps_trove_status_and_deadline(self):
        self.api.trove_health.return_value = answer(status='running')
        self.assertEqual({'gate': True, 'before': 'running',
                          'timeout': 10.0}, self.gate.baseline(UPGRADE))
        self.api.trove_health.assert_called_once_with(
            'ctx', INSTANCE, UPGRADE['id'], None, None)

    def test_gate_off_at_the_conductor(self):
        self.api.trove_health.return_value = answer(
            gate=False, reason='[trove] health_gate is false')
        gate = self.gate.baseline(UPGRADE)
        self.assertFalse(gate['gate'])
        self.assertIn('health_gate', gate['reason'])
        self.assertEqual((None, None), self.gate.wait(UPGRADE, gate))
        self.assertEqual(1, self.api.trove_health.call_count)

    def test_capped_conductor_is_not_asked(self):
        self.api.can_ask_trove_health.return_value = False
        with self.assertLogs(trove_health.LOG.logger.name, 'WARNING') as log:
            gate = self.gate.baseline(UPGRADE)
        self.assertFalse(gate['gate'])
        self.assertIn('caps the conductor RPC API below 1.4', gate['reason'])
        self.assertIn('only the guest agent\'s RPC ping', log.output[0])
        self.api.trove_health.assert_not_called()

    def test_older_conductor_degrades_to_the_ping(self):
        for error in (messaging.RemoteError('UnsupportedVersion', 'x'),
                      messaging.RemoteError('NoSuchMethod', 'x'),
                      messaging.UnsupportedVersion('1.4')):
            self.api.trove_health.side_effect = error
            gate = self.gate.baseline(UPGRADE)
            self.assertFalse(gate['gate'])
            self.assertIn('older than RPC API 1.4', gate['reason'])

    def test_unreachable_conductor_at_baseline_degrades_and_says_so(self):
        self.api.trove_health.side_effect = messaging.MessagingTimeout('t')
        gate = self.gate.baseline(UPGRADE)
        self.assertFalse(gate['gate'])
        self.assertIn('could not be asked: MessagingTimeout', gate['reason'])

    def test_pass_after_waiting_for_a_fresh_heartbeat(self):
        self.api.trove_health.side_effect = [
            answer(),  # the marker
            answer(verdict='wait', reason='no heartbeat yet'),
            answer(verdict='pass', reason='Trove recorded status healthy')]
        gate = {'gate': True, 'before': 'healthy', 'timeout': 10.0}
        self.assertEqual((None, 'Trove recorded status healthy'),
                         self.gate.wait(UPGRADE, gate))
        self.assertEqual(
            [mock.call('ctx', INSTANCE, UPGRADE['id'], None, None),
             mock.call('ctx', INSTANCE, UPGRADE['id'], 'healthy', MARKER),
             mock.call('ctx', INSTANCE, UPGRADE['id'], 'healthy', MARKER)],
            self.api.trove_health.call_args_list)
        self.assertEqual(2, self.clock.now)

    def test_deadline_fails_with_trove_reason(self):
        self.api.trove_health.side_effect = [answer()] + [
            answer(verdict='wait', reason='Trove recorded status crashed, '
                   'worse than healthy')] * 10
        gate = {'gate': True, 'before': 'healthy', 'timeout': 5.0}
        reason, detail = self.gate.wait(UPGRADE, gate)
        self.assertIsNone(detail)
        self.assertEqual('Trove\'s health gate did not pass within 5s: '
                         'Trove recorded status crashed, worse than '
                         'healthy', reason)
        self.assertEqual(5, self.clock.now)

    def test_conductor_errors_are_retried_until_the_deadline(self):
        self.api.trove_health.side_effect = messaging.MessagingTimeout('t')
        gate = {'gate': True, 'before': 'healthy', 'timeout': 4.0}
        reason, _ = self.gate.wait(UPGRADE, gate)
        self.assertIn('could not be asked: MessagingTimeout', reason)
        self.assertEqual(3, self.api.trove_health.call_count)

    def test_conductor_that_recovers_passes(self):
        self.api.trove_health.side_effect = [
            messaging.MessagingTimeout('t'), answer(),
            answer(verdict='pass', reason='ok')]
        gate = {'gate': True, 'before': 'healthy', 'timeout': 10.0}
        self.assertEqual((None, 'ok'), self.gate.wait(UPGRADE, gate))
