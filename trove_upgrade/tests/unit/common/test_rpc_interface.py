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

"""Clients and endpoints of both RPC APIs take what rpc_interface declares.

A client that sends an argument its endpoint does not take, or seals a
different set than the endpoint opens, would only show at run time as a
TypeError or a seal failure on the other side of the bus.
"""

import inspect

from trove_upgrade.agent import manager as agent_manager
from trove_upgrade.common import conductor_rpcapi as conductor_rpcapi
from trove_upgrade.common import exception
from trove_upgrade.common import release_mappings
from trove_upgrade.common import rpc_interface
from trove_upgrade.conductor import manager as conductor_manager
from trove_upgrade.services import agent_rpcapi
from trove_upgrade.tests import base

# (interface, client class, endpoint class)
APIS = (
    (rpc_interface.AGENT, agent_rpcapi.AgentAPI, agent_manager.AgentManager),
    (rpc_interface.CONDUCTOR, conductor_rpcapi.ConductorAPI,
     conductor_manager.ConductorManager),
)


def _parameters(func, leave_out):
    return tuple(name for name in inspect.signature(func).parameters
                 if name not in leave_out)


def _public_methods(cls):
    return {name for name, value in vars(cls).items()
            if inspect.isfunction(value) and not name.startswith('_')}


class TestDeclarations(base.TestCase):

    def test_clients_take_the_declared_arguments(self):
        # Messages carry keyword arguments: a client may order its
        # parameters as suits its callers.
        for interface, client, _ in APIS:
            for method in interface.methods:
                self.assertEqual(
                    sorted(interface.arguments(method)),
                    sorted(_parameters(getattr(client, method),
                                       ('self', 'context'))),
                    '%s.%s' % (client.__name__, method))

    def test_every_declared_method_has_a_checked_endpoint(self):
        # ``Interface.endpoint`` checked these when the managers were
        # imported; a method served without it would go unchecked.
        for interface, _, endpoint in APIS:
            self.assertEqual(set(interface.methods), set(interface.served))
            for method, func in interface.served.items():
                self.assertEqual('%s.%s' % (endpoint.__name__, method),
                                 func.__qualname__)
                self.assertEqual(
                    interface.arguments(method),
                    _parameters(func, ('self', 'context', 'sealed')))
                self.assertIsNone(inspect.signature(func).parameters[
                    'sealed'].default, method)

    def test_versions_of_arguments_are_versions_of_the_apis(self):
        # An argument added in a version the API never had (or has not
        # yet) could be sent to no server.
        for interface, client, endpoint in APIS:
            for name, method in interface.methods.items():
                for version, _ in method.versions:
                    self.assertLessEqual(
                        release_mappings.version_key(version),
                        release_mappings.version_key(
                            client.RPC_API_VERSION), name)

    def test_every_served_method_is_declared(self):
        # A method served but not declared could not be sealed.
        for interface, _, endpoint in APIS:
            self.assertEqual(set(interface.methods),
                             _public_methods(endpoint) - {'run_next'},
                             endpoint.__name__)

    def test_kinds_are_call_or_cast(self):
        for interface, _, _ in APIS:
            for method in interface.methods:
                kinds = interface.kinds(method)
                self.assertTrue(kinds, method)
                self.assertLessEqual(set(kinds), {'call', 'cast'}, method)
                self.assertEqual(kinds[0], interface.kind(method))


class TestInterface(base.TestCase):

    def setUp(self):
        super().setUp()
        self.interface = rpc_interface.Interface('test', {
            'ping': ('call', ('instance_id', 'count'))})

    def test_a_method_sent_either_way_defaults_to_the_first_kind(self):
        interface = rpc_interface.Interface('test', {
            'ping': (('call', 'cast'), ('instance_id',)),
            'pong': ('cast', ('instance_id',))})
        self.assertEqual(('call', 'cast'), interface.kinds('ping'))
        self.assertEqual('call', interface.kind('ping'))
        self.assertEqual(('cast',), interface.kinds('pong'))
        self.assertEqual('cast', interface.kind('pong'))

    def test_endpoint_with_the_declared_arguments_is_accepted(self):
        def ping(self, context, instance_id, count, sealed=None):
            pass
        self.assertIs(ping, self.interface.endpoint(ping))

    def test_endpoint_with_a_missing_argument_fails_at_import(self):
        def ping(self, context, instance_id, sealed=None):
            pass
        error = self.assertRaises(TypeError, self.interface.endpoint, ping)
        self.assertIn('takes instance_id but its messages carry '
                      'instance_id, count', str(error))

    def test_endpoint_with_an_extra_argument_fails_at_import(self):
        def ping(self, context, instance_id, count, colour, sealed=None):
            pass
        self.assertRaises(TypeError, self.interface.endpoint, ping)

    def test_endpoint_with_arguments_in_another_order_fails(self):
        def ping(self, context, count, instance_id, sealed=None):
            pass
        self.assertRaises(TypeError, self.interface.endpoint, ping)

    def test_undeclared_endpoint_fails(self):
        def pong(self, context, instance_id, count, sealed=None):
            pass
        self.assertRaises(KeyError, self.interface.endpoint, pong)

    def test_message_takes_exactly_the_declared_arguments(self):
        self.assertEqual(
            {'instance_id': 'i', 'count': 2},
            self.interface.message('ping', {
                'self': object(), 'context': None, 'instance_id': 'i',
                'count': 2, 'sealed': None}))

    def test_message_missing_an_argument_fails(self):
        self.assertRaises(KeyError, self.interface.message, 'ping',
                          {'instance_id': 'i'})


