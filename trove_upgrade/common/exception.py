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

"""The root of every trove-upgrade error, and the control plane's errors.

Every error of trove-upgrade, on the guest too (packages, strategies,
sealing, the journal), derives from :class:`TroveUpgradeException`, so
that a process can catch one class; each area keeps its own classes in its
own module. Each carries the HTTP status the API answers with (``code``) so
that the API layer turns any of them into a JSON error without knowing them
one by one; nothing below the API layer knows about HTTP beyond that
number. This module imports nothing: the guest loads it.
"""


class TroveUpgradeException(Exception):
    """Base of every trove-upgrade error; ``msg_fmt`` is filled from kwargs.

    A message given as the first argument is used as it is.
    """

    msg_fmt = 'An unknown error occurred.'
    code = 500

    def __init__(self, message=None, **kwargs):
        self.kwargs = kwargs
        if message is None:
            message = self.msg_fmt % kwargs
        self.message = message
        super().__init__(message)


class Invalid(TroveUpgradeException):
    msg_fmt = 'Invalid input: %(reason)s'
    code = 400


class NotFound(TroveUpgradeException):
    msg_fmt = 'Not found.'
    code = 404


class Conflict(TroveUpgradeException):
    msg_fmt = 'Conflict: %(reason)s'
    code = 409


class UpgradeNotFound(NotFound):
    msg_fmt = 'Upgrade %(upgrade_id)s could not be found.'


class UpgradeOfAnotherInstance(Conflict):
    msg_fmt = ('Upgrade %(upgrade_id)s belongs to instance %(owner)s, not '
               '%(instance_id)s.')


class AgentNotFound(NotFound):
    msg_fmt = 'No agent is registered for instance %(instance_id)s.'


class AgentBusy(Conflict):
    msg_fmt = ('The agent of instance %(instance_id)s is being upgraded: '
               'upgrade %(upgrade_id)s is %(status)s. Cancel the upgrade '
               '(possible while it is PENDING, SENT or DEFERRED) or wait '
               'for it to end, then delete the agent.')


class InvalidUpgradeId(Invalid):
    msg_fmt = 'Upgrade ids are UUIDs, not %(upgrade_id)s'


class MarkerNotFound(Invalid):
    msg_fmt = 'Marker %(marker)s could not be found.'


class InvalidStateTransition(Conflict):
    msg_fmt = ('Upgrade %(upgrade_id)s cannot go from %(from_state)s to '
               '%(to_state)s.')


class InvalidRPCVersionCap(Invalid):
    msg_fmt = ('[upgrade_levels] %(service)s = %(value)s is neither '
               '"latest", "auto", a known release nor an x.y version.')


class DispatchFailed(TroveUpgradeException):
    msg_fmt = 'Upgrade %(upgrade_id)s could not be sent: %(reason)s'
    code = 503


class Forbidden(TroveUpgradeException):
    msg_fmt = 'Forbidden.'
    code = 403


class PolicyNotAuthorized(Forbidden):
    msg_fmt = 'Policy does not allow %(action)s to be performed.'


class SchemaNotCurrent(Invalid):
    msg_fmt = 'The database schema is not current: %(reason)s'


class InvalidPolicyFile(Invalid):
    msg_fmt = 'The policy file %(path)s cannot be parsed: %(reason)s'


class RolloutNotFound(NotFound):
    msg_fmt = 'Rollout %(rollout_id)s could not be found.'


class RolloutConflict(Conflict):
    msg_fmt = '%(reason)s'


class InvalidRolloutState(Conflict):
    msg_fmt = ('Rollout %(rollout_id)s is %(status)s: it cannot be '
               '%(action)s.')


class MalformedMessage(Invalid):
    msg_fmt = 'Malformed RPC message %(method)s: %(reason)s'


class MessageNotAuthenticated(Forbidden):
    msg_fmt = ('Message %(method)s of instance %(instance_id)s refused: '
               '%(reason)s')


class SealingUnavailable(Conflict):
    msg_fmt = ('Cannot seal the %(method)s message for instance '
               '%(instance_id)s: %(reason)s')


class ArgumentNeedsNewerVersion(Conflict):
    msg_fmt = ('Cannot send %(method)s with %(argument)s: the %(api)s RPC '
               'API is capped at %(version)s, whose %(method)s message '
               'cannot carry it, and leaving it out would drop a check '
               '(raise [upgrade_levels] %(api)s once the peers run a '
               'release that takes it)')


class ReplyNotAuthenticated(Forbidden):
    msg_fmt = ('The answer to %(method)s of instance %(instance_id)s was '
               'refused: %(reason)s')


class InstanceKeyError(Invalid):
    msg_fmt = 'Instance key error: %(reason)s'


class InstanceNotFound(NotFound):
    msg_fmt = 'Trove has no instance %(instance)s: %(reason)s'


class AmbiguousInstanceName(Invalid):
    msg_fmt = ('Instance name %(name)s is ambiguous: instances %(ids)s have '
               'it. Give the instance id instead.')


class TroveNotConfigured(Invalid):
    msg_fmt = ('%(what)s needs [trove] connection, which is not set: '
               '%(hint)s')


class PackageNotFound(NotFound):
    msg_fmt = 'Package %(package)s could not be found.'


class PackageRejected(Invalid):
    msg_fmt = 'Package %(package)s refused: %(reason)s'


class PackageConflict(Conflict):
    msg_fmt = '%(reason)s'


class DesiredVersionNotFound(NotFound):
    msg_fmt = 'Desired version %(desired_version_id)s could not be found.'


class DatabaseUnavailable(TroveUpgradeException):
    msg_fmt = ('The conductor could not handle %(method)s: its database is '
               'unavailable. Try again later.')
    code = 503
