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

"""``openstack database rollout create|list|show|pause|resume|abort|delete``.

The calls go through the plugin's client
(``client_manager.guest_upgrade``), which knows every URL.
"""

import argparse
import math
import sys
import time

from cliff import columns
from osc_lib.cli import format_columns
from osc_lib.cli import parseractions
from osc_lib.command import command
from osc_lib import exceptions

from trove_upgrade.common import exception as package_exc
from trove_upgrade.common import rollout_states as rs
from trove_upgrade.osc.v1 import output
from trove_upgrade.osc.v1 import packages
from trove_upgrade import strategy_plugins

LIST_COLUMNS = ('ID', 'Name', 'Instance Version', 'Status', 'Created At')
LONG_COLUMNS = LIST_COLUMNS + ('Selector', 'Max In Flight', 'Max Failures',
                               'Status Detail', 'Finished At')

# The longest --interval and --timeout of ``show --wait``: a year.
MAX_WAIT = 366 * 86400


class SetsColumn(columns.FormattableColumn):
    """Trove's sets of a rollout's agents, a line each, in upgrade order."""

    def human_readable(self):
        return '\n'.join(
            '%s %s: %s' % (found['kind'], found['id'], ' -> '.join(
                '%s (%s, %s)' % (m['instance_id'], m['role'],
                                 m['state'] or 'not in this rollout')
                for m in found['members']))
            for found in self._value or [])

    def machine_readable(self):
        return self._value


FORMATTERS = {
    'selector': format_columns.DictColumn,
    'Selector': format_columns.DictColumn,
    'counters': format_columns.DictColumn,
    'agents': format_columns.ListDictColumn,
    'sets': SetsColumn,
}


def _threshold(value):
    """A count ("10") or a percent ("10%"), as the API takes them."""
    if value.endswith('%') and value[:-1].isdigit():
        return value
    if value.isdigit():
        return int(value)
    raise argparse.ArgumentTypeError(
        '%s is neither a count nor a percent like 10%%'
        % package_exc.quoted(value))


def _seconds(value):
    """A finite number of seconds, not negative, for ``show --wait``.

    NaN or infinity as --timeout waited forever, and as --interval (or a
    negative one) ended the wait in time.sleep's error.
    """
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not 0 <= seconds < MAX_WAIT:
        raise argparse.ArgumentTypeError(
            '%s is not a number of seconds from 0 to %d'
            % (package_exc.quoted(value), MAX_WAIT))
    return seconds


def _show(rollout):
    return output.show(rollout, FORMATTERS)


# The thresholds of rollouts and desired versions: (name, metavar, type,
# help). The help of a create command adds the default.
THRESHOLDS = (
    ('canary', '<count>', int, 'Agents upgraded first'),
    ('max_in_flight', '<count|percent%>', _threshold,
     'Upgrades in flight at once'),
    ('max_failures', '<count|percent%>', _threshold,
     'Failed agents tolerated; one more pauses it'),
    ('per_agent_retries', '<count>', int,
     'Retries of an agent\'s failed upgrade'),
    ('agent_deadline', '<seconds>', int,
     'Seconds an upgrade may take before it times out'),
)


def add_threshold_arguments(parser, defaults=None):
    """``--canary`` ... ``--agent-deadline``; ``defaults`` for the help."""
    for name, metavar, kind, text in THRESHOLDS:
        if defaults is not None:
            text += ' (default %s)' % defaults[name]
        parser.add_argument('--' + name.replace('_', '-'), metavar=metavar,
                            type=kind, dest=name, help=text)


def thresholds_from(parsed_args):
    """The thresholds given on the command line, as the API names them."""
    return {name: getattr(parsed_args, name) for name, *_ in THRESHOLDS
            if getattr(parsed_args, name) is not None}


def add_selector_arguments(parser):
    """``--group``, ``--label`` (repeated) or ``--instance``; and a zone."""
    selector = parser.add_mutually_exclusive_group()
    selector.add_argument('--group', metavar='<group>',
                          help='Agents whose "group" label is this')
    selector.add_argument('--label', metavar='<key=value>',
                          action=parseractions.KeyValueAction,
                          help='Agents with this label (repeat for '
                               'several, all must match)')
    selector.add_argument('--instance', metavar='<instance>',
                          action='append', dest='instances',
                          help='This instance\'s agent (repeat for '
                               'several)')
    parser.add_argument('--availability-zone', metavar='<zone>',
                        help='Only agents that report this availability '
                             'zone; alone, every agent in it')


def selector_from(parsed_args):
    """The API's selector from ``add_selector_arguments``' options."""
    if parsed_args.group:
        selector = {'group': parsed_args.group}
    elif parsed_args.label:
        selector = {'labels': parsed_args.label}
    elif parsed_args.instances:
        selector = {'instance_ids': parsed_args.instances}
    elif parsed_args.availability_zone is None:
        raise exceptions.CommandError(
            'Select agents with --group, --label, --instance or '
            '--availability-zone.')
    else:
        selector = {}
    if parsed_args.availability_zone is not None:
        selector['availability_zone'] = parsed_args.availability_zone
    return selector


def progress(rollout):
    """One line saying how far a rollout got."""
    counters = rollout.get('counters') or {}
    settled = sum(counters.get(s, 0) for s in rs.AGENT_SETTLED)
    line = ('%s: %d/%d settled (%d succeeded, %d current, %d failed), '
            '%d in flight' % (
                rollout['status'], settled, counters.get('targets', 0),
                counters.get('succeeded', 0), counters.get('current', 0),
                counters.get('failed', 0), counters.get('in_flight', 0)))
    if counters.get(rs.AGENT_HELD):
        line += ', %d held' % counters[rs.AGENT_HELD]
    return line


