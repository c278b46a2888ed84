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

"""Verify a package before anything of it is trusted: the agent's entry point.

The agent calls, in this order::

    trusted = keys.load_trusted_keys(paths, threshold)
    keyring = keys.load_keyring(paths)
    manifest = verify.verify_manifest(
        manifest_bytes, trusted, expected_version=requested,
        installed_version=running, allow_downgrade=flag,
        max_payload_size=cap, expected_sha256=hash_or_none,
        expected_package=name_or_none)
    files = verify.verify_and_extract(
        payload_path_or_fileobj, manifest, keyring, dest_dir,
        max_payload_size=cap)

or :func:`verify_package` for both at once from two local files. The manifest
(``<location>.manifest``) is fetched and verified first, so the payload's
signed size is known before a byte of it is downloaded (``manifest.payload``
gives the size and SHA-256).

Like python-tuf's trusted metadata set, verification is a fixed sequence of
small named checks, each raising its own exception from
:mod:`trove_upgrade.common.exception` (whose docstring maps them
to the attacks they defeat):

manifest (:func:`verify_manifest`), before any payload byte:
  1. ``check_manifest_size``   ManifestTooLargeError     endless data
  1a. ``check_manifest_hash``  ManifestHashMismatchError another signed
                               package than the upgrade names (when it
                               names one)
  2. ``check_manifest_form``   ManifestFormatError       canonical JSON and
                               the signature list only
  3. ``check_signatures``      BadSignatureError, UnknownSigningKeyError,
                               ThresholdNotMetError      arbitrary install,
                                                         key compromise
                               (over the exact bytes received)
  3a. ``check_manifest_schema`` ManifestFormatError, UnsupportedFormatError
                               strict types, re-encodes to the same bytes
  3b. ``check_package_name``   PackageNameMismatchError  another package
                               (when a name is expected)
  4. ``check_expiry``          ExpiredManifestError      indefinite freeze
  5. ``check_version``         WrongVersionError         wrong software
  6. ``check_upgrade_path``    UpgradePathError
  7. ``check_rollback``        RollbackError             rollback
  8. ``check_payload_size``    PayloadTooLargeError      endless data

payload (:func:`verify_and_extract`), in one streaming pass:
  9. ``check_decryption_key``  MissingDecryptionKeyError
  10. ``check_header``         PayloadMismatchError      mix-and-match
  11. streaming decrypt: frames cut at the sizes the signed payload size
      implies, every chunk authenticated at its position
      (ChunkAuthenticationError, TruncatedPayloadError, TrailingDataError),
      the signed size enforced (TruncatedPayloadError, EndlessDataError),
      the ciphertext hashed
  12. the plaintext cut into the signed files by their signed sizes and
      written into a private staging directory: no archive header exists
      to parse
  13. ``check_payload_hash``   PayloadHashMismatchError  mix-and-match
  14. rename the staging directory into place; on any failure it is
      deleted instead, so nothing stays extracted.

some files of the payload, from byte ranges of it
(:func:`verify_and_extract_files`, :mod:`.payload_ranges`): checks 9,
then the fetched size, each chunk at its position and each file's signed
size and SHA-256 (FileHashMismatchError), then 14.

Whatever the input, only :class:`~exceptions.PackageError` subclasses
leave these functions (``OSError`` from the local disk aside), with
messages of bounded length.
"""

import dataclasses
import datetime
import functools
import hashlib
import os
import struct

from trove_upgrade.common import exception as exceptions
from trove_upgrade.package_format import chunked_aead
from trove_upgrade.package_format import manifest as manifest_mod
from trove_upgrade.package_format import payload_ranges
from trove_upgrade.package_format import safe_unpack

DEFAULT_MAX_PAYLOAD_SIZE = 2 * 1024 ** 3
DEFAULT_MAX_MANIFEST_SIZE = 1024 ** 2


@dataclasses.dataclass(frozen=True)
class VerifiedManifest(manifest_mod.Manifest):
    """A manifest that passed :func:`verify_manifest`.

    :func:`verify_and_extract` accepts only this type, so a payload is never
    checked against a manifest whose signatures nobody verified.
    """


def check_manifest_size(manifest_bytes, max_manifest_size):
    if len(manifest_bytes) > max_manifest_size:
        raise exceptions.ManifestTooLargeError(
            'the manifest has more than %d bytes' % max_manifest_size)


def check_manifest_hash(manifest_bytes, expected_sha256):
    """The manifest file is the one named by ``expected_sha256``, if any.

    Checked before the manifest is even parsed: whoever controls the
    store could otherwise serve another genuinely signed package of the
    requested version (another build of it).
    """
    if expected_sha256 is None:
        return
    actual = hashlib.sha256(manifest_bytes).hexdigest()
    if actual != expected_sha256:
        raise exceptions.ManifestHashMismatchError(
            'the manifest SHA-256 is %s, the upgrade expects %s'
            % (actual, expected_sha256))


