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

"""``openstack database upgrade create|list|show|cancel``."""

import argparse
import time

from cliff import columns
from osc_lib.cli import format_columns
from osc_lib.cli import parseractions
from osc_lib.command import command
from osc_lib import exceptions
from osc_lib import utils

from trove_upgrade.common import exception as package_exc
from trove_upgrade.common import states
from trove_upgrade.osc.v1 import batch
from trove_upgrade.osc.v1 import output
from trove_upgrade.osc.v1 import packages
from trove_upgrade import strategy_plugins

# Seconds between two looks at an upgrade under --wait.
WAIT_INTERVAL = 2

LIST_COLUMNS = ('ID', 'Instance ID', 'Instance Version', 'Strategy',
                'Status', 'Created At')
LONG_COLUMNS = LIST_COLUMNS + ('From Version', 'Status Detail', 'Location',
                               'Updated At')


def format_event(event):
    """One line of an upgrade's history."""
    line = '%s %s -> %s' % (event.get('created_at'),
                            event.get('from_state') or '-',
                            event.get('to_state'))
    if event.get('source'):
        line += ' (%s)' % event['source']
    if event.get('detail'):
        line += ': %s' % event['detail']
    return line


class EventsColumn(columns.FormattableColumn):
    """The event history: one line per state change, or the full list."""

    def human_readable(self):
        return '\n'.join(format_event(e) for e in self._value or [])

    def machine_readable(self):
        return [dict(e) for e in self._value or []]


FORMATTERS = {
    'metadata': format_columns.DictColumn,
    'events': EventsColumn,
}


def _show_upgrade(upgrade):
    return output.show(upgrade, FORMATTERS)


_STATE_NAMES = states.ORDER + tuple(sorted(states.FINAL_STATES))


def _state(value):
    state = value.upper()
    if state not in states.ALL_STATES:
        raise argparse.ArgumentTypeError(
            'unknown state %s; choose from %s' % (
                package_exc.quoted(value), ', '.join(_STATE_NAMES)))
    return state


class CreateUpgrade(command.ShowOne):
    """Upgrade the guest agent of a database instance."""

    _final = None

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument(
            'instance', metavar='<instance>',
            help='ID of the database instance whose guest agent to upgrade')
        parser.add_argument(
            '--instance-version', metavar='<version>', required=True,
            help='Guest agent version to install, e.g. v1.0.1')
        parser.add_argument(
            '--strategy', metavar='<strategy>',
            help=strategy_plugins.HELP % strategy_plugins.listing()
            + ' (with --location, instead of --package)')
        parser.add_argument(
            '--location', metavar='<location>',
            help='Where the package is, in the strategy\'s terms: '
                 'swift://<container>/<object>, an https:// URL, a path on '
                 'the guest, or rsync://<host>/<module>/<path>')
        parser.add_argument(
            '--package', metavar='<name>', help=packages.PACKAGE_HELP)
        packages.add_expectation_arguments(parser)
        parser.add_argument(
            '--metadata', metavar='<key=value>', default=None,
            action=parseractions.KeyValueAction,
            help='Extra data for the agent (repeat for several pairs)')
        parser.add_argument(
            '--allow-downgrade', action='store_true', default=None,
            help='Accept a version older than the one installed')
        parser.add_argument(
            '--wait', action='store_true',
            help='Follow the upgrade until it ends, printing each stage '
                 'on stderr; exit non-zero unless it ends in SUCCESS')
        return parser

    def take_action(self, parsed_args):
        packages.check_deploy_source(parsed_args)
        client = self.app.client_manager.guest_upgrade
        upgrade = client.create_upgrade(
            parsed_args.instance, parsed_args.instance_version,
            parsed_args.strategy, parsed_args.location,
            metadata=parsed_args.metadata,
            allow_downgrade=parsed_args.allow_downgrade,
            package=parsed_args.package,
            expected_manifest=packages.expectation_from(parsed_args))
        if parsed_args.wait:
            upgrade = UpgradeProgress(client, self.app.stderr).follow(
                upgrade)
            self._final = upgrade
        return _show_upgrade(upgrade)

    def run(self, parsed_args):
        result = super().run(parsed_args)
        if self._final and self._final['status'] != states.SUCCESS:
            raise exceptions.CommandError(
                'Upgrade %s ended %s: %s' % (
                    self._final['id'], self._final['status'],
                    self._final.get('status_detail') or 'no detail given'))
        return result


