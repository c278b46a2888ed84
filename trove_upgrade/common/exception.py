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

"""The one tree of trove-upgrade's errors, and the classes most areas share.

Every error of trove-upgrade, on the guest too, derives from
:class:`TroveUpgradeError`, so a process can catch one class, and every
name ends in ``Error`` (PEP 8). Two classes stay outside on purpose:
``untrusted.StepStopped`` is no failure but the agent stopping, and the
CLI's ``osc.client.APIError`` is osc-lib's ``CommandError``. The tree, by
concern (``code`` is the HTTP status the API answers with, so the API turns
any of them into a JSON error without knowing them one by one; nothing
below the API knows more of HTTP than that number):

* API input and state, here: :class:`InvalidInputError` (400),
  :class:`ForbiddenError` (403), :class:`NotFoundError` (404),
  :class:`ConflictError` (409) and their subclasses, each named after what
  was invalid, missing or in conflict; :class:`DispatchError` and
  :class:`DatabaseUnavailableError` (500).
* Packages and their verification, here (the guest verifies):
  :class:`PackageError` with :class:`ManifestError`, :class:`PayloadError`
  and one class per defence, which FAILED reasons and the threat model
  quote by name.
* Sealing, in ``common/sealing.py``: ``SealError`` and one class per
  refusal; Trove's message crypto and keys: ``trove_crypto.TroveCryptoError``
  and ``trove_keys.TroveKeyError``.
* Download strategies, in ``agent/strategies/exception.py`` (the agent's
  package; plugins import it): ``StrategyError``, with ``TransientError``
  the only one a strategy retries, and ``bounded_body.BodyTooLargeError``
  (also a ``requests`` error, so the HTTP libraries let it through).
* The agent's own steps, each in the module that raises it because nothing
  else may import the agent (journal, undo log, install, adoption, init
  system, untrusted steps, guest files and state, child processes).

Kept apart because callers tell them apart: ``AdoptionRefusedError`` (the
install cannot be adopted, nothing changed, exit 1) and
``AdoptionStepError`` (a step failed and was undone, exit 2). Classes
nothing raised are gone (``UnpackError``). The old names of every renamed
class are in the release note ``exception-names``.

This module imports nothing: the guest loads it.
"""


MAX_MESSAGE_LENGTH = 1024
MAX_QUOTED_LENGTH = 80


def bounded(text, limit=MAX_MESSAGE_LENGTH):
    """``text`` cut to ``limit`` characters, saying how much was cut.

    Messages quote hostile input (member names, versions, JSON errors); a
    name of many megabytes must not become a log line or a stored reason
    of that size.
    """
    text = str(text)
    if len(text) <= limit:
        return text
    note = '... (%d characters cut)' % (len(text) - limit)
    return text[:max(0, limit - len(note))] + note


def quoted(value, limit=MAX_QUOTED_LENGTH):
    """``repr(value)`` of at most about ``limit`` characters."""
    if isinstance(value, (str, bytes)) and len(value) > limit:
        return '%r... (%d long)' % (value[:limit], len(value))
    return bounded(repr(value), limit + 20)


class TroveUpgradeError(Exception):
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


class InvalidInputError(TroveUpgradeError):
    msg_fmt = 'Invalid input: %(reason)s'
    code = 400


class NotFoundError(TroveUpgradeError):
    msg_fmt = 'Not found.'
    code = 404


class ConflictError(TroveUpgradeError):
    msg_fmt = 'Conflict: %(reason)s'
    code = 409


class UpgradeNotFoundError(NotFoundError):
    msg_fmt = 'Upgrade %(upgrade_id)s could not be found.'


class UpgradeOfAnotherInstanceError(ConflictError):
    msg_fmt = ('Upgrade %(upgrade_id)s belongs to instance %(owner)s, not '
               '%(instance_id)s.')


class AgentNotFoundError(NotFoundError):
    msg_fmt = 'No agent is registered for instance %(instance_id)s.'


class AgentBusyError(ConflictError):
    msg_fmt = ('The agent of instance %(instance_id)s is being upgraded: '
               'upgrade %(upgrade_id)s is %(status)s. Cancel the upgrade '
               '(possible while it is PENDING, SENT or DEFERRED) or wait '
               'for it to end, then delete the agent.')


class InvalidUpgradeIdError(InvalidInputError):
    msg_fmt = 'Upgrade ids are UUIDs, not %(upgrade_id)s'


class MarkerNotFoundError(InvalidInputError):
    msg_fmt = 'Marker %(marker)s could not be found.'


