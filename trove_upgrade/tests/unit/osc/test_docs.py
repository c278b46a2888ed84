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

"""The CLI reference names every command and every option it has."""

import importlib.metadata
import os
import re

from trove_upgrade.tests import base

GROUP = 'openstack.guest_upgrade.v1'
REFERENCE = os.path.join(os.path.dirname(__file__), '..', '..', '..', '..',
                         'doc', 'source', 'cli',
                         'openstack-database-upgrade.rst')


def _own_options(command_class, name):
    """Option strings a command adds to those of its base class."""
    command = command_class(None, None)
    parser = command.get_parser('openstack ' + name)
    inherited = command_class.__mro__[1].get_parser(command, 'base')
    known = {s for a in inherited._actions for s in a.option_strings}
    return {s for a in parser._actions for s in a.option_strings
            if s.startswith('--')} - known


class TestCLIReference(base.TestCase):

    def test_every_command_and_option_is_documented(self):
        with open(REFERENCE) as f:
            reference = f.read()
        entry_points = importlib.metadata.entry_points(group=GROUP)
        self.assertIn('database_upgrade_create', entry_points.names)
        for entry_point in entry_points:
            name = entry_point.name.replace('_', ' ')
            self.assertTrue('\nopenstack %s\n' % name in reference,
                            'no section for openstack %s' % name)
            for option in _own_options(entry_point.load(), name):
                described = re.search(r'\n(``[^\n]*``, )*``%s[ `]' % option,
                                      reference)
                self.assertTrue(described, '%s of openstack %s is not '
                                           'described' % (option, name))