class TestArgumentsByVersion(base.TestCase):
    """Each version of a method carries its own arguments."""

    def setUp(self):
        super().setUp()
        self.interface = rpc_interface.Interface('test', {
            'ping': rpc_interface.Method(
                'cast', ('instance_id', 'count'),
                added={'1.4': ('colour',), '1.2': ('binding',)},
                binding=('binding',))})
        self.values = {'instance_id': 'i', 'count': 2, 'binding': None,
                       'colour': None, 'sealed': None}

    def test_arguments_of_each_version(self):
        args = self.interface.arguments
        self.assertEqual(('instance_id', 'count'), args('ping', '1.0'))
        self.assertEqual(('instance_id', 'count'), args('ping', '1.1'))
        self.assertEqual(('instance_id', 'count', 'binding'),
                         args('ping', '1.3'))
        self.assertEqual(('instance_id', 'count', 'binding', 'colour'),
                         args('ping', '1.10'))
        self.assertEqual(args('ping', '1.4'), args('ping'))

    def test_a_message_of_an_older_version_leaves_newer_arguments_out(self):
        values = dict(self.values, colour='red')
        self.assertEqual({'instance_id': 'i', 'count': 2, 'binding': None},
                         self.interface.message('ping', values, '1.2'))
        self.assertEqual({'instance_id': 'i', 'count': 2},
                         self.interface.message('ping', values, '1.0'))

    def test_a_binding_argument_with_a_value_is_never_left_out(self):
        values = dict(self.values, binding='x')
        e = self.assertRaises(exception.ArgumentNeedsNewerVersionError,
                              self.interface.message, 'ping', values, '1.1')
        self.assertIn('binding', str(e))
        self.assertIn('capped at 1.1', str(e))
        self.assertEqual('x', self.interface.message(
            'ping', values, '1.2')['binding'])

    def test_the_oldest_version_that_carries_the_values_is_sent(self):
        send = self.interface.version_to_send
        self.assertEqual('1.0', send('ping', self.values, '1.0', None))
        self.assertEqual('1.1', send('ping', self.values, '1.1', None))
        self.assertEqual('1.2', send('ping', dict(self.values, binding='x'),
                                     '1.0', None))
        self.assertEqual('1.4', send('ping', dict(self.values, colour='r'),
                                     '1.0', '1.9'))
        # Above the cap: at the cap, which message() then judges.
        self.assertEqual('1.3', send('ping', dict(self.values, colour='r'),
                                     '1.0', '1.3'))
        self.assertEqual('1.1', send('ping', dict(self.values, colour='r'),
                                     '1.1', '1.0'))

    def test_a_server_refuses_an_argument_its_version_does_not_have(self):
        # Nobody sealed it: an argument beside a seal of an older version.
        received = self.interface.received
        self.assertEqual({'instance_id': 'i', 'count': 2},
                         received('ping', self.values, '1.1'))
        e = self.assertRaises(
            exception.MalformedMessageError, received, 'ping',
            dict(self.values, binding='x'), '1.1')
        self.assertIn('binding came in a message of version 1.1', str(e))
        self.assertEqual('x', received('ping', dict(self.values, binding='x'),
                                       '1.2')['binding'])

    def test_an_endpoint_must_default_an_added_argument_to_none(self):
        def ping(self, context, instance_id, count, binding, colour=None,
                 sealed=None):
            pass
        e = self.assertRaises(TypeError, self.interface.endpoint, ping)
        self.assertIn('must default binding to None', str(e))

        def ping(self, context, instance_id, count, binding=None,
                 colour=None, sealed=None):
            pass
        self.assertIs(ping, self.interface.endpoint(ping))

    def test_only_an_added_argument_may_be_binding(self):
        self.assertRaises(ValueError, rpc_interface.Method, 'cast', ('a',),
                          binding=('a',))

    def test_a_method_newer_than_the_version_has_its_first_arguments(self):
        method = rpc_interface.Method('call', ('a',), since='1.2',
                                      added={'1.5': ('b',)})
        self.assertEqual(('a',), method.arguments('1.0'))
        self.assertEqual('1.2', method.oldest_version({'a': 1}, '1.0'))
        self.assertEqual('1.5', method.oldest_version({'b': 1}, '1.0'))

    def test_sealed_version(self):
        self.assertEqual('1.3', rpc_interface.sealed_version(
            {'version': '1.3'}))
        for sealed in (None, 'x', {}, {'version': 1.3},
                       {'version': '1.3.1'}):
            self.assertIsNone(rpc_interface.sealed_version(sealed))

    def test_declared_apis_bind_what_older_agents_could_not_check(self):
        self.assertEqual(('expected_manifest', 'component'),
                         rpc_interface.AGENT.methods['upgrade']
                         .added_since('1.1'))
        self.assertEqual(('component',),
                         rpc_interface.AGENT.methods['upgrade']
                         .added_since('1.2'))
        self.assertEqual({'expected_manifest', 'component'},
                         rpc_interface.AGENT.methods['upgrade'].binding)

    def test_component_is_not_sent_to_older_agents(self):
        upgrade = rpc_interface.AGENT
        values = dict(upgrade_id='u', instance_id='i', instance_version='2',
                      strategy='local', location='l', metadata={},
                      allow_downgrade=False, expected_manifest=None,
                      component=None)
        self.assertEqual('1.1', upgrade.version_to_send('upgrade', values,
                                                        '1.1', None))
        self.assertNotIn('component', upgrade.message('upgrade', values,
                                                      '1.2'))
        values['component'] = rpc_interface.UPGRADE_AGENT
        self.assertEqual('1.3', upgrade.version_to_send('upgrade', values,
                                                        '1.1', None))
        self.assertEqual(rpc_interface.UPGRADE_AGENT, upgrade.message(
            'upgrade', values, '1.3')['component'])
        self.assertRaises(exception.ArgumentNeedsNewerVersionError,
                          upgrade.message, 'upgrade', values, '1.2')