class InvalidStateTransitionError(ConflictError):
    msg_fmt = ('Upgrade %(upgrade_id)s cannot go from %(from_state)s to '
               '%(to_state)s.')


class InvalidRPCVersionCapError(InvalidInputError):
    msg_fmt = ('[upgrade_levels] %(service)s = %(value)s is neither '
               '"latest", "auto", a known release nor an x.y version.')


class DispatchError(TroveUpgradeError):
    msg_fmt = 'Upgrade %(upgrade_id)s could not be sent: %(reason)s'
    code = 503


class ForbiddenError(TroveUpgradeError):
    msg_fmt = 'Forbidden.'
    code = 403


class PolicyNotAuthorizedError(ForbiddenError):
    msg_fmt = 'Policy does not allow %(action)s to be performed.'


class SchemaNotCurrentError(InvalidInputError):
    msg_fmt = 'The database schema is not current: %(reason)s'


class InvalidPolicyFileError(InvalidInputError):
    msg_fmt = 'The policy file %(path)s cannot be parsed: %(reason)s'


class RolloutNotFoundError(NotFoundError):
    msg_fmt = 'Rollout %(rollout_id)s could not be found.'


class RolloutConflictError(ConflictError):
    msg_fmt = '%(reason)s'


class InvalidRolloutStateError(ConflictError):
    msg_fmt = ('Rollout %(rollout_id)s is %(status)s: it cannot be '
               '%(action)s.')


class MalformedMessageError(InvalidInputError):
    msg_fmt = 'Malformed RPC message %(method)s: %(reason)s'


class MessageNotAuthenticatedError(ForbiddenError):
    msg_fmt = ('Message %(method)s of instance %(instance_id)s refused: '
               '%(reason)s')


class SealingUnavailableError(ConflictError):
    msg_fmt = ('Cannot seal the %(method)s message for instance '
               '%(instance_id)s: %(reason)s')


class ArgumentNeedsNewerVersionError(ConflictError):
    msg_fmt = ('Cannot send %(method)s with %(argument)s: the %(api)s RPC '
               'API is capped at %(version)s, whose %(method)s message '
               'cannot carry it, and leaving it out would drop a check '
               '(raise [upgrade_levels] %(api)s once the peers run a '
               'release that takes it)')


class ReplyNotAuthenticatedError(ForbiddenError):
    msg_fmt = ('The answer to %(method)s of instance %(instance_id)s was '
               'refused: %(reason)s')


class InstanceKeyError(InvalidInputError):
    msg_fmt = 'Instance key error: %(reason)s'


class InstanceNotFoundError(NotFoundError):
    msg_fmt = 'Trove has no instance %(instance)s: %(reason)s'


class AmbiguousInstanceNameError(InvalidInputError):
    msg_fmt = ('Instance name %(name)s is ambiguous: instances %(ids)s have '
               'it. Give the instance id instead.')


class TroveNotConfiguredError(InvalidInputError):
    msg_fmt = ('%(what)s needs [trove] connection, which is not set: '
               '%(hint)s')


class PackageNotFoundError(NotFoundError):
    msg_fmt = 'Package %(package)s could not be found.'


class PackageRejectedError(InvalidInputError):
    msg_fmt = 'Package %(package)s refused: %(reason)s'


class PackageConflictError(ConflictError):
    msg_fmt = '%(reason)s'


class DesiredVersionNotFoundError(NotFoundError):
    msg_fmt = 'Desired version %(desired_version_id)s could not be found.'


class DatabaseUnavailableError(TroveUpgradeError):
    msg_fmt = ('The conductor could not handle %(method)s: its database is '
               'unavailable. Try again later.')
    code = 503


