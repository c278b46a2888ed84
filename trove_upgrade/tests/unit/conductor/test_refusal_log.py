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

"""Refusals are logged so many a window, then counted."""

import logging

import fixtures

from trove_upgrade.conductor import refusal_log
from trove_upgrade.tests import base


class TestRateLimitedLog(base.TestCase):

    def test_a_burst_per_window_then_how_many_were_left_out(self):
        log = self.useFixture(fixtures.FakeLogger(name='refusals'))
        now = [0.0]
        limited = refusal_log.RateLimitedLog(
            logging.getLogger('refusals'), burst=3, interval=60,
            timer=lambda: now[0])
        for i in range(10):
            limited.warning('refused %d', i)
        self.assertEqual(['refused 0', 'refused 1', 'refused 2'],
                         log.output.splitlines())
        now[0] = 60.0
        limited.warning('refused %d', 10)
        self.assertEqual(['7 more refused messages were not logged in 60 '
                          'seconds', 'refused 10'],
                         log.output.splitlines()[3:])
