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

"""Trove's health gate on the control plane, Trove's database mocked."""

import datetime
from unittest import mock

from trove_upgrade.services import trove_health
from trove_upgrade.tests import base

A = '8a1f0c2e-3b4d-4e5f-9a6b-7c8d9e0f1a2b'
MARKER = datetime.datetime(2026, 12, 7, 22, 0, 0)
LATER = MARKER + datetime.timedelta(seconds=3)
EARLIER = MARKER - datetime.timedelta(seconds=3)


class TestStatusOrder(base.TestCase):

    def test_serving_busy_stopped_failed(self):
        order = ['healthy', 'running', 'building', 'shutdown', 'crashed']
        self.assertEqual(sorted(order, key=trove_health.rank), order)
        self.assertEqual(
            [0, 1, 2, 3, 4], [trove_health.rank(s) for s in order])

    def test_worse(self):
        self.assertTrue(trove_health.is_worse('running', 'healthy'))
        self.assertTrue(trove_health.is_worse('shutdown', 'running'))
        self.assertTrue(trove_health.is_worse('crashed', 'shutdown'))
        self.assertTrue(trove_health.is_worse('guestagent error',
                                              'building'))

    def test_same_or_better_is_not_worse(self):
        self.assertFalse(trove_health.is_worse('healthy', 'healthy'))
        self.assertFalse(trove_health.is_worse('healthy', 'running'))
        self.assertFalse(trove_health.is_worse('running', 'shutdown'))
        # Busy states are one class: one is no worse than another.
        self.assertFalse(trove_health.is_worse('building', 'restarting'))
        self.assertFalse(trove_health.is_worse('crashed', 'unknown'))

    def test_trove_spells_them_in_any_case(self):
        self.assertFalse(trove_health.is_worse('HEALTHY', 'healthy'))

    def test_unknown_status_counts_as_failed(self):
        self.assertEqual(4, trove_health.rank('exploded'))
        self.assertEqual(4, trove_health.rank(None))
        self.assertTrue(trove_health.is_worse('exploded', 'shutdown'))

    def test_without_a_baseline_only_serving_passes(self):
        self.assertFalse(trove_health.is_worse('running', None))
        self.assertTrue(trove_health.is_worse('building', None))


class TestVerdict(base.TestCase):

    def setUp(self):
        super().setUp()
        self.flags(group='trove', connection='mysql+pymysql://x/trove')
        self.record = {'status': 'healthy', 'updated_at': LATER}
        patcher = mock.patch.object(
            trove_health.trove_db, 'get_service_status',
            side_effect=lambda instance_id: self.record)
        self.get = patcher.start()
        self.addCleanup(patcher.stop)

    def test_baseline_gives_status_and_marker(self):
        answer = trove_health.verdict(A, None, None)
        self.assertTrue(answer['gate'])
        self.assertEqual('healthy', answer['status'])
        self.assertEqual(LATER.isoformat(), answer['updated_at'])
        self.assertIsNone(answer['verdict'])
        self.assertEqual(180, answer['timeout'])
        self.assertIsNotNone(answer['now'])
        self.get.assert_called_once_with(A)

    def test_fresh_and_no_worse_passes(self):
        answer = trove_health.verdict(A, 'running', MARKER.isoformat())
        self.assertEqual(trove_health.PASS, answer['verdict'])
        self.assertIn('status healthy', answer['reason'])

    def test_heartbeat_before_the_marker_waits(self):
        self.record['updated_at'] = EARLIER
        answer = trove_health.verdict(A, 'healthy', MARKER.isoformat())
        self.assertEqual(trove_health.WAIT, answer['verdict'])
        self.assertIn('no heartbeat of the restarted guest agent',
                      answer['reason'])

    def test_never_heartbeated_waits(self):
        self.record['updated_at'] = None
        answer = trove_health.verdict(A, 'healthy', MARKER.isoformat())
        self.assertEqual(trove_health.WAIT, answer['verdict'])
        self.assertIn('is from never', answer['reason'])

    def test_fresh_but_worse_waits_with_trove_status(self):
        self.record['status'] = 'crashed'
        answer = trove_health.verdict(A, 'healthy', MARKER.isoformat())
        self.assertEqual(trove_health.WAIT, answer['verdict'])
        self.assertIn('status crashed', answer['reason'])
        self.assertIn('worse than healthy', answer['reason'])

    def test_marker_with_zone_is_compared_in_utc(self):
        zoned = (MARKER + datetime.timedelta(hours=1)).isoformat() + '+01:00'
        answer = trove_health.verdict(A, 'healthy', zoned)
        self.assertEqual(trove_health.PASS, answer['verdict'])

    def test_malformed_marker_waits(self):
        answer = trove_health.verdict(A, 'healthy', 'yesterday')
        self.assertEqual(trove_health.WAIT, answer['verdict'])
        self.assertIn('no ISO 8601 time', answer['reason'])

    def test_no_status_row_turns_the_gate_off(self):
        self.record = None
        answer = trove_health.verdict(A, None, None)
        self.assertFalse(answer['gate'])
        self.assertIn('no service status', answer['reason'])

    def test_off_by_option(self):
        self.flags(group='trove', health_gate=False)
        answer = trove_health.verdict(A, None, None)
        self.assertFalse(answer['gate'])
        self.assertIn('health_gate', answer['reason'])
        self.get.assert_not_called()

    def test_off_without_connection(self):
        self.flags(group='trove', connection=None)
        self.assertFalse(trove_health.verdict(A, None, None)['gate'])
        self.get.assert_not_called()
