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


def rows(names, items, formatters):
    """(column names, rows) of a Lister command."""
    return names, (utils.get_dict_properties(item, names,
                                             formatters=formatters)
                   for item in items)


def add_id(parser, noun):
    """The positional ID of one object, ``noun`` as the client names it."""
    parser.add_argument(noun, metavar='<%s>' % noun.replace('_', '-'),
                        help='ID of the %s' % noun.replace('_', ' '))


def add_paging_arguments(parser, what, marker_metavar, marker_help):
    """``--limit`` and ``--marker`` of a list the client pages through."""
    parser.add_argument('--limit', metavar='<limit>', type=int,
                        help='At most this many %s (default: all)' % what)
    parser.add_argument('--marker', metavar=marker_metavar,
                        help=marker_help)


def _by_id(base, noun, doc, act):
    """A command of ``base`` on one object by ID: ``act(client, id)``."""
    class ById(base):
        __doc__ = doc

        def get_parser(self, prog_name):
            parser = super().get_parser(prog_name)
            add_id(parser, noun)
            return parser

        def take_action(self, parsed_args):
            return act(self.app.client_manager.guest_upgrade,
                       getattr(parsed_args, noun))
    return ById


def show_command(noun, call, doc, formatters):
    """A ShowOne command on one object by ID.

    ``call(client, id)`` returns the object to show; ``noun`` names the
    positional argument (``package``, ``desired_version``).
    """
    return _by_id(command.ShowOne, noun, doc,
                  lambda client, item: show(call(client, item), formatters))


def action_command(noun, act, action, doc, formatters):
    """A ShowOne command that POSTs ``action`` on one object by ID.

    ``act`` names the client method taking the ID and the action.
    """
    return show_command(
        noun, lambda client, item: getattr(client, act)(item, action), doc,
        formatters)


def delete_command(noun, delete, doc):
    """A command deleting one object by ID with the client's ``delete``."""
    return _by_id(command.Command, noun, doc,
                  lambda client, item: getattr(client, delete)(item))
