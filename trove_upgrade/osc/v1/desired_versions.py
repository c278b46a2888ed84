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

"""``openstack database desired version ...`` and ``database target list``.

A desired version is a standing declaration (see
``trove_upgrade.services.desired_versions``); the targets are what each
instance is headed for, by which owner and why. The calls go through the
plugin's client (``client_manager.guest_upgrade``), which knows every URL.
"""

from osc_lib.cli import format_columns
from osc_lib.command import command
from osc_lib import exceptions

from trove_upgrade.osc.v1 import output
from trove_upgrade.osc.v1 import rollouts

STATUSES = ('ACTIVE', 'PAUSED')

LIST_COLUMNS = ('ID', 'Name', 'Package Name', 'Version', 'Status',
                'Created At')
LONG_COLUMNS = LIST_COLUMNS + ('Selector', 'Canary', 'Max In Flight',
                               'Max Failures', 'Status Detail',
                               'Updated At')
TARGET_COLUMNS = ('Instance ID', 'Running Version', 'Version', 'Owner',
                  'Reason')
TARGET_LONG_COLUMNS = TARGET_COLUMNS + ('Shadowed',)

FORMATTERS = dict(rollouts.FORMATTERS, **{
    'events': format_columns.ListDictColumn,
    'Owner': format_columns.DictColumn,
    'Shadowed': format_columns.ListDictColumn,
})

# What a desired version's create help says it defaults to (the API's).
_DEFAULTS = {'canary': 1, 'max_in_flight': 1, 'max_failures': 0,
             'per_agent_retries': 1, 'agent_deadline': 3600}


def _show(desired):
    return output.show(desired, FORMATTERS)


class CreateDesiredVersion(command.ShowOne):
    """Declare the version a selection of agents runs, and keep it so."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('name', metavar='<name>',
                            help='Name of the desired version')
        parser.add_argument('--package', metavar='<name>', required=True,
                            help='A registered package')
        parser.add_argument('--package-version', metavar='<version>',
                            required=True, dest='package_version',
                            help='Its version the agents should run')
        rollouts.add_selector_arguments(parser)
        rollouts.add_threshold_arguments(parser, _DEFAULTS)
        return parser

    def take_action(self, parsed_args):
        body = dict(rollouts.thresholds_from(parsed_args),
                    name=parsed_args.name, package=parsed_args.package,
                    version=parsed_args.package_version,
                    selector=rollouts.selector_from(parsed_args))
        client = self.app.client_manager.guest_upgrade
        return _show(client.create_desired_version(body))


class ListDesiredVersions(command.Lister):
    """List desired versions, oldest (first in precedence) first."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--status', metavar='<status>', type=str.upper,
                            choices=STATUSES,
                            help='Only desired versions in this status '
                                 '(%s)' % ', '.join(STATUSES))
        parser.add_argument('--name', metavar='<name>',
                            help='Only desired versions of this name')
        parser.add_argument('--long', action='store_true',
                            help='Also show selector, thresholds and '
                                 'detail')
        return parser

    def take_action(self, parsed_args):
        found = self.app.client_manager.guest_upgrade.list_desired_versions(
            status=parsed_args.status, name=parsed_args.name)
        names = LONG_COLUMNS if parsed_args.long else LIST_COLUMNS
        return output.rows(names, found, FORMATTERS)


ShowDesiredVersion = output.show_command(
    'desired_version', lambda client, item: client.get_desired_version(item),
    'Show a desired version with its counters, agents and events.',
    FORMATTERS)


class SetDesiredVersion(command.ShowOne):
    """Change the version or the thresholds of a desired version."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        output.add_id(parser, 'desired_version')
        parser.add_argument('--package-version', metavar='<version>',
                            dest='package_version',
                            help='New version of its package; its failures '
                                 'start again from zero')
        rollouts.add_threshold_arguments(parser)
        return parser

    def take_action(self, parsed_args):
        body = rollouts.thresholds_from(parsed_args)
        if parsed_args.package_version is not None:
            body['version'] = parsed_args.package_version
        if not body:
            raise exceptions.CommandError(
                'Nothing to change: give --package-version or a threshold '
                '(--canary, --max-in-flight, --max-failures, '
                '--per-agent-retries, --agent-deadline).')
        client = self.app.client_manager.guest_upgrade
        return _show(client.update_desired_version(
            parsed_args.desired_version, body))


def _action(action, doc):
    return output.action_command('desired_version', 'act_on_desired_version',
                                 action, doc, FORMATTERS)


PauseDesiredVersion = _action(
    'pause', 'Pause a desired version: nothing new is dispatched.')
ResumeDesiredVersion = _action(
    'resume', 'Resume a paused desired version, acknowledging its '
              'failures.')


DeleteDesiredVersion = output.delete_command(
    'desired_version', 'delete_desired_version',
    'Delete a desired version; its unstarted upgrades are cancelled.')


class ListTargets(command.Lister):
    """Each selected instance's target version, its owner and why."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--instance', metavar='<instance>',
                            help='Only this instance ID')
        output.add_paging_arguments(
            parser, 'instances', '<instance>',
            'Start after this instance ID (the last one of the previous '
            'page)')
        parser.add_argument('--long', action='store_true',
                            help='Also show the owners it shadows')
        return parser

    def take_action(self, parsed_args):
        found = self.app.client_manager.guest_upgrade.list_targets(
            instance_id=parsed_args.instance, limit=parsed_args.limit,
            marker=parsed_args.marker)
        names = TARGET_LONG_COLUMNS if parsed_args.long else TARGET_COLUMNS
        return output.rows(names, found, FORMATTERS)
