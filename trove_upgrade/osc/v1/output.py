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

"""How the commands show one object, and the commands that act on one.

Every ShowOne command renders the API's object the same way: every field
but the hypermedia, in name order, through the command's formatters, so
that ``-f json`` gives the API's structures and a table gives lines.
"""

from osc_lib.command import command
from osc_lib import utils

# Hypermedia for programs, not for people.
HIDDEN_FIELDS = ('links',)


def show(item, formatters):
    """(column names, values) of one object for a ShowOne command."""
    names = sorted(set(item) - set(HIDDEN_FIELDS))
    return names, utils.get_dict_properties(item, names,
                                            formatters=formatters)


def action_command(noun, act, action, doc, formatters):
    """A ShowOne command that POSTs ``action`` on one object by ID.

    ``act`` names the client method taking the ID and the action;
    ``noun`` the positional argument (``rollout``, ``desired_version``).
    """
    class Action(command.ShowOne):
        __doc__ = doc

        def get_parser(self, prog_name):
            parser = super().get_parser(prog_name)
            parser.add_argument(noun, metavar='<%s>' % noun.replace('_', '-'),
                                help='ID of the %s' % noun.replace('_', ' '))
            return parser

        def take_action(self, parsed_args):
            act_on = getattr(self.app.client_manager.guest_upgrade, act)
            return show(act_on(getattr(parsed_args, noun), action),
                        formatters)
    return Action
