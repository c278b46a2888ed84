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

"""Upstream Trove's POST /v1.0/{tenant_id}/mgmt/instances/{id}/upgrade."""

from oslo_utils import uuidutils

from trove_upgrade.common import context
from trove_upgrade.common import states
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade.tests.unit.api import base


class TestInstanceUpgrade(base.APITestCase):

    def path(self, instance_id=base.INSTANCE_ID):
        return '%s/instances/%s/upgrade' % (self.mgmt, instance_id)

    def create(self, instance_id=base.INSTANCE_ID, **upgrade):
        upgrade.setdefault('instance_version', '2.0.0')
        return self.request('POST', self.path(instance_id),
                            {'upgrade': upgrade})

    def test_trove_body_records_an_upgrade(self):
        resp = self.create(location='swift://guest/agent-2.0.0.pkg',
                           metadata={'ticket': 'OPS-1'})

        self.assertEqual(202, resp.status_int, resp.text)
        upgrade = resp.json['upgrade']
        self.assertEqual(
            (base.INSTANCE_ID, '2.0.0', 'swift', {'ticket': 'OPS-1'},
             states.SENT, False),
            (upgrade['instance_id'], upgrade['instance_version'],
             upgrade['strategy'], upgrade['metadata'], upgrade['status'],
             upgrade['allow_downgrade']))
        self.assertEqual('http://localhost%s/upgrades/%s'
                         % (self.mgmt, upgrade['id']),
                         resp.headers['Location'])
        recorded = db_upgrades.get_upgrade(context.get_admin_context(),
                                           upgrade['id'])
        self.assertEqual('swift://guest/agent-2.0.0.pkg',
                         recorded['location'])

    def test_the_location_tells_the_strategy(self):
        for location, strategy in (
                ('swift://c/o.pkg', 'swift'), ('swift:o.pkg', 'swift'),
                ('https://h/p.pkg', 'http'), ('HTTP://h/p.pkg', 'http'),
                ('rsync://h/m/p.pkg', 'rsync'), ('file:///r/p.pkg', 'local'),
                ('/srv/repo/p.pkg', 'local')):
            resp = self.create(location=location)
            self.assertEqual(202, resp.status_int, resp.text)
            self.assertEqual(strategy, resp.json['upgrade']['strategy'],
                             location)

    def test_a_given_strategy_wins(self):
        resp = self.create(location='https://swift/v1/AUTH_x/c/o.pkg',
                           strategy='swift', allow_downgrade=True)

        self.assertEqual(202, resp.status_int, resp.text)
        self.assertEqual(('swift', True),
                         (resp.json['upgrade']['strategy'],
                          resp.json['upgrade']['allow_downgrade']))

    def test_a_location_of_no_known_form_is_400(self):
        resp = self.create(location='guest-packages/agent.pkg')

        self.assertError(resp, 400, "strategy cannot be told from location "
                                    "'guest-packages/agent.pkg'")
        self.assertNothingRecorded()

    def test_malformed_bodies_are_400(self):
        for upgrade, detail in (
                ({'location': '/p.pkg'}, "'instance_version' is a required"),
                ({'instance_version': '2.0.0'}, "'location' is a required"),
                ({'instance_version': '2.0.0', 'location': '/p.pkg',
                  'instance_id': base.INSTANCE_ID}, 'instance_id'),
                ({'instance_version': 'not a version', 'location': '/p'},
                 'does not match'),
                ({'instance_version': '2.0.0', 'location': '/p',
                  'strategy': 'ftp'}, 'ftp')):
            resp = self.request('POST', self.path(), {'upgrade': upgrade})
            self.assertError(resp, 400, detail)
        resp = self.request('POST', self.path(), {'instance_version': '2'})
        self.assertError(resp, 400, "'upgrade' is a required property")
        self.assertNothingRecorded()

    def test_a_malformed_instance_id_is_404(self):
        resp = self.create(instance_id='not-a-uuid', location='/p.pkg')

        self.assertError(resp, 404, 'Trove has no instance not-a-uuid: an '
                                    'instance id is a UUID')
        self.assertNothingRecorded()

    def test_non_admin_is_403_and_only_post_is_allowed(self):
        resp = self.request('POST', self.path(),
                            {'upgrade': {'instance_version': '2.0.0',
                                         'location': '/p.pkg'}},
                            roles='member')
        self.assertError(resp, 403, 'trove_upgrade:upgrades:create')
        resp = self.request('GET', self.path(uuidutils.generate_uuid()))
        self.assertError(resp, 405, 'allowed: POST')
        self.assertNothingRecorded()