class UpgradeProgress:
    """Polls an upgrade and prints each state change once, as it happens.

    The event history is the source, so a stage passed between two polls is
    still shown; an API without events would still show status changes.
    """

    def __init__(self, client, stream):
        self._client = client
        self._stream = stream
        self._printed = 0
        self._last_status = None

    def _print(self, line):
        self._stream.write(line + '\n')
        self._stream.flush()

    def _report(self, upgrade):
        events = upgrade.get('events')
        if events is not None:
            for event in events[self._printed:]:
                self._print(format_event(event))
            self._printed = max(self._printed, len(events))
        elif upgrade['status'] != self._last_status:
            detail = upgrade.get('status_detail')
            self._print(upgrade['status'] + (': %s' % detail if detail
                                             else ''))
        self._last_status = upgrade['status']

    def follow(self, upgrade):
        """Poll until a final state; return the final upgrade."""
        self._print('Waiting for upgrade %s of instance %s to %s' % (
            upgrade['id'], upgrade['instance_id'],
            upgrade['instance_version']))
        try:
            upgrade = self._client.get_upgrade(upgrade['id'])
            self._report(upgrade)
            while upgrade['status'] not in states.FINAL_STATES:
                time.sleep(WAIT_INTERVAL)
                upgrade = self._client.get_upgrade(upgrade['id'])
                self._report(upgrade)
        except KeyboardInterrupt:
            raise exceptions.CommandError(
                'Stopped waiting; upgrade %s is %s and goes on without '
                'the client.' % (upgrade['id'], upgrade['status']))
        return upgrade


class ListUpgrades(command.Lister):
    """List guest agent upgrades, newest first."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument(
            '--instance', metavar='<instance>',
            help='Only upgrades of this instance ID')
        parser.add_argument(
            '--status', metavar='<status>', type=_state,
            help='Only upgrades in this state (%s)' % ', '.join(_STATE_NAMES))
        parser.add_argument(
            '--instance-version', metavar='<version>',
            help='Only upgrades to this version')
        output.add_paging_arguments(
            parser, 'upgrades', '<upgrade>',
            'Start after this upgrade ID (the last one of the previous '
            'page)')
        parser.add_argument(
            '--long', action='store_true',
            help='Also show the previous version, status detail, location '
                 'and last update')
        return parser

    def take_action(self, parsed_args):
        client = self.app.client_manager.guest_upgrade
        upgrades = client.list_upgrades(
            instance_id=parsed_args.instance, status=parsed_args.status,
            instance_version=parsed_args.instance_version,
            limit=parsed_args.limit, marker=parsed_args.marker)
        names = LONG_COLUMNS if parsed_args.long else LIST_COLUMNS
        return names, (utils.get_dict_properties(u, names) for u in upgrades)


class ShowUpgrade(command.ShowOne):
    """Show an upgrade and its event history."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('upgrade', metavar='<upgrade>',
                            help='ID of the upgrade')
        return parser

    def take_action(self, parsed_args):
        client = self.app.client_manager.guest_upgrade
        return _show_upgrade(client.get_upgrade(parsed_args.upgrade))


class CancelUpgrade(command.Command):
    """Cancel upgrades that the agent has not started."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('upgrades', metavar='<upgrade>', nargs='+',
                            help='ID of an upgrade to cancel')
        return parser

    def take_action(self, parsed_args):
        batch.for_each(
            parsed_args.upgrades,
            self.app.client_manager.guest_upgrade.cancel_upgrade,
            'Failed to cancel upgrade %s: %s',
            '%d of %d upgrades could not be cancelled.')
