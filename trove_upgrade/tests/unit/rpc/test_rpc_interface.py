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
from trove_upgrade.conductor import agent_rpcapi
from trove_upgrade.conductor import manager as conductor_manager
from trove_upgrade.conductor import rpcapi as conductor_rpcapi
from trove_upgrade import rpc_interface
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
