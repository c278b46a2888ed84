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

"""``openstack database package create|list|show|set|delete|fleet``.

The calls go through the plugin's client
(``client_manager.guest_upgrade``), which knows every URL.
"""

from osc_lib.cli import format_columns
from osc_lib.command import command
from osc_lib import exceptions
from osc_lib import utils

from trove_upgrade.osc.v1 import output
from trove_upgrade import strategy_plugins

STATES = ('active', 'deprecated', 'retired')

LIST_COLUMNS = ('ID', 'Name', 'Version', 'State', 'Strategy', 'Location',
                'Min Upgrade From', 'Manifest Expires At')
FLEET_COLUMNS = ('Version', 'Running', 'Targeted', 'In Flight', 'Failed',
                 'Packages')

FORMATTERS = {
    'signer_key_ids': format_columns.ListColumn,
    'used_by': format_columns.ListColumn,
    'Packages': format_columns.ListDictColumn,
}


# The help of ``--package`` where an upgrade or a rollout takes one.
PACKAGE_HELP = ('A registered package, at the instance version, instead '
                'of --strategy and --location')


def _show(package):
    return output.show(package, FORMATTERS)


def add_expectation_arguments(parser):
    """``--expect-manifest-sha256`` and ``--expect-package``."""
    parser.add_argument(
        '--expect-manifest-sha256', metavar='<hex>', default=None,
        help='SHA-256 of the manifest file the agent must get '
             '(`trove-upgrade-package verify` prints it); a registered '
             'package sets it itself')
    parser.add_argument(
        '--expect-package', metavar='<name>', default=None,
        help='Package name the manifest must sign')


def expectation_from(parsed_args):
    """The body's ``expected_manifest``, or None when none is given."""
    sha256 = parsed_args.expect_manifest_sha256
    package = parsed_args.expect_package
    if sha256 is None and package is None:
        return None
    # The API checks them (400): the CLI loads nothing of the packaging.
    return {'sha256': sha256, 'package': package}


def check_deploy_source(parsed_args):
    """Either ``--package``, or ``--strategy`` and ``--location``.

    Refused here, before any request, with what to give instead: the API
    would refuse it too, but with the body's field names.
    """
    given = [option for option, value in (
        ('--strategy', parsed_args.strategy),
        ('--location', parsed_args.location)) if value is not None]
    if parsed_args.package is not None and given:
        raise exceptions.CommandError(
            '--package names a registered package, which gives the '
            'strategy and the location: do not also give %s.'
            % ' and '.join(given))
    if parsed_args.package is None and len(given) != 2:
        raise exceptions.CommandError(
            'Give either --package, or both --strategy and --location.')


class CreatePackage(command.ShowOne):
    """Register a package once the control plane verified its manifest."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('name', metavar='<name>',
                            help='Name of the package, e.g. '
                                 'trove-guestagent')
        parser.add_argument('--package-version', metavar='<version>',
                            required=True,
                            dest='package_version',
                            help='Version the signed manifest must carry')
        parser.add_argument('--strategy', metavar='<strategy>',
                            required=True,
                            help=strategy_plugins.HELP
                            % strategy_plugins.listing())
        parser.add_argument('--location', metavar='<location>',
                            required=True,
                            help='Where agents find the package; its '
                                 'manifest is <location>.manifest')
        return parser

    def take_action(self, parsed_args):
        client = self.app.client_manager.guest_upgrade
        return _show(client.create_package(
            parsed_args.name, parsed_args.package_version,
            parsed_args.strategy, parsed_args.location))


class ListPackages(command.Lister):
    """List registered packages by name, version, wildcard or range."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--name', metavar='<name>',
                            help='Only packages of this name')
        parser.add_argument('--package-version',
                            metavar='<version|wildcard|range>',
                            dest='package_version',
                            help='An exact version (26.0.0), a wildcard '
                                 '(26.*) or a range (">=25.1,<27")')
        parser.add_argument('--state', metavar='<state>', choices=STATES,
                            help='Only packages in this state')
        return parser

    def take_action(self, parsed_args):
        found = self.app.client_manager.guest_upgrade.list_packages(
            name=parsed_args.name, version=parsed_args.package_version,
            state=parsed_args.state)
        return LIST_COLUMNS, (utils.get_dict_properties(p, LIST_COLUMNS)
                              for p in found)


ShowPackage = output.show_command(
    'package', lambda client, item: client.get_package(item),
    "Show a package, its manifest's facts and what uses it.", FORMATTERS)


class SetPackage(command.ShowOne):
    """Deprecate, retire or reactivate a package."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        output.add_id(parser, 'package')
        parser.add_argument('--state', metavar='<state>', required=True,
                            choices=STATES,
                            help='New state: %s' % ', '.join(STATES))
        return parser

    def take_action(self, parsed_args):
        return _show(self.app.client_manager.guest_upgrade.set_package_state(
            parsed_args.package, parsed_args.state))


DeletePackage = output.delete_command(
    'package', 'delete_package',
    'Delete a package; refused while anything uses it.')


class ShowFleet(command.Lister):
    """Per version: agents running it, targeted at it, in flight, failed."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        output.add_paging_arguments(
            parser, 'versions', '<version>',
            'Start after this version (the last one of the previous page)')
        return parser

    def take_action(self, parsed_args):
        return output.rows(
            FLEET_COLUMNS, self.app.client_manager.guest_upgrade.package_fleet(
                limit=parsed_args.limit, marker=parsed_args.marker),
            FORMATTERS)
