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

"""The control plane seals upgrades for instances that have a key."""

import base64
import os
import threading
from unittest import mock

import oslo_messaging as messaging

from trove_upgrade.common import context
from trove_upgrade.common import exception
from trove_upgrade.common import rpc_interface
from trove_upgrade.common import sealing
from trove_upgrade.services import agent_rpcapi as rpcapi
from trove_upgrade.services import sealing_keys
from trove_upgrade.tests import base
from trove_upgrade.tests.fixtures import database
from trove_upgrade.tests.fixtures import rpc as rpc_fixture

INSTANCE = '9e2f7a4c-1b3d-4c5e-8f6a-7b8c9d0e1f2a'
OTHER = '1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f'
THIRD = '2d3e4f5a-6b7c-4d8e-9f0a-1b2c3d4e5f6a'
ARGS = dict(upgrade_id='u1', instance_version='2.0.0', strategy='local',
            location='/p/g.pkg', metadata={'a': 1}, allow_downgrade=False)


class TestSealedUpgrade(base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(database.Database())
        self.useFixture(rpc_fixture.FakeTransport())
        self.context = context.get_admin_context()
        self.endpoint = rpc_fixture.AgentEndpoint('1.1')
        self.server = self.useFixture(rpc_fixture.RecordingServer(
            messaging.Target(topic=rpc_interface.agent_topic(INSTANCE),
                             server='g'),
            [self.endpoint]))

    def send(self):
        rpcapi.AgentAPI().upgrade(self.context, INSTANCE, **ARGS)

    def test_without_key_unsealed_at_1_0(self):
        self.send()
        [message] = self.server.wait_for(1)
        self.assertEqual('1.0', message.version)
        self.assertNotIn('sealed', message.args)

    def test_with_key_sealed_at_1_1(self):
        sealing_keys.add_key(self.context, INSTANCE)
        self.send()
        [message] = self.server.wait_for(1)
        self.assertEqual('1.1', message.version)
        args = dict(message.args)
        sealed = args.pop('sealed')
        sealing.open_sealed(
            sealing_keys.keyring(self.context, INSTANCE), sealed,
            'upgrade', sealing.TO_AGENT, args, 60,
            sealing.MemoryReplayCache())

    def test_with_key_capped_below_1_1_refused(self):
        sealing_keys.add_key(self.context, INSTANCE)
        self.flags(group='upgrade_levels', agent='1.0')
        e = self.assertRaises(exception.SealingUnavailableError, self.send)
        self.assertIn('capped below 1.1', str(e))

    def test_an_expectation_goes_sealed_at_1_2_with_its_binding(self):
        self.endpoint.target = messaging.Target(version='1.2')
        sealing_keys.add_key(self.context, INSTANCE)
        expected = {'sha256': 'ab' * 32, 'package': None}
        rpcapi.AgentAPI().upgrade(self.context, INSTANCE,
                                  expected_manifest=expected, **ARGS)
        [message] = self.server.wait_for(1)
        self.assertEqual('1.2', message.version)
        args = dict(message.args)
        sealed = args.pop('sealed')
        self.assertEqual(('1.2', expected),
                         (sealed['version'], args['expected_manifest']))
        sealing.open_sealed(
            sealing_keys.keyring(self.context, INSTANCE), sealed,
            'upgrade', sealing.TO_AGENT, args, 60,
            sealing.MemoryReplayCache())

    def test_an_expectation_is_never_dropped_under_a_cap(self):
        for key in (False, True):
            if key:
                sealing_keys.add_key(self.context, INSTANCE)
            self.flags(group='upgrade_levels', agent='1.1')
            e = self.assertRaises(
                exception.ArgumentNeedsNewerVersionError,
                rpcapi.AgentAPI().upgrade, self.context, INSTANCE,
                expected_manifest={'sha256': None, 'package': 'p'}, **ARGS)
            self.assertIn('expected_manifest', str(e))
        # Without one, the capped upgrade goes as before.
        self.send()
        [message] = self.server.wait_for(1)
        self.assertEqual('1.1', message.version)

    def test_a_component_goes_sealed_at_1_3_and_never_below(self):
        self.endpoint.target = messaging.Target(version='1.3')
        sealing_keys.add_key(self.context, INSTANCE)
        self.flags(group='upgrade_levels', agent='1.2')
        e = self.assertRaises(
            exception.ArgumentNeedsNewerVersionError,
            rpcapi.AgentAPI().upgrade,
            self.context, INSTANCE,
            component=rpc_interface.UPGRADE_AGENT, **ARGS)
        self.assertIn('component', str(e))
        self.flags(group='upgrade_levels', agent='latest')
        rpcapi.AgentAPI().upgrade(self.context, INSTANCE,
                                  component=rpc_interface.UPGRADE_AGENT,
                                  **ARGS)
        [message] = self.server.wait_for(1)
        self.assertEqual('1.3', message.version)
        args = dict(message.args)
        sealed = args.pop('sealed')
        self.assertEqual(rpc_interface.UPGRADE_AGENT, args['component'])
        sealing.open_sealed(
            sealing_keys.keyring(self.context, INSTANCE), sealed,
            'upgrade', sealing.TO_AGENT, args, 60,
            sealing.MemoryReplayCache())

    def test_require_sealed_without_key_refused(self):
        self.flags(group='conductor', require_sealed=True)
        e = self.assertRaises(exception.SealingUnavailableError, self.send)
        self.assertIn('no key', str(e))

    def test_keys_encrypted_at_rest(self):
        key = base64.b64encode(sealing.generate_key()).decode()
        path = self.create_tempfiles([('master', key)])[0]
        self.flags(group='conductor', instance_key_master_key_file=path)
        sealing_keys.add_key(self.context, INSTANCE)
        self.send()
        self.server.wait_for(1)
        self.flags(group='conductor', instance_key_master_key_file=None)
        e = self.assertRaises(exception.InstanceKeyError, self.send)
        self.assertIn('encrypted', str(e))


class TestUpgradeMany(base.TestCase):
    """The reconciler's batch: each upgrade as ``upgrade`` would send it."""

    def setUp(self):
        super().setUp()
        self.useFixture(database.Database())
        self.useFixture(rpc_fixture.FakeTransport())
        self.context = context.get_admin_context()
        self.keyed, self.plain, self.other = INSTANCE, OTHER, THIRD
        sealing_keys.add_key(self.context, self.keyed)
        self.servers = {}
        for instance_id in (self.keyed, self.plain, self.other):
            self.servers[instance_id] = self.useFixture(
                rpc_fixture.RecordingServer(
                    messaging.Target(
                        topic=rpc_interface.agent_topic(instance_id),
                        server='g'),
                    [rpc_fixture.AgentEndpoint('1.1')]))

    def upgrades(self, *instance_ids):
        return [dict(ARGS, id='u-%d' % n, instance_id=instance_id)
                for n, instance_id in enumerate(instance_ids)]

    def test_each_sent_sealed_as_its_instance_requires(self):
        failed = rpcapi.AgentAPI().upgrade_many(
            self.context, self.upgrades(self.keyed, self.plain), threads=4)
        self.assertEqual({}, failed)
        [sealed] = self.servers[self.keyed].wait_for(1)
        self.assertEqual(('1.1', 'u-0'), (sealed.version,
                                          sealed.args['upgrade_id']))
        args = dict(sealed.args)
        sealing.open_sealed(
            sealing_keys.keyring(self.context, self.keyed),
            args.pop('sealed'), 'upgrade', sealing.TO_AGENT, args, 60,
            sealing.MemoryReplayCache())
        [plain] = self.servers[self.plain].wait_for(1)
        self.assertEqual(('1.0', 'u-1'), (plain.version,
                                          plain.args['upgrade_id']))
        self.assertNotIn('sealed', plain.args)
        # The context, serialized once for the batch, reaches each agent.
        for message in (sealed, plain):
            self.assertEqual(self.context.request_id,
                             message.context['request_id'])
            self.assertTrue(message.context['is_admin'])

    def test_one_refused_does_not_stop_the_others(self):
        self.flags(group='upgrade_levels', agent='1.0')
        failed = rpcapi.AgentAPI().upgrade_many(
            self.context, self.upgrades(self.plain, self.keyed, self.other))
        self.assertEqual(['u-1'], list(failed))
        self.assertIsInstance(failed['u-1'], exception.SealingUnavailableError)
        self.assertEqual(['u-0'], [m.args['upgrade_id'] for m in
                                   self.servers[self.plain].wait_for(1)])
        self.assertEqual(['u-2'], [m.args['upgrade_id'] for m in
                                   self.servers[self.other].wait_for(1)])

    def test_threads_share_the_batch_each_sent_once(self):
        self.flags(group='upgrade_levels', agent='1.0')
        failed = rpcapi.AgentAPI().upgrade_many(
            self.context, self.upgrades(self.plain, self.keyed, self.other,
                                        self.plain), threads=3)
        self.assertEqual(['u-1'], list(failed))
        plain = self.servers[self.plain].wait_for(2)
        self.assertEqual(['u-0', 'u-3'],
                         sorted(m.args['upgrade_id'] for m in plain))
        self.assertEqual(['u-2'], [m.args['upgrade_id'] for m in
                                   self.servers[self.other].wait_for(1)])

    def test_the_send_threads_are_kept_for_the_next_batch(self):
        """Starting them anew for each batch cost more CPU than the casts.

        A client asked for another number of threads starts that many, a
        forked process its own.
        """
        self.flags(group='upgrade_levels', agent='1.0')
        api = rpcapi.AgentAPI()
        senders = []
        cast = api._cast_upgrade_of
        together = None

        def recording(*args):
            # Every thread casts at once: each share has one of them.
            together.wait(10)
            senders.append(threading.current_thread())
            return cast(*args)

        def batch(count, threads):
            nonlocal together
            together = threading.Barrier(threads)
            del senders[:]
            self.assertEqual({}, api.upgrade_many(
                self.context, self.upgrades(*[self.plain] * count),
                threads=threads))
            self.assertEqual(count, len(senders))
            return set(senders)

        with mock.patch.object(api, '_cast_upgrade_of', recording):
            first = batch(6, 3)
            self.assertEqual(3, len(first))
            self.assertNotIn(threading.current_thread(), first)
            self.assertEqual(first, batch(6, 3))
            other = batch(4, 2)
            # A forked child's copy of the pool has no threads.
            with mock.patch.object(rpcapi.os, 'getpid',
                                   return_value=os.getpid() + 1):
                forked = batch(4, 2)
        self.assertEqual(2, len(other))
        self.assertTrue(other.isdisjoint(first))
        self.assertTrue(forked.isdisjoint(other))

    def test_nothing_to_send(self):
        self.assertEqual({}, rpcapi.AgentAPI().upgrade_many(
            self.context, [], threads=8))

    def test_keys_unreadable_fail_every_upgrade(self):
        path = self.create_tempfiles([('master', base64.b64encode(
            sealing.generate_key()).decode())])[0]
        self.flags(group='conductor', instance_key_master_key_file=path)
        sealing_keys.add_key(self.context, self.other)
        self.flags(group='conductor', instance_key_master_key_file=None)
        failed = rpcapi.AgentAPI().upgrade_many(
            self.context, self.upgrades(self.plain, self.other))
        self.assertEqual(['u-0', 'u-1'], sorted(failed))
        for error in failed.values():
            self.assertIsInstance(error, exception.InstanceKeyError)
