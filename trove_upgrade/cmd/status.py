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

"""trove-upgrade-status: is this deployment ready and healthy?

``trove-upgrade-status --config-file FILE upgrade check`` runs each check
below against the services' own configuration and prints a table (or
``--json``). The exit code is the worst result: 0 success, 1 warning,
2 failure, as oslo.upgradecheck defines. A check never ends the command in
a traceback: a database that refuses the password, cannot be reached or
cannot even be named is that check's failure, and an error no check
expected is reported as the failure of the check it broke (oslo.upgradecheck
would print a traceback and exit 255).

The checks only read: the database, the policy file and the message bus.
The one message sent, to see that the bus takes it, goes to a topic nobody
consumes, so the broker drops it. A database or broker that does not answer
fails its check at once instead of being retried as the services would.
"""

# First: oslo.messaging, which this command imports, initialises a backend
# of oslo.service when it loads (eventlet by default); the threading one.
from trove_upgrade.common import threading_backend  # noqa: F401

import contextlib
import datetime
import functools
import logging
import os
import sys

from oslo_db import exception as db_exc
import oslo_messaging as messaging
from oslo_policy import policy as oslo_policy
from oslo_upgradecheck import common_checks
from oslo_upgradecheck import upgradecheck
from oslo_utils import timeutils
import sqlalchemy as sa

from trove_upgrade.cmd import short_lived
from trove_upgrade.common import context
from trove_upgrade.common import exception
from trove_upgrade.common import release_mappings
from trove_upgrade.common import rpc
from trove_upgrade import conf
from trove_upgrade.db import agents as db_agents
from trove_upgrade.db import migration
from trove_upgrade.db import upgrades as db_upgrades
from trove_upgrade import policies
from trove_upgrade.services import agent_rpcapi

CONF = conf.CONF

SUCCESS = upgradecheck.Code.SUCCESS
WARNING = upgradecheck.Code.WARNING
FAILURE = upgradecheck.Code.FAILURE

# The topic of the message bus probe: no service listens on it.
PROBE_TOPIC = 'trove_upgrade_status_probe'

# How many ids a result names before it only counts the rest.
MAX_LISTED = 10

# What a database that cannot be used raises: oslo.db wraps some errors (an
# unreachable server), SQLAlchemy raises others as they are (a refused
# password, an unknown database, a URL it cannot parse), and a driver that
# is not installed is an ImportError.
DATABASE_ERRORS = (db_exc.DBError, sa.exc.SQLAlchemyError, ImportError)


def _result(code, details):
    return upgradecheck.Result(code, details)


def _listing(items, describe):
    """``describe(item)`` for the first MAX_LISTED items, then a count."""
    shown = ', '.join(describe(item) for item in items[:MAX_LISTED])
    if len(items) > MAX_LISTED:
        shown += ' and %d more' % (len(items) - MAX_LISTED)
    return shown


def _first_line(exc):
    """The gist of a database or driver error, without SQL or links.

    oslo.db keeps the driver's error in ``inner_exception``, SQLAlchemy in
    ``orig``; their first line names the problem.
    """
    inner = (getattr(exc, 'inner_exception', None)
             or getattr(exc, 'orig', None) or exc)
    text = str(inner).strip()
    return text.splitlines()[0] if text else type(inner).__name__


def database_url():
    """``[database] connection`` with its password hidden."""
    try:
        return sa.engine.make_url(CONF.database.connection).render_as_string(
            hide_password=True)
    # ValueError: a port that is no number ("[::1" unclosed, "h:x").
    except (sa.exc.ArgumentError, ValueError):
        return 'an unparsable URL'


def transport_url():
    """``[DEFAULT] transport_url`` without its passwords."""
    url = messaging.TransportURL.parse(CONF)
    for host in url.hosts:
        host.password = None
    return str(url)