def check_package_name(manifest, expected_package):
    """The manifest signs the package name ``expected_package``, if any.

    A manifest built before packages were named names none, and is
    refused when a name is expected.
    """
    if expected_package is None or manifest.package == expected_package:
        return
    raise exceptions.PackageNameMismatchError(
        'the package is %s, the upgrade expects %s'
        % ('unnamed' if manifest.package is None
           else exceptions.quoted(manifest.package),
           exceptions.quoted(expected_package)))


def check_manifest_form(manifest_bytes):
    return manifest_mod.SignedDocument.from_bytes(manifest_bytes)


def check_manifest_schema(document):
    return manifest_mod.Manifest.from_signed(document)


def _only_package_errors(error):
    """Turn any parsing accident of hostile input into ``error``.

    The checks raise named PackageErrors; this is the guarantee that a
    case they missed still reads as a refusal, not as a crash.
    """
    def decorate(function):
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            try:
                return function(*args, **kwargs)
            except exceptions.PackageError:
                raise
            except (ValueError, TypeError, LookupError, ArithmeticError,
                    RecursionError, struct.error) as exc:
                raise error('malformed input (%s): %s'
                            % (type(exc).__name__, exc)) from exc
        return wrapper
    return decorate


def check_signatures(document, trusted_keys):
    """At least ``threshold`` distinct trusted keys signed; none falsely.

    A signature tagged with a trusted key id that does not verify means the
    signed part was changed: refuse outright rather than count it out.
    Signatures by keys not trusted are ignored, and a key signing twice
    counts once.
    """
    data = document.signing_input()
    valid = set()
    for signature in document.signatures:
        if signature.key_id not in trusted_keys:
            continue
        if not trusted_keys.verify(signature.key_id,
                                   bytes.fromhex(signature.sig), data):
            raise exceptions.BadSignatureError(
                'the signature by trusted key %s does not verify: the '
                'manifest was modified' % signature.key_id)
        valid.add(signature.key_id)
    if not valid:
        raise exceptions.UnknownSigningKeyError(
            'no signature by a trusted key (signed by: %s)'
            % (', '.join(s.key_id for s in document.signatures)
               or 'nobody'))
    if len(valid) < trusted_keys.threshold:
        raise exceptions.ThresholdNotMetError(
            '%d trusted key(s) signed, the threshold is %d'
            % (len(valid), trusted_keys.threshold))


def check_expiry(manifest, now):
    if now >= manifest.expires:
        raise exceptions.ExpiredManifestError(
            'the manifest expired at %s'
            % manifest_mod.format_time(manifest.expires))


def check_version(manifest, expected_version):
    expected = manifest_mod.parse_version(expected_version)
    if manifest_mod.parse_version(manifest.version) != expected:
        raise exceptions.WrongVersionError(
            'the package is version %s, version %s was requested'
            % (manifest.version, expected_version))


def check_upgrade_path(manifest, installed_version):
    if manifest.min_upgrade_from is None:
        return
    installed = manifest_mod.parse_version(installed_version)
    if installed < manifest_mod.parse_version(manifest.min_upgrade_from):
        raise exceptions.UpgradePathError(
            'version %s can only be installed over %s or later, %s is '
            'installed' % (manifest.version, manifest.min_upgrade_from,
                           installed_version))


def check_rollback(manifest, installed_version, allow_downgrade):
    installed = manifest_mod.parse_version(installed_version)
    if (manifest_mod.parse_version(manifest.version) < installed
            and not allow_downgrade):
        raise exceptions.RollbackError(
            'version %s is older than the installed %s and the upgrade '
            'does not allow a downgrade' % (manifest.version,
                                            installed_version))


def check_payload_size(manifest, max_payload_size):
    if manifest.payload.size > max_payload_size:
        raise exceptions.PayloadTooLargeError(
            'the payload has %d bytes, more than the %d allowed'
            % (manifest.payload.size, max_payload_size))


@_only_package_errors(exceptions.ManifestFormatError)
def verify_manifest(manifest_bytes, trusted_keys, *, expected_version,
                    installed_version, allow_downgrade=False, now=None,
                    max_payload_size=DEFAULT_MAX_PAYLOAD_SIZE,
                    max_manifest_size=DEFAULT_MAX_MANIFEST_SIZE,
                    expected_sha256=None, expected_package=None):
    """Run checks 1-8 on the manifest; return a VerifiedManifest.

    ``installed_version`` is the version running now; ``None`` skips the
    upgrade-path and rollback checks and is meant only for tools that
    install nothing (``trove-upgrade-package verify``). ``now`` (an aware
    datetime) defaults to the current UTC time. ``expected_sha256`` (of
    the manifest file) and ``expected_package`` bind the verification to
    one package; None expects nothing of it.
    """
    now = now or datetime.datetime.now(datetime.timezone.utc)
    manifest_mod.check_expectation(expected_sha256, expected_package)
    check_manifest_size(manifest_bytes, max_manifest_size)
    check_manifest_hash(manifest_bytes, expected_sha256)
    document = check_manifest_form(bytes(manifest_bytes))
    check_signatures(document, trusted_keys)
    manifest = check_manifest_schema(document)
    check_package_name(manifest, expected_package)
    check_expiry(manifest, now)
    check_version(manifest, expected_version)
    if installed_version is not None:
        check_upgrade_path(manifest, installed_version)
        check_rollback(manifest, installed_version, allow_downgrade)
    check_payload_size(manifest, max_payload_size)
    return VerifiedManifest(**{field.name: getattr(manifest, field.name)
                               for field in dataclasses.fields(manifest)})


