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

"""A message to the conductors that no queue takes fails at once.

After a broker restart the agents may reconnect before the conductors have
declared their queue again. RabbitMQ drops what no queue takes; a report
call then waited for ``rpc_response_timeout`` (60 s by default) before the
outbox could try again. Published mandatory, it comes back at once.
"""

import oslo_messaging as messaging
from oslo_utils import uuidutils

from trove_upgrade.common import conductor_rpcapi as rpcapi
from trove_upgrade.common import context
from trove_upgrade.common import states
from trove_upgrade.tests import base
from trove_upgrade.tests.functional import rabbit


class TestNoConductorListening(base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(rabbit.RabbitMQ())
        # A timeout would fail the test's own time limit, not pass it.
        self.flags(rpc_response_timeout=3600)
        self.api = rpcapi.ConductorAPI()
        self.context = context.get_admin_context()

    def test_report_call_is_returned_not_lost(self):
        self.assertRaises(
            messaging.MessageUndeliverable,
            self.api.report_upgrade_state, self.context,
            uuidutils.generate_uuid(), uuidutils.generate_uuid(),
            states.SUCCESS, None, 'v1', 'v2')

    def test_heartbeat_cast_is_returned_not_lost(self):
        self.assertRaises(
            messaging.MessageUndeliverable, self.api.heartbeat,
            self.context, uuidutils.generate_uuid(), '1', '1', '1.1',
            'RUNNING', {}, 'host')