class PackageError(TroveUpgradeError):
    """A package, a manifest or a key was refused; nothing was installed.

    The verifier (:mod:`trove_upgrade.package_format.verify`) runs a fixed
    sequence of small checks; each raises exactly one subclass, so a caller
    (and a test) can tell *which* defence fired. The attacks of The Update
    Framework's threat model, and the classes that stop them:

    * **Arbitrary installation** (a package nobody trusted signed):
      :class:`BadSignatureError`, :class:`UnknownSigningKeyError`,
      :class:`PayloadMismatchError`, :class:`ChunkAuthenticationError`,
      :class:`PayloadHashMismatchError`.
    * **Key compromise below the threshold**: :class:`ThresholdNotMetError`.
    * **Rollback** (an older, vulnerable version): :class:`RollbackError`,
      :class:`UpgradePathError`.
    * **Indefinite freeze** (replaying an old, once-valid manifest):
      :class:`ExpiredManifestError`.
    * **Wrong software** (a valid package of another version, or another
      genuinely signed package than the one the upgrade names):
      :class:`WrongVersionError`, :class:`ManifestHashMismatchError`,
      :class:`PackageNameMismatchError`.
    * **Mix-and-match** (a manifest with another package's payload, or a
      fetched file with another file's bytes):
      :class:`PayloadMismatchError`, :class:`PayloadHashMismatchError`,
      :class:`FileHashMismatchError`.
    * **Endless data** (filling memory or disk):
      :class:`ManifestTooLargeError`, :class:`PayloadTooLargeError`,
      :class:`EndlessDataError`, :class:`PlaintextSizeError`.
    * **Truncation, reordering, appended data** in the encrypted stream:
      :class:`TruncatedPayloadError`, :class:`ChunkAuthenticationError`,
      :class:`TrailingDataError`.
    * **Archive tricks** (escaping the destination, planting links or
      devices, smuggling files, hostile tar headers): impossible in format
      2, whose payload has no archive header (names, sizes and types come
      only from the signed manifest); format 1 is refused with
      :class:`UnsupportedFormatError` before its payload is read.

    Every message is cut to :data:`MAX_MESSAGE_LENGTH` characters.
    """

    def __init__(self, message=''):
        super().__init__(bounded(message))


# Keys and trust configuration.

class KeyFileError(PackageError):
    """A key file is unreadable, malformed or of the wrong kind."""


class KeyFileExistsError(PackageError):
    """Refusing to overwrite an existing key file."""


class InvalidThresholdError(PackageError):
    """The signature threshold is below 1 or above the number of keys."""


class InvalidVersionError(PackageError):
    """A version string does not follow the packaging.version rules."""


# The manifest, checked before a byte of the payload is read.

class ManifestError(PackageError):
    """The signed manifest was refused."""


class ManifestTooLargeError(ManifestError):
    """The manifest is larger than the configured cap (endless data)."""


class ManifestFormatError(ManifestError):
    """The manifest is not canonical JSON or does not follow the schema."""


class UnsupportedFormatError(ManifestError):
    """The manifest uses a format version this code does not understand."""


class BadSignatureError(ManifestError):
    """A signature tagged with a trusted key id does not verify."""


class UnknownSigningKeyError(ManifestError):
    """No signature comes from a trusted key."""


class ThresholdNotMetError(ManifestError):
    """Fewer distinct trusted keys signed than the threshold requires."""


class ExpiredManifestError(ManifestError):
    """The manifest's expiry time has passed (indefinite freeze)."""


class WrongVersionError(ManifestError):
    """The package is not the version that was asked for."""


class InvalidExpectationError(PackageError):
    """An expected manifest hash or package name is malformed."""


class ManifestHashMismatchError(ManifestError):
    """The manifest is not the one the upgrade names by its SHA-256."""


class PackageNameMismatchError(ManifestError):
    """The manifest signs another package name than the one expected."""


class UpgradePathError(ManifestError):
    """The installed version is below the package's minimum upgrade-from."""


class RollbackError(ManifestError):
    """The package is older than the installed version, without override."""


class PayloadTooLargeError(ManifestError):
    """The signed payload size is above the configured cap."""


# The encrypted payload, checked while it streams.

class PayloadError(PackageError):
    """The encrypted payload was refused."""


class MissingDecryptionKeyError(PayloadError):
    """No configured encryption key has the key id the package names."""


class PayloadFormatError(PayloadError):
    """The payload header or the archive inside is malformed."""


class PayloadMismatchError(PayloadError):
    """The payload header is not the one the signed manifest describes."""


class ChunkAuthenticationError(PayloadError):
    """A chunk failed authentication: flipped bits or reordered chunks."""


class TruncatedPayloadError(PayloadError):
    """The payload ends before its final chunk or its signed size."""


class TrailingDataError(PayloadError):
    """Data follows the chunk flagged as the last one."""


class PlaintextSizeError(PayloadError):
    """The decrypted payload is not exactly the signed files' sizes."""


class EndlessDataError(PayloadError):
    """The payload stream goes on past its signed size."""


class PayloadHashMismatchError(PayloadError):
    """The payload's SHA-256 differs from the signed one."""


class FileHashMismatchError(PayloadError):
    """A file fetched alone has not the signed size and SHA-256."""


# Writing the files out.

class DestinationExistsError(PackageError):
    """The extraction directory already exists."""


# Producing packages.

class BuildError(PackageError):
    """A package could not be built from the given inputs."""
