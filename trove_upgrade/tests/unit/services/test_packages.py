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

"""The upgrade floor and desired-version rounds."""

import datetime

from trove_upgrade.common import exception
from trove_upgrade.common import states
from trove_upgrade.services import desired_versions
from trove_upgrade.services import packages as package_registry
from trove_upgrade.tests import base

T0 = datetime.datetime(2026, 12, 1, 12, 0, 0)


class TestFloor(base.TestCase):

    def test_below_floor(self):
        package = {'name': 'g', 'version': '26.0.0',
                   'min_upgrade_from': '25.0'}
        self.assertTrue(package_registry.below_floor(package, '24.9'))
        self.assertFalse(package_registry.below_floor(package, 'v25.0.0'))
        # An unknown or unparsable version is the agent's to check.
        self.assertFalse(package_registry.below_floor(package, None))
        self.assertFalse(package_registry.below_floor(package, 'custom'))
        self.assertFalse(package_registry.below_floor(
            dict(package, min_upgrade_from=None), '1.0'))
        e = self.assertRaises(
            exception.PackageConflictError, package_registry.check_floor,
            package, [{'instance_id': 'b', 'guest_version': '24.0'},
                      {'instance_id': 'a', 'guest_version': '24.1'},
                      {'instance_id': 'c', 'guest_version': '25.1'}])
        self.assertIn('2 selected agent(s) run an older version: a, b',
                      str(e))


def _attempt(round_, attempt, status, finished_at=T0):
    return {'round': round_, 'attempt': attempt, 'status': status,
            'finished_at': finished_at}


class TestRounds(base.TestCase):

    def round_of(self, guest_version, heard, attempts):
        return desired_versions._current_round(
            {'guest_version': guest_version, 'last_heartbeat_at': heard},
            attempts, '2.0.0')

    def test_no_attempts(self):
        self.assertEqual((0, []), self.round_of('1.0', T0, []))

    def test_converged_agent_stays_in_its_round(self):
        done = [_attempt(0, 1, states.SUCCESS)]
        self.assertEqual((0, done), self.round_of(
            '2.0.0', T0 + datetime.timedelta(seconds=5), done))

    def test_rebuilt_agent_starts_a_new_round(self):
        done = [_attempt(0, 1, states.FAILED), _attempt(0, 2,
                                                        states.SUCCESS)]
        self.assertEqual((1, []), self.round_of(
            '1.0.0', T0 + datetime.timedelta(seconds=5), done))

    def test_old_version_heard_before_the_success_is_no_rebuild(self):
        done = [_attempt(0, 1, states.SUCCESS)]
        self.assertEqual((0, done), self.round_of('1.0.0', T0, done))

    def test_a_failed_round_is_not_restarted(self):
        failed = [_attempt(1, 1, states.FAILED)]
        self.assertEqual((1, failed), self.round_of(
            '1.0.0', T0 + datetime.timedelta(seconds=5),
            [_attempt(0, 1, states.SUCCESS)] + failed))