class CreateRollout(command.ShowOne):
    """Roll a guest agent version out to a group of agents."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('name', metavar='<name>',
                            help='Name of the rollout')
        parser.add_argument('--instance-version', metavar='<version>',
                            required=True,
                            dest='instance_version',
                            help='Guest agent version to roll out')
        parser.add_argument('--strategy', metavar='<strategy>',
                            help=strategy_plugins.HELP
                            % strategy_plugins.listing()
                            + ' (with --location, instead of --package)')
        parser.add_argument('--location', metavar='<location>',
                            help='Where the agents find the package')
        parser.add_argument('--package', metavar='<name>',
                            help=packages.PACKAGE_HELP)
        packages.add_expectation_arguments(parser)
        add_selector_arguments(parser)
        add_threshold_arguments(parser, {
            'canary': 1, 'max_in_flight': 1, 'max_failures': 0,
            'per_agent_retries': 0, 'agent_deadline': 3600})
        parser.add_argument('--start-at', metavar='<ISO 8601 time>',
                            help='Do not start before this time')
        parser.add_argument('--order-by-topology',
                            action=argparse.BooleanOptionalAction,
                            help='Follow Trove\'s replication sets and '
                                 'clusters: one member of a set at a time, '
                                 'replicas before their primary (default: '
                                 'follow them)')
        parser.add_argument('--hold-set-on-failure',
                            action=argparse.BooleanOptionalAction,
                            help='When a member of a set fails, upgrade '
                                 'none of the rest of its set (default: '
                                 'hold)')
        return parser

    def take_action(self, parsed_args):
        packages.check_deploy_source(parsed_args)
        body = dict(thresholds_from(parsed_args), name=parsed_args.name,
                    instance_version=parsed_args.instance_version,
                    selector=selector_from(parsed_args))
        for name in ('strategy', 'location', 'package', 'start_at',
                     'order_by_topology', 'hold_set_on_failure'):
            value = getattr(parsed_args, name)
            if value is not None:
                body[name] = value
        expected = packages.expectation_from(parsed_args)
        if expected is not None:
            body['expected_manifest'] = expected
        client = self.app.client_manager.guest_upgrade
        return _show(client.create_rollout(body))


class ListRollouts(command.Lister):
    """List rollouts, newest first."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--status', metavar='<status>',
                            type=str.upper,
                            choices=sorted(rs.ALL_STATES),
                            help='Only rollouts in this status')
        parser.add_argument('--name', metavar='<name>',
                            help='Only rollouts of this name')
        output.add_paging_arguments(parser, 'rollouts', '<rollout>',
                                    'Start after this rollout ID')
        parser.add_argument('--long', action='store_true',
                            help='Also show selector, thresholds and '
                                 'detail')
        return parser

    def take_action(self, parsed_args):
        found = self.app.client_manager.guest_upgrade.list_rollouts(
            status=parsed_args.status, name=parsed_args.name,
            limit=parsed_args.limit, marker=parsed_args.marker)
        names = LONG_COLUMNS if parsed_args.long else LIST_COLUMNS
        return output.rows(names, found, FORMATTERS)


class ShowRollout(command.ShowOne):
    """Show a rollout with its counters and each agent's state."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('rollout', metavar='<rollout>',
                            help='ID of the rollout')
        parser.add_argument('--wait', action='store_true',
                            help='Print progress until the rollout is '
                                 'no longer PENDING or RUNNING')
        parser.add_argument('--interval', metavar='<seconds>',
                            type=_seconds,
                            default=5.0,
                            help='Seconds between two looks under --wait '
                                 '(default 5)')
        parser.add_argument('--timeout', metavar='<seconds>',
                            type=_seconds,
                            default=86400.0,
                            help='Give up waiting after this long '
                                 '(default one day)')
        return parser

    def take_action(self, parsed_args):
        client = self.app.client_manager.guest_upgrade
        rollout = client.get_rollout(parsed_args.rollout)
        if parsed_args.wait:
            rollout = self._wait(client, rollout, parsed_args)
        return _show(rollout)

    @staticmethod
    def _wait(client, rollout, parsed_args):
        deadline = time.monotonic() + parsed_args.timeout
        last = None
        while True:
            line = progress(rollout)
            if line != last:
                sys.stderr.write(line + '\n')
                sys.stderr.flush()
                last = line
            if rollout['status'] not in (rs.PENDING, rs.RUNNING):
                return rollout
            if time.monotonic() >= deadline:
                raise exceptions.CommandError(
                    'Rollout %s is still %s after %s seconds.'
                    % (rollout['id'], rollout['status'],
                       parsed_args.timeout))
            time.sleep(parsed_args.interval)
            rollout = client.get_rollout(rollout['id'])


def _action(action, doc):
    return output.action_command('rollout', 'act_on_rollout', action, doc,
                                 FORMATTERS)


PauseRollout = _action('pause', 'Pause a rollout: nothing new is sent.')
ResumeRollout = _action('resume', 'Resume a paused rollout, acknowledging '
                                  'its failures.')
AbortRollout = _action('abort', 'Abort a rollout and cancel its unstarted '
                                'upgrades.')


DeleteRollout = output.delete_command(
    'rollout', 'delete_rollout',
    'Delete a completed or aborted rollout; its upgrades stay.')
