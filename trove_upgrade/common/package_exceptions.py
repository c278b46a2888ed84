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

"""Every way a package can be refused, one class per failure.

The verifier (:mod:`trove_upgrade.package_format.verify`) runs a fixed
sequence of small checks; each raises exactly one of these classes, so a
caller (and a test) can tell *which* defence fired. They all derive from
:class:`PackageError`, so the agent can catch one class and record the
message. The attacks of The Update Framework's threat model, and the classes
that stop them:

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
* **Endless data** (filling memory or disk): :class:`ManifestTooLargeError`,
  :class:`PayloadTooLargeError`, :class:`EndlessDataError`,
  :class:`PlaintextSizeError`.
* **Truncation, reordering, appended data** in the encrypted stream:
  :class:`TruncatedPayloadError`, :class:`ChunkAuthenticationError`,
  :class:`TrailingDataError`.
* **Archive tricks** (escaping the destination, planting links or devices,
  smuggling files, hostile tar headers): impossible in format 2, whose
  payload has no archive header (names, sizes and types come only from the
  signed manifest); format 1 is refused with
  :class:`UnsupportedFormatError` before its payload is read.

Every message is cut to :data:`MAX_MESSAGE_LENGTH` characters.
"""

from trove_upgrade.common import exception


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


class PackageError(exception.TroveUpgradeException):
    """A package, a manifest or a key was refused; nothing was installed."""

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

class UnpackError(PackageError):
    """The payload's files could not be written; nothing was extracted."""


class DestinationExistsError(UnpackError):
    """The extraction directory already exists."""


# Producing packages.

class BuildError(PackageError):
    """A package could not be built from the given inputs."""