class _Readable:
    """``readinto`` over any object with ``read``, for caller's streams."""

    def __init__(self, source):
        self._source = source

    def read(self, size):
        return self._source.read(size)

    def readinto(self, view):
        data = self._source.read(len(view))
        view[:len(data)] = data
        return len(data)


def check_decryption_key(manifest, keyring):
    return keyring.get(manifest.encryption.key_id)


def check_header(source, manifest):
    expected = manifest.encryption.stream_header()
    actual = chunked_aead.read_exactly(source, len(expected))
    if len(actual) < len(expected):
        raise exceptions.TruncatedPayloadError(
            'the payload ends inside its %d-byte header' % len(expected))
    if actual != expected:
        raise exceptions.PayloadMismatchError(
            'the payload header does not match the signed manifest (another '
            'package, another key, or a modified header)')
    return chunked_aead.StreamHeader.from_bytes(actual)


def check_payload_hash(digest, manifest):
    if digest.hexdigest() != manifest.payload.sha256:
        raise exceptions.PayloadHashMismatchError(
            'the payload SHA-256 is %s, the manifest signed %s'
            % (digest.hexdigest(), manifest.payload.sha256))


@_only_package_errors(exceptions.PayloadFormatError)
def _extract(source, manifest, key, dest_dir):
    header = check_header(source, manifest)
    digest = hashlib.sha256(header.to_bytes())
    with safe_unpack.staging(dest_dir) as stage:
        safe_unpack.extract(source, header, key, manifest.files,
                            manifest.payload.size, stage, digest)
        check_payload_hash(digest, manifest)
    return [f.name for f in manifest.files]


def verify_and_extract(payload, manifest, keyring, dest_dir, *,
                       max_payload_size=DEFAULT_MAX_PAYLOAD_SIZE):
    """Run checks 9-14: decrypt, verify and extract the payload.

    ``payload`` is a path or a binary file object; ``manifest`` must come
    from :func:`verify_manifest`; ``dest_dir`` must not exist yet. Returns
    the absolute paths of the extracted files, sorted by name.
    """
    if not isinstance(manifest, VerifiedManifest):
        raise TypeError('verify the manifest with verify_manifest() first')
    check_payload_size(manifest, max_payload_size)
    key = check_decryption_key(manifest, keyring)
    if isinstance(payload, (str, bytes)) or hasattr(payload, '__fspath__'):
        with open(payload, 'rb') as source:
            names = _extract(source, manifest, key, dest_dir)
    else:
        names = _extract(_Readable(payload), manifest, key, dest_dir)
    root = os.path.abspath(dest_dir)
    return [os.path.join(root, name) for name in names]


@_only_package_errors(exceptions.PayloadFormatError)
def verify_and_extract_files(ranges_path, manifest, keyring, dest_dir,
                             wanted):
    """Check and write the files ``wanted`` from their fetched ranges.

    ``ranges_path`` holds the ranges :func:`payload_ranges.plan` gives for
    ``wanted`` (manifest entries), back to back; ``manifest`` must come
    from :func:`verify_manifest`. Returns the paths of the files written.
    """
    if not isinstance(manifest, VerifiedManifest):
        raise TypeError('verify the manifest with verify_manifest() first')
    key = check_decryption_key(manifest, keyring)
    with open(ranges_path, 'rb') as source:
        return payload_ranges.extract(source, manifest, key, wanted,
                                      dest_dir)


def read_manifest_file(path, max_manifest_size=DEFAULT_MAX_MANIFEST_SIZE):
    """Read a manifest file, never more than one byte past the cap."""
    with open(path, 'rb') as source:
        data = source.read(max_manifest_size + 1)
    check_manifest_size(data, max_manifest_size)
    return data


def verify_package(package_path, manifest_path=None, *, trusted_keys,
                   keyring, dest_dir, expected_version, installed_version,
                   allow_downgrade=False, now=None,
                   max_payload_size=DEFAULT_MAX_PAYLOAD_SIZE,
                   expected_sha256=None, expected_package=None):
    """Verify a local package and its manifest, and extract it.

    ``manifest_path`` defaults to ``package_path + '.manifest'``. Returns
    ``(manifest, extracted_paths)``.
    """
    manifest_path = manifest_path or (
        str(package_path) + manifest_mod.MANIFEST_SUFFIX)
    manifest = verify_manifest(
        read_manifest_file(manifest_path), trusted_keys,
        expected_version=expected_version,
        installed_version=installed_version,
        allow_downgrade=allow_downgrade, now=now,
        max_payload_size=max_payload_size, expected_sha256=expected_sha256,
        expected_package=expected_package)
    return manifest, verify_and_extract(package_path, manifest, keyring,
                                        dest_dir,
                                        max_payload_size=max_payload_size)