def _database_unreadable(what, exc):
    return _result(
        FAILURE, 'Cannot read %s from the database at %s: %s. See the '
        '"Database schema" check.' % (what, database_url(), _first_line(exc)))


@contextlib.contextmanager
def _quiet(logger_name):
    """Keep a library's log lines about what a check reports off stderr."""
    logger = logging.getLogger(logger_name)
    level = logger.level
    logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        logger.setLevel(level)


def _rule_references(check):
    """Names of the rules a parsed check refers to with ``rule:NAME``."""
    if isinstance(check, oslo_policy.RuleCheck):
        yield check.match
    if isinstance(check, oslo_policy.NotCheck):
        yield from _rule_references(check.rule)
    if isinstance(check, (oslo_policy.AndCheck, oslo_policy.OrCheck)):
        for rule in check.rules:
            yield from _rule_references(rule)


def _never_crashing(check):
    """``check``, with an error it did not expect reported as its failure."""
    @functools.wraps(check)
    def run(self):
        try:
            return check(self)
        except Exception as exc:
            return _result(FAILURE, 'The check could not run: %s: %s'
                           % (type(exc).__name__, _first_line(exc)))
    return run


class Checks(upgradecheck.UpgradeCommands):
    """The checks of ``trove-upgrade-status upgrade check``."""

    def _check_database_schema(self):
        """The database answers and its schema is the code's newest."""
        if CONF.database.connection is None:
            return _result(FAILURE, '[database] connection is not set.')
        try:
            sa.engine.make_url(CONF.database.connection)
        # ValueError: a port that is no number ("[::1" unclosed, "h:x").
        except (sa.exc.ArgumentError, ValueError):
            return _result(FAILURE, '[database] connection is not a '
                                    'database URL: the services refuse to '
                                    'start with it.')
        try:
            current = migration.version()
        except DATABASE_ERRORS as exc:
            return _result(
                FAILURE, 'Cannot connect to the database at %s: %s. Check '
                '[database] connection (its user, password and database) '
                'and that the database server is running.'
                % (database_url(), _first_line(exc)))
        head = migration.script_directory().get_current_head()
        state = migration.compare_with_head(current)
        if state == migration.CURRENT and current != head:
            return _result(SUCCESS, 'The schema is at revision %s, which '
                                    'this release serves on; pending: %s '
                                    '(trove-upgrade-manage db contract, once '
                                    'no service of the previous release '
                                    'runs).' % (current,
                                                migration.describe_pending(
                                                    current)))
        if state == migration.CURRENT:
            return _result(SUCCESS, 'The schema is at revision %s, the '
                                    'newest of this release.' % head)
        if state == migration.EMPTY:
            return _result(
                FAILURE, 'The database at %s has no schema. Run: %s'
                % (database_url(), migration.DB_SYNC))
        if state == migration.NEWER:
            return _result(
                FAILURE, 'The database is at revision %s, which this '
                'release does not know: a newer release migrated it. Run '
                'that release, or restore the database from before the '
                'migration.' % current)
        return _result(
            FAILURE, 'The database is at revision %s, not at %s, the '
            'newest of this release. Run: %s'
            % (current, head, migration.DB_SYNC))

    def _check_policy_file(self):
        """The policy file loads and every rule in it means something."""
        found_json = common_checks.check_policy_json(self, CONF)
        if found_json.code != SUCCESS:
            return found_json
        enforcer = oslo_policy.Enforcer(CONF)
        enforcer.register_defaults(policies.list_rules())
        enforcer.suppress_deprecation_warnings = True
        with _quiet('oslo_policy'):
            try:
                enforcer.load_rules()
            except (ValueError, TypeError, AttributeError) as exc:
                return _result(
                    FAILURE, 'The policy file %s cannot be loaded: it must '
                    'be a YAML mapping of rule names to check strings (%s).'
                    % (CONF.oslo_policy.policy_file, _first_line(exc)))
            well_defined = enforcer.check_rules()
        policy_file = CONF.oslo_policy.policy_file
        if enforcer.policy_path is None and os.path.isabs(policy_file):
            return _result(
                WARNING, 'The policy file %s does not exist, so the '
                'defaults apply: correct [oslo_policy] policy_file, or '
                'remove it.' % policy_file)
        if not enforcer.file_rules:
            return _result(SUCCESS, 'No policy file (%s) overrides a rule: '
                                    'the defaults apply.'
                           % policy_file)
        return self._policy_result(enforcer, well_defined)

    @staticmethod
    def _policy_result(enforcer, well_defined):
        """Rules that deny wrongly are failures, unused ones a warning."""
        failures = []
        # oslo.policy turns a rule it cannot parse into '!' (deny all).
        unparsable = sorted(
            name for name, rule in enforcer.file_rules.items()
            if str(enforcer.rules[name]) == '!'
            and rule.check_str.strip() != '!')
        if unparsable:
            failures.append('rules that do not parse, and so deny '
                            'everyone: %s' % ', '.join(unparsable))
        undefined = sorted(
            '%s (refers to %s)' % (name, reference)
            for name, check in enforcer.rules.items()
            for reference in _rule_references(check)
            if reference not in enforcer.rules)
        if undefined:
            failures.append('rules referring to rules that do not exist: '
                            '%s' % ', '.join(undefined))
        if not well_defined and not undefined:
            failures.append('rules referring to each other in a cycle')
        referenced = {reference for check in enforcer.rules.values()
                      for reference in _rule_references(check)}
        unknown = sorted(set(enforcer.file_rules)
                         - set(enforcer.registered_rules) - referenced)
        warnings = []
        if unknown:
            warnings.append('rules that no rule of trove-upgrade uses '
                            '(misspelt? the names are in '
                            'policy.yaml.sample): %s' % ', '.join(unknown))
        if not failures + warnings:
            return _result(SUCCESS, 'The policy file %s is valid.'
                           % enforcer.policy_path)
        return _result(FAILURE if failures else WARNING,
                       'The policy file %s has %s.'
                       % (enforcer.policy_path or 'policy directory',
                          '; '.join(failures + warnings)))

    def _check_message_bus(self):
        """A message reaches the broker of ``transport_url``, first try."""
        try:
            url = transport_url()
        # ValueError: urllib's, for an unclosed "[" or a port no number.
        except (messaging.InvalidTransportURL, ValueError) as exc:
            return _result(FAILURE, '[DEFAULT] transport_url is invalid: %s'
                           % exc)
        try:
            client = rpc.get_rpc_client(
                messaging.Target(topic=PROBE_TOPIC)).prepare(retry=0)
            client.cast(context.get_admin_context(), 'probe')
        except Exception as exc:
            # The drivers raise their own errors (kombu's, amqp's): any of
            # them means the bus did not take the message.
            return _result(
                FAILURE, 'Cannot send a message on %s: %s. Check [DEFAULT] '
                'transport_url and that the message broker is running.'
                % (url, _first_line(exc)))
        finally:
            rpc.cleanup()
        return _result(SUCCESS, 'The message bus at %s takes messages.' % url)

    def _check_agent_rpc_versions(self):
        """No registered agent is older than what may be sent to it."""
        value = CONF.upgrade_levels.agent
        try:
            cap = release_mappings.resolve_version_cap(
                'agent', value, auto=lambda: None)
        except exception.InvalidRPCVersionCapError as exc:
            return _result(FAILURE, '%s trove-upgrade-api refuses to start '
                                    'with it.' % exc)
        if value == release_mappings.AUTO:
            return _result(SUCCESS, '[upgrade_levels] agent = auto: messages '
                                    'follow the oldest registered agent.')
        sendable = cap or agent_rpcapi.AgentAPI.RPC_API_VERSION
        try:
            older = db_agents.list_agents_below_rpc_version(
                context.get_admin_context(), sendable)
        except DATABASE_ERRORS as exc:
            return _database_unreadable('the agents', exc)
        if not older:
            return _result(SUCCESS, 'Every registered agent speaks RPC API '
                                    '%s or newer.' % sendable)
        return _result(
            WARNING, '%d agent(s) speak an RPC API older than %s, which '
            '[upgrade_levels] agent = %s lets the control plane send: %s. '
            'They may not understand an upgrade request: set '
            '[upgrade_levels] agent to their release or to auto until they '
            'are upgraded.'
            % (len(older), sendable, value,
               _listing(older, lambda a: '%s (%s)' % (
                   a['instance_id'], a['rpc_api_version']))))

    def _check_agent_heartbeats(self):
        """Every registered agent sent a heartbeat within agent_down_time."""
        down_time = CONF.conductor.agent_down_time
        since = timeutils.utcnow() - datetime.timedelta(seconds=down_time)
        try:
            silent = db_agents.list_silent_agents(context.get_admin_context(),
                                                  since)
        except DATABASE_ERRORS as exc:
            return _database_unreadable('the agents', exc)
        if not silent:
            return _result(SUCCESS, 'Every registered agent sent a heartbeat '
                                    'in the last %d seconds.' % down_time)
        return _result(
            WARNING, '%d agent(s) sent no heartbeat in the last %d seconds '
            '([conductor] agent_down_time): %s. Upgrades sent to them wait '
            'until they are back. Check that their instance and its '
            'trove-upgrade-agent run and reach the message bus, and that '
            'trove-upgrade-conductor, which records heartbeats, is running.'
            % (len(silent), down_time,
               _listing(silent, lambda a: '%s (last heartbeat %s)' % (
                   a['instance_id'], a['last_heartbeat_at'] or 'never'))))

    def _check_stuck_upgrades(self):
        """No upgrade outlived the timeout the conductor enforces.

        The conductor times upgrades out once per periodic_interval, so one
        is stuck only when it is older than both together.
        """
        limit = (CONF.conductor.upgrade_timeout
                 + CONF.conductor.periodic_interval)
        created_before = timeutils.utcnow() - datetime.timedelta(
            seconds=limit)
        try:
            stuck = db_upgrades.list_unfinished_upgrades(
                context.get_admin_context(), created_before)
        except DATABASE_ERRORS as exc:
            return _database_unreadable('the upgrades', exc)
        if not stuck:
            return _result(SUCCESS, 'No upgrade is unfinished after %d '
                                    'seconds.' % limit)
        return _result(
            WARNING, '%d upgrade(s) are unfinished more than %d seconds '
            '([conductor] upgrade_timeout + periodic_interval) after they '
            'were requested: %s. Is trove-upgrade-conductor running? It '
            'marks such upgrades TIMED_OUT.'
            % (len(stuck), limit,
               _listing(stuck, lambda u: '%s (%s)' % (u['id'],
                                                      u['status']))))

    _upgrade_checks = tuple((name, _never_crashing(check)) for name, check in (
        ('Database schema', _check_database_schema),
        ('Policy file', _check_policy_file),
        ('Message bus', _check_message_bus),
        ('Agent RPC versions', _check_agent_rpc_versions),
        ('Agent heartbeats', _check_agent_heartbeats),
        ('Stuck upgrades', _check_stuck_upgrades),
    ))


@short_lived.command('trove-upgrade-status')
def main(argv=None):
    # One attempt: a status check reports an unreachable database at once,
    # whatever retries the services are configured for.
    CONF.set_override('max_retries', 0, group='database')
    # 255, as oslo.upgradecheck answers an error: 1 and 2 are results.
    argv = sys.argv[1:] if argv is None else argv
    with conf.readable_config('trove-upgrade-status', argv, status=255):
        return upgradecheck.main(
            CONF, project='trove-upgrade', upgrade_command=Checks(),
            argv=argv)
