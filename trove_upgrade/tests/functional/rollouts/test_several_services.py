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

"""Two conductors and two APIs on one PostgreSQL; one of each killed.

A rollout created through the first API runs on both conductors while
upgrades of other agents are POSTed through both APIs in turn. Mid-way
the test kills the first conductor and the first API with SIGKILL. The
client sends again, through the second API, each POST the first never
answered whose upgrade the database does not have. Then nothing may be
lost (every upgrade succeeds, one per agent) and none sent twice: each
agent received each of its upgrades once, and only an upgrade recorded
before the kill was sent again (``send_count``), by the survivors taking
over what the killed process had recorded but maybe not sent.
"""

import collections
import threading
import time

from oslo_utils import timeutils
import requests
from testtools import content

from trove_upgrade.common import rollout_states as rs
from trove_upgrade.common import states
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.tests.functional.rollouts import test_rollouts

PROJECT = 'fleet-admin'
HEADERS = {'X-User-Id': 'operator', 'X-Project-Id': PROJECT,
           'X-Roles': 'admin'}
VERSION = 'v2.0.0'
LOCATION = 'https://repo/agent.tar'


class TestSeveralConductorsAndAPIs(test_rollouts.RolloutTestCase):

    def mgmt(self, api):
        return '%s/v1.0/%s/mgmt' % (api.url, PROJECT)

    def post_upgrades(self, apis, instance_ids, answers, pause=0):
        """POST each upgrade through the APIs in turn; note each answer.

        ``pause`` seconds between two spread them over the rollout.
        """
        for n, instance_id in enumerate(instance_ids):
            time.sleep(pause if n else 0)
            body = {'instance_id': instance_id, 'instance_version': VERSION,
                    'strategy': 'http', 'location': LOCATION}
            try:
                resp = requests.post(self.mgmt(apis[n % 2]) + '/upgrades',
                                     json=body, headers=HEADERS, timeout=30)
                answers[instance_id] = resp.status_code
            except requests.ConnectionError:
                answers[instance_id] = None

    def green_upgrades(self, green):
        """The upgrades POSTed, for the agents outside the rollout."""
        return [u for u in db_upgrades.list_upgrades(self.admin)
                if u['instance_id'] in green]

    def test_one_of_each_killed_mid_rollout(self):
        conductors = [self.fleet.start_conductor() for _ in range(2)]
        apis = [self.fleet.start_api() for _ in range(2)]
        blue = []
        for _ in range(2):
            blue += self.fleet.start_agents(20, install_seconds=0.5)
        green = self.fleet.start_agents(30, labels='group=green',
                                        install_seconds=0.5)
        resp = requests.post(self.mgmt(apis[0]) + '/rollouts', json={
            'rollout': {'name': 'blue', 'instance_version': VERSION,
                        'strategy': 'http', 'location': LOCATION,
                        'selector': {'group': 'blue'}, 'max_in_flight': 5,
                        'agent_deadline': 300}}, headers=HEADERS, timeout=30)
        self.assertEqual(201, resp.status_code, resp.text)
        rollout_id = resp.json()['rollout']['id']
        answers = {}
        poster = threading.Thread(target=self.post_upgrades,
                                  args=(apis, green, answers, 0.4))
        poster.start()
        self.addCleanup(poster.join)
        test_rollouts.wait_until(
            lambda: len(self.upgrades(rollout_id)) >= 10 and
            len(answers) >= 6, 'the rollout and the POSTs to be under way')
        self.fleet.kill_conductor(conductors[0])
        self.fleet.kill_conductor(apis[0])
        killed_at = timeutils.utcnow()
        poster.join()

        # The client sends through the second API each POST the first did
        # not answer whose upgrade was not recorded before it died.
        unanswered = [i for i in green if answers[i] != 202]
        self.assertTrue(unanswered, 'the first API answered every POST')
        self.assertEqual({None}, {answers[i] for i in unanswered})
        recorded = {u['instance_id'] for u in self.green_upgrades(green)}
        again = {}
        self.post_upgrades([apis[1]] * 2,
                           [i for i in unanswered if i not in recorded],
                           again)
        self.assertEqual({202}, set(again.values()) or {202})

        done = test_rollouts.wait_until(
            lambda: (lambda r: r if r['status'] in (
                rs.COMPLETED, rs.PAUSED) else None)(requests.get(
                    self.mgmt(apis[1]) + '/rollouts/' + rollout_id,
                    headers=HEADERS, timeout=30).json()['rollout']),
            'the rollout to end')
        self.assertEqual(rs.COMPLETED, done['status'], done)
        test_rollouts.wait_until(
            lambda: all(u['status'] in states.FINAL_STATES
                        for u in self.green_upgrades(green)),
            'the upgrades POSTed to end')
        self.addDetail('claims', content.text_content(
            self.fleet.claim_lines()))
        self.addDetail('answers', content.text_content('\n'.join(
            '%s %s %s' % (i, answers[i], again.get(i, '')) for i in green)))

        everything = self.upgrades(rollout_id) + self.green_upgrades(green)
        per_instance = collections.defaultdict(list)
        for upgrade in everything:
            per_instance[upgrade['instance_id']].append(upgrade['status'])
        self.assertEqual({i: [states.SUCCESS] for i in blue + green},
                         dict(per_instance))
        self.assertEqual({i: 1 for i in blue + green},
                         dict(self.fleet.claims()))
        received = collections.Counter(
            upgrade_id for _t, _i, upgrade_id, what in self.fleet.sends()
            if what == 'received')
        self.assertEqual({u['id']: 1 for u in everything}, dict(received))
        self.addDetail('sends-per-upgrade', content.text_content('\n'.join(
            '%s %s %s %s' % (u['instance_id'], u['id'], u['created_at'],
                             u['send_count']) for u in everything)))
        for upgrade in everything:
            if upgrade['send_count'] > 1:
                self.assertLessEqual(upgrade['created_at'], killed_at,
                                     upgrade)
