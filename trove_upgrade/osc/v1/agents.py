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

"""``openstack database agent list|show|delete``: what the fleet reports."""

from osc_lib.cli import format_columns
from osc_lib.command import command
from osc_lib import utils

from trove_upgrade.osc.v1 import batch
from trove_upgrade.osc.v1 import output

LIST_COLUMNS = ('Instance ID', 'Agent Version', 'Guest Version',
                'RPC API Version', 'State', 'Reachable', 'Last Heartbeat')
LONG_COLUMNS = LIST_COLUMNS + ('Host', 'Labels')

# Hypermedia for programs, not for people.
HIDDEN_FIELDS = ('links',)


class ListAgents(command.Lister):
    """List the registered upgrade agents."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument(
            '--guest-version', metavar='<version>',
            help='Only agents whose guest runs this version')
        parser.add_argument(
            '--state', metavar='<state>',
            help='Only agents that report this state')
        parser.add_argument(
            '--rpc-api-version', metavar='<x.y>',
            help='Only agents that speak this RPC API version')
        output.add_paging_arguments(
            parser, 'agents', '<instance>',
            'Start after this instance ID (the last one of the previous '
            'page)')
        parser.add_argument(
            '--long', action='store_true',
            help='Also show the host and the labels of each agent')
        return parser

    def take_action(self, parsed_args):
        agents = self.app.client_manager.guest_upgrade.list_agents(
            guest_version=parsed_args.guest_version,
            state=parsed_args.state,
            rpc_api_version=parsed_args.rpc_api_version,
            limit=parsed_args.limit, marker=parsed_args.marker)
        names = LONG_COLUMNS if parsed_args.long else LIST_COLUMNS
        return names, (
            utils.get_dict_properties(
                a, names, formatters={'Labels': format_columns.DictColumn})
            for a in agents)


class ShowAgent(command.ShowOne):
    """Show the upgrade agent of one instance."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('instance', metavar='<instance>',
                            help='ID of the database instance')
        return parser

    def take_action(self, parsed_args):
        agent = self.app.client_manager.guest_upgrade.get_agent(
            parsed_args.instance)
        names = sorted(set(agent) - set(HIDDEN_FIELDS))
        return names, utils.get_dict_properties(
            agent, names, formatters={'labels': format_columns.DictColumn})


class DeleteAgent(command.Command):
    """Delete the agents of deleted instances, so rollouts skip them."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('instances', metavar='<instance>', nargs='+',
                            help='ID of a database instance whose agent to '
                                 'delete')
        return parser

    def take_action(self, parsed_args):
        batch.for_each(
            parsed_args.instances,
            self.app.client_manager.guest_upgrade.delete_agent,
            'Failed to delete the agent of instance %s: %s',
            '%d of %d agents could not be deleted.')
