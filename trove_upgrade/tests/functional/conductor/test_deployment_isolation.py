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

"""Two deployments on one RabbitMQ vhost never take each other's messages.

Each runs a real conductor process with its own control exchange and
database, and neither sets ``[conductor] topic``: the default topic, and
with it the queue's name, is derived from the exchange. Registrations sent
on each exchange must all be recorded by that exchange's conductor, and
none by the other's; with one queue name for both, RabbitMQ would have
handed about half of them to the wrong conductor.
"""

import os
import subprocess

import fixtures
from oslo_utils import uuidutils
import sqlalchemy as sa

from tools.testbed import conffile
from trove_upgrade.common import conductor_rpcapi as rpcapi
from trove_upgrade.common import context
from trove_upgrade.common import rpc
from trove_upgrade.tests import base
from trove_upgrade.tests.fixtures import database
from trove_upgrade.tests.functional.conductor import test_conductor_process
from trove_upgrade.tests.functional import rabbit

AGENT = dict(agent_version='1.0.0', guest_version='1.0.0',
             rpc_api_version='1.1', state='running', labels={},
             host='agent-host')
PER_DEPLOYMENT = 8


class TestTwoDeploymentsOnOneVhost(base.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.rabbit = self.useFixture(rabbit.RabbitMQ())
        # The default, exchange-derived topic is what is tested.
        self.conf.clear_override('topic', group='conductor')
        self.deployments = {name: self.start_deployment(name)
                            for name in ('one', 'two')}

    def start_deployment(self, name):
        exchange = '%s_%s' % (self.rabbit.exchange, name)
        directory = os.path.join(self.tmp, name)
        os.makedirs(directory)
        path = os.path.join(directory, 'trove_upgrade.sqlite')
        with open(path, 'wb') as f:
            f.write(database._migrated_database())
        url = 'sqlite:///' + path
        options = {k: v for k, v in self.rabbit.options.items()
                   if k != 'conductor'}
        options['DEFAULT'] = dict(options['DEFAULT'],
                                  control_exchange=exchange,
                                  state_path=directory, debug='true')
        options['database'] = {'connection': url}
        # Isolation is tested here, not sealing.
        options['conductor'] = {'require_sealed': 'false'}
        config = os.path.join(directory, 'trove-upgrade.conf')
        conffile.write_conf(config, options)
        log_path = os.path.join(directory, 'conductor.log')
        with open(log_path, 'wb') as log:
            process = subprocess.Popen(
                [test_conductor_process.CONDUCTOR, '--config-file', config],
                stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True)
        self.addCleanup(test_conductor_process.ConductorProcessTestCase
                        .stop_conductor, process)

        def read_log():
            with open(log_path) as f:
                return f.read()

        test_conductor_process.wait_until(
            lambda: (process.poll() is not None
                     or test_conductor_process.READY in read_log()),
            'conductor %s to listen' % name)
        self.assertIsNone(process.poll(), read_log())
        self.assertIn('listening on topic %s.trove_upgrade_conductor'
                      % exchange, read_log())
        return exchange, url

    def test_each_conductor_records_only_its_deployment(self):
        sent = {}
        for name, (exchange, _url) in self.deployments.items():
            self.flags(control_exchange=exchange)
            rpc.cleanup()
            self.assertEqual('%s.trove_upgrade_conductor' % exchange,
                             rpcapi.topic())
            api = rpcapi.ConductorAPI()
            sent[name] = sorted(uuidutils.generate_uuid()
                                for _ in range(PER_DEPLOYMENT))
            for instance_id in sent[name]:
                # A call: it returns once a conductor recorded it.
                self.assertEqual('1.4', api.register_agent(
                    context.get_admin_context(), instance_id=instance_id,
                    **AGENT))
        rpc.cleanup()
        for name, (_exchange, url) in self.deployments.items():
            engine = sa.create_engine(url)
            self.addCleanup(engine.dispose)
            with engine.connect() as connection:
                recorded = sorted(connection.scalars(
                    sa.text('SELECT instance_id FROM agents')))
            self.assertEqual(sent[name], recorded, name)

    def test_default_exchange_keeps_the_historic_topic(self):
        self.flags(control_exchange=rpc.DEFAULT_EXCHANGE)
        rpc.cleanup()
        self.assertEqual('trove_upgrade_conductor', rpcapi.topic())
        self.flags(group='conductor', topic='explicit')
        self.assertEqual('explicit', rpcapi.topic())
