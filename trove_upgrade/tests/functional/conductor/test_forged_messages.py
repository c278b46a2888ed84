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

"""Forged agent messages cost the conductor no database work.

Anyone who can publish on the bus can send registrations naming random
instances. Each cost a read of the instance's keys, a WARNING and a place
in the keyring cache (300 forged registrations, 300 statements). The
statements the conductor's engine runs on a real MariaDB database are
counted with SQLAlchemy's events.
"""

import logging
import time

import fixtures
from oslo_messaging.rpc import dispatcher
from oslo_utils import uuidutils
import sqlalchemy as sa

from trove_upgrade.common import context
from trove_upgrade.common import exception
from trove_upgrade.common import sealing
from trove_upgrade.conductor import manager
from trove_upgrade.conductor import refusal_log
from trove_upgrade.db import common as db_common
from trove_upgrade.services import sealing_keys
from trove_upgrade.tests import base
from trove_upgrade.tests.fixtures import database
from trove_upgrade.tests.fixtures import rpc as rpc_fixture

INSTANCE = '7e1d2c3b-4a5f-4e6d-9c8b-7a6f5e4d3c2b'
FORGED = 300


def _agent(instance_id):
    return {'instance_id': instance_id, 'agent_version': '1.0.0',
            'guest_version': '1.0.0', 'rpc_api_version': '1.2',
            'state': 'RUNNING', 'labels': {}, 'host': 'guest'}


class TestForgedRegistrations(base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(database.MariaDBDatabase())
        self.useFixture(rpc_fixture.FakeTransport())
        # Longer than the test: no periodic look for key changes in it.
        self.flags(group='conductor', require_sealed=True,
                   instance_key_cache_time=3600)
        self.log = self.useFixture(fixtures.FakeLogger(
            name=manager.__name__, level=logging.WARNING))
        self.context = context.get_admin_context()
        sealing_keys.add_key(self.context, INSTANCE)
        self.keys = sealing_keys.keyring(self.context, INSTANCE)
        self.manager = manager.ConductorManager()
        self.register(INSTANCE, self.seal(self.keys, INSTANCE))
        self.statements = []
        engine = db_common.get_engine()
        sa.event.listen(engine, 'before_cursor_execute', self._executed)
        self.addCleanup(sa.event.remove, engine, 'before_cursor_execute',
                        self._executed)

    def _executed(self, conn, cursor, statement, *args):
        self.statements.append(statement)

    @staticmethod
    def seal(keys, instance_id, now=None):
        return sealing.seal(keys, 'register_agent', '1.1',
                            sealing.TO_CONDUCTOR, _agent(instance_id),
                            now=now)

    def register(self, instance_id, sealed):
        self.manager.register_agent(self.context, sealed=sealed,
                                    **_agent(instance_id))

    def assertRefused(self, instance_id, sealed):
        error = self.assertRaises(dispatcher.ExpectedException,
                                  self.register, instance_id, sealed)
        self.assertIsInstance(error.exc_info[1],
                              exception.MessageNotAuthenticatedError)

    def forged_keys(self, instance_id):
        return sealing.InstanceKeys(
            instance_id, [(sealing.new_key_id(), sealing.generate_key())])

    def test_forged_registrations_cost_no_statement(self):
        for i in range(FORGED):
            instance_id = uuidutils.generate_uuid()
            kind = i % 4
            if kind == 0:
                sealed = None
            elif kind == 1:
                sealed = {'format': 1, 'garbage': 'x' * 100}
            elif kind == 2:
                # A genuine seal moved to a message of another instance.
                sealed = self.seal(self.keys, INSTANCE)
            else:
                sealed = self.seal(self.forged_keys(instance_id),
                                   instance_id, now=time.time() - 86400)
            self.assertRefused(instance_id, sealed)
        self.assertEqual([], self.statements)
        refusals = [line for line in self.log.output.splitlines()
                    if 'Refused register_agent message' in line]
        self.assertEqual(refusal_log.BURST, len(refusals))

    def test_forged_instances_evict_no_keys(self):
        # Well-formed fresh seals of random instances need their keys
        # looked up; the instances found without keys are kept apart.
        self.manager.keyrings = sealing_keys.KeyringCache(3600, maxsize=1)
        self.register(INSTANCE, self.seal(self.keys, INSTANCE))
        for _ in range(20):
            instance_id = uuidutils.generate_uuid()
            self.assertRefused(instance_id, self.seal(
                self.forged_keys(instance_id), instance_id))
        del self.statements[:]
        self.register(INSTANCE, self.seal(self.keys, INSTANCE))
        self.assertEqual([], [s for s in self.statements
                              if 'instance_keys' in s])
