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

"""The signed manifest: what a package is, in canonical JSON.

The manifest travels beside the payload as ``<location>.manifest`` so that an
agent can fetch and verify it (a few kilobytes) before it downloads a byte of
the payload, and so learn the payload's signed size, hash and encryption
parameters first, as TUF clients fetch metadata before targets. Parsing here
checks the form only (strict canonical JSON and the schema); whether the
manifest is *trusted* is :mod:`trove_upgrade.package_format.verify`'s business.
"""

import dataclasses
import datetime
import re


from trove_upgrade.common import canonical
from trove_upgrade.common import exception as exceptions
from trove_upgrade.common import versions
from trove_upgrade.package_format import chunked_aead

FORMAT_VERSION = 2
# Format 1 carried a tar archive, parsed by tarfile: no longer read.
TAR_FORMAT_VERSION = 1
MANIFEST_TYPE = 'trove-upgrade/package-manifest'
ENCRYPTION_ALGORITHM = 'AES-256-GCM-HKDF-SHA256-STREAM'
MANIFEST_SUFFIX = '.manifest'
SIGNATURE_CONTEXT = b'trove-upgrade package manifest v1\x00'
TIME_FORMAT = '%Y-%m-%dT%H:%M:%SZ'
MAX_HEALTH_CHECK_TIMEOUT = 3600
# Bounds on every list and string a manifest holds.
MAX_FILES = 1024
MAX_SIGNATURES = 32
MAX_VERSION_LENGTH = 64
MAX_COMMAND_ARGS = 64
MAX_COMMAND_ARG_LENGTH = 4096
_HEX64 = re.compile(r'[0-9a-f]{64}')
_HEX128 = re.compile(r'[0-9a-f]{128}')
_TIME = re.compile(r'[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z')
_VERSION = re.compile(r'[A-Za-z0-9.+!_-]{1,%d}' % MAX_VERSION_LENGTH)
# Wheels are flat file names; no directories, so no path can escape.
FILE_NAME_PATTERN = re.compile(r'[A-Za-z0-9_][A-Za-z0-9_.+-]{0,254}')
CONSOLE_SCRIPT_PATTERN = re.compile(r'[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}')
# A package name, as Python distributions are named: ``trove-guestagent``
# for Trove's guest agent, ``trove-upgrade`` for the upgrade agent.
PACKAGE_NAME_PATTERN = re.compile(r'[A-Za-z0-9]([A-Za-z0-9._-]{0,126}'
                                  r'[A-Za-z0-9])?')


def parse_version(text, error=exceptions.InvalidVersionError):
    """A :func:`trove_upgrade.common.versions.parse` version.

    Length and alphabet are checked first: packaging would turn a release
    segment of thousands of digits into an int and raise ValueError.
    """
    if not isinstance(text, str) or not _VERSION.fullmatch(text):
        raise error('%s is not a valid version (at most %d letters, digits '
                    'and .+!_-)' % (exceptions.quoted(text),
                                    MAX_VERSION_LENGTH))
    found = versions.parse(text)
    if found is None:
        raise error('%s is not a valid version' % exceptions.quoted(text))
    return found


def check_expectation(sha256, package):
    """Refuse a malformed expected manifest hash or package name.

    ``sha256`` (of the manifest file) and ``package`` may each be None.

    :raises: InvalidExpectationError
    """
    if sha256 is not None and (type(sha256) is not str
                               or not _HEX64.fullmatch(sha256)):
        raise exceptions.InvalidExpectationError(
            'the expected manifest SHA-256 %s is not 64 lower-case hex '
            'digits' % exceptions.quoted(sha256))
    if package is not None and (type(package) is not str
                                or not PACKAGE_NAME_PATTERN.fullmatch(
                                    package)):
        raise exceptions.InvalidExpectationError(
            'the expected package name %s is not a package name'
            % exceptions.quoted(package))


def format_time(moment):
    return moment.astimezone(datetime.timezone.utc).strftime(TIME_FORMAT)


def parse_time(text, error=exceptions.ManifestFormatError):
    """An aware datetime from exactly ``YYYY-MM-DDTHH:MM:SSZ``."""
    try:
        if not _TIME.fullmatch(text):
            raise ValueError(text)
        moment = datetime.datetime.strptime(text, TIME_FORMAT)
    except (TypeError, ValueError):
        raise error('%s is not a UTC time like 2026-01-31T12:00:00Z'
                    % exceptions.quoted(text))
    return moment.replace(tzinfo=datetime.timezone.utc)


def payload_size_for(plaintext_size, chunk_size):
    """The one ciphertext size a format 2 payload of these sizes has."""
    frames = max(1, -(-plaintext_size // chunk_size))
    return (chunked_aead.HEADER_SIZE + plaintext_size
            + frames * chunked_aead.TAG_SIZE)


@dataclasses.dataclass(frozen=True)
class FileEntry:
    name: str
    size: int
    sha256: str


@dataclasses.dataclass(frozen=True)
class Payload:
    size: int
    sha256: str


@dataclasses.dataclass(frozen=True)
class Encryption:
    key_id: str
    chunk_size: int
    salt: str
    algorithm: str = ENCRYPTION_ALGORITHM

    def stream_header(self):
        """The exact header the payload must start with."""
        return chunked_aead.StreamHeader(
            self.chunk_size, bytes.fromhex(self.key_id),
            bytes.fromhex(self.salt)).to_bytes()


@dataclasses.dataclass(frozen=True)
class HealthCheck:
    """A command (argv, no shell) the agent runs after restarting."""

    command: tuple
    timeout: int


@dataclasses.dataclass(frozen=True)
class GuestAgent:
    """Which console script of the package is the guest agent."""

    console_script: str


@dataclasses.dataclass(frozen=True)
class Signature:
    key_id: str
    sig: str


@dataclasses.dataclass(frozen=True)
class Manifest:
    version: str
    created: datetime.datetime
    expires: datetime.datetime
    payload: Payload
    encryption: Encryption
    files: tuple
    min_upgrade_from: str = None
    health_check: HealthCheck = None
    signatures: tuple = ()
    guest_agent: GuestAgent = None
    format_version: int = FORMAT_VERSION
    # The package's name; None in packages built before it was signed.
    package: str = None

    def signed_dict(self):
        signed = {
            '_type': MANIFEST_TYPE,
            'format_version': self.format_version,
            'version': self.version,
            'created': format_time(self.created),
            'expires': format_time(self.expires),
            'payload': {'size': self.payload.size,
                        'sha256': self.payload.sha256},
            'encryption': {'algorithm': self.encryption.algorithm,
                           'key_id': self.encryption.key_id,
                           'chunk_size': self.encryption.chunk_size,
                           'salt': self.encryption.salt},
            'files': [{'name': f.name, 'size': f.size, 'sha256': f.sha256}
                      for f in self.files],
        }
        if self.min_upgrade_from is not None:
            signed['min_upgrade_from'] = self.min_upgrade_from
        if self.health_check is not None:
            signed['health_check'] = {
                'command': list(self.health_check.command),
                'timeout': self.health_check.timeout}
        if self.guest_agent is not None:
            signed['guest_agent'] = {
                'console_script': self.guest_agent.console_script}
        if self.package is not None:
            signed['package'] = self.package
        return signed

    def signing_input(self):
        """The bytes every signature covers."""
        return SIGNATURE_CONTEXT + canonical.dumps(self.signed_dict())

    def to_bytes(self):
        return canonical.dumps({
            'signed': self.signed_dict(),
            'signatures': [{'key_id': s.key_id, 'sig': s.sig}
                           for s in self.signatures]})

    def with_signature(self, signing_key):
        """A copy signed by one more key (unchanged if it already signed)."""
        if any(s.key_id == signing_key.key_id for s in self.signatures):
            return self
        new = Signature(signing_key.key_id,
                        signing_key.sign(self.signing_input()).hex())
        return dataclasses.replace(self, signatures=tuple(
            sorted(self.signatures + (new,), key=lambda s: s.key_id)))

    def files_by_name(self):
        return {f.name: f for f in self.files}

    @classmethod
    def from_bytes(cls, data):
        """Parse and check the form (no signature); raise ManifestError."""
        document = SignedDocument.from_bytes(data)
        return cls.from_signed(document)

    @classmethod
    def from_signed(cls, document):
        """Parse the signed part of ``document`` strictly.

        Exact types (``true`` is not 1), no ``null`` for an absent field,
        and the result must encode back to exactly the bytes received, so
        no two spellings of a manifest can carry the same signatures.
        """
        signed = document.signed
        _expect_keys(signed, 'signed',
                     {'_type', 'format_version', 'version', 'created',
                      'expires', 'payload', 'encryption', 'files'},
                     {'min_upgrade_from', 'health_check', 'guest_agent',
                      'package'})
        _format_version(signed['format_version'])
        if signed['_type'] != MANIFEST_TYPE:
            raise exceptions.ManifestFormatError(
                '_type is %s, not %r' % (exceptions.quoted(signed['_type']),
                                         MANIFEST_TYPE))
        parse_version(signed['version'], exceptions.ManifestFormatError)
        if 'package' in signed and (
                type(signed['package']) is not str
                or not PACKAGE_NAME_PATTERN.fullmatch(signed['package'])):
            raise exceptions.ManifestFormatError(
                'package %s is not a package name'
                % exceptions.quoted(signed['package']))
        if 'min_upgrade_from' in signed:
            parse_version(signed['min_upgrade_from'],
                          exceptions.ManifestFormatError)
        created = parse_time(signed['created'])
        expires = parse_time(signed['expires'])
        if expires <= created:
            raise exceptions.ManifestFormatError(
                'expires is not after created')
        files = _files(signed['files'])
        payload = _payload(signed['payload'])
        encryption = _encryption(signed['encryption'])
        plaintext = sum(f.size for f in files)
        if payload.size != payload_size_for(plaintext, encryption.chunk_size):
            raise exceptions.ManifestFormatError(
                'the payload size %d does not fit files of %d bytes in '
                'chunks of %d' % (payload.size, plaintext,
                                  encryption.chunk_size))
        health_check = (_health_check(signed['health_check'])
                        if 'health_check' in signed else None)
        manifest = cls(version=signed['version'], created=created,
                       expires=expires, payload=payload,
                       encryption=encryption, files=files,
                       min_upgrade_from=signed.get('min_upgrade_from'),
                       health_check=health_check,
                       signatures=document.signatures,
                       guest_agent=_guest_agent(signed.get('guest_agent')),
                       package=signed.get('package'))
        if canonical.dumps(manifest.signed_dict()) != document.signed_bytes:
            raise exceptions.ManifestFormatError(
                'the signed part is not written the one way this manifest '
                'is written (types, times or absent fields differ)')
        return manifest


@dataclasses.dataclass(frozen=True)
class SignedDocument:
    """A manifest file split into the exact signed bytes and signatures.

    Only canonical JSON and the signature list are parsed before the
    signatures are checked over ``signed_bytes``, the bytes received.
    """

    signed: dict
    signed_bytes: bytes
    signatures: tuple

    def signing_input(self):
        return SIGNATURE_CONTEXT + self.signed_bytes

    @classmethod
    def from_bytes(cls, data):
        document = canonical.loads(data)
        _expect_keys(document, 'manifest', {'signed', 'signatures'})
        signatures = _signatures(document['signatures'])
        if not isinstance(document['signed'], dict):
            raise exceptions.ManifestFormatError('"signed" is not an object')
        return cls(document['signed'],
                   canonical.signed_bytes(data, document), signatures)


def _format_version(value):
    if type(value) is not int:
        raise exceptions.ManifestFormatError(
            'format_version must be an integer')
    if value == TAR_FORMAT_VERSION:
        raise exceptions.UnsupportedFormatError(
            'manifest format version 1 (a tar payload) is no longer read: '
            'rebuild the package with this release\'s '
            'trove-upgrade-package build')
    if value != FORMAT_VERSION:
        raise exceptions.UnsupportedFormatError(
            'manifest format version %d is not supported (this code reads '
            'version %d)' % (value, FORMAT_VERSION))


def _expect_keys(value, what, required, optional=frozenset()):
    if not isinstance(value, dict):
        raise exceptions.ManifestFormatError('%s is not an object' % what)
    missing = required - set(value)
    unknown = set(value) - required - optional
    if missing or unknown:
        raise exceptions.ManifestFormatError(
            '%s: missing %s, unknown %s' % (
                what, sorted(missing) or 'none',
                exceptions.quoted(sorted(unknown), 200) if unknown
                else 'none'))


def _size(value, what):
    if type(value) is not int or value < 0:
        raise exceptions.ManifestFormatError(
            '%s must be a non-negative integer' % what)
    return value


def _hex(value, pattern, what):
    if type(value) is not str or not pattern.fullmatch(value):
        raise exceptions.ManifestFormatError(
            '%s must be lower-case hex of the right length' % what)
    return value


def _list(value, what, limit, allow_empty=False):
    if type(value) is not list or (not value and not allow_empty):
        raise exceptions.ManifestFormatError('"%s" is not a list' % what)
    if len(value) > limit:
        raise exceptions.ManifestFormatError(
            '"%s" has %d items, at most %d are allowed'
            % (what, len(value), limit))
    return value


def _signatures(value):
    result = []
    for item in _list(value, 'signatures', MAX_SIGNATURES, True):
        _expect_keys(item, 'signature', {'key_id', 'sig'})
        result.append(Signature(_hex(item['key_id'], _HEX64, 'key_id'),
                                _hex(item['sig'], _HEX128, 'sig')))
    return tuple(result)


def _files(value):
    result = []
    for item in _list(value, 'files', MAX_FILES):
        _expect_keys(item, 'file', {'name', 'size', 'sha256'})
        name = item['name']
        if type(name) is not str or not FILE_NAME_PATTERN.fullmatch(name):
            raise exceptions.ManifestFormatError(
                'file name %s is not a plain file name'
                % exceptions.quoted(name))
        result.append(FileEntry(name, _size(item['size'], 'file size'),
                                _hex(item['sha256'], _HEX64, 'sha256')))
    names = [f.name for f in result]
    if names != sorted(set(names)):
        raise exceptions.ManifestFormatError(
            'files must be sorted by name, each name once')
    return tuple(result)


def _payload(value):
    _expect_keys(value, 'payload', {'size', 'sha256'})
    return Payload(_size(value['size'], 'payload size'),
                   _hex(value['sha256'], _HEX64, 'payload sha256'))


def _encryption(value):
    _expect_keys(value, 'encryption',
                 {'algorithm', 'key_id', 'chunk_size', 'salt'})
    if value['algorithm'] != ENCRYPTION_ALGORITHM:
        raise exceptions.ManifestFormatError(
            'encryption algorithm %s is not supported'
            % exceptions.quoted(value['algorithm']))
    chunk_size = _size(value['chunk_size'], 'chunk_size')
    if not 1 <= chunk_size <= chunked_aead.MAX_CHUNK_SIZE:
        raise exceptions.ManifestFormatError(
            'chunk_size must be between 1 and %d'
            % chunked_aead.MAX_CHUNK_SIZE)
    return Encryption(key_id=_hex(value['key_id'], _HEX64, 'key_id'),
                      chunk_size=chunk_size,
                      salt=_hex(value['salt'], _HEX64, 'salt'))


def _health_check(value):
    _expect_keys(value, 'health_check', {'command', 'timeout'})
    command = _list(value['command'], 'health_check command',
                    MAX_COMMAND_ARGS)
    if not all(type(arg) is str and 0 < len(arg) <= MAX_COMMAND_ARG_LENGTH
               for arg in command):
        raise exceptions.ManifestFormatError(
            'health_check command must be a list of non-empty strings of '
            'at most %d characters' % MAX_COMMAND_ARG_LENGTH)
    timeout = _size(value['timeout'], 'health_check timeout')
    if not 1 <= timeout <= MAX_HEALTH_CHECK_TIMEOUT:
        raise exceptions.ManifestFormatError(
            'health_check timeout must be 1..%d seconds'
            % MAX_HEALTH_CHECK_TIMEOUT)
    return HealthCheck(tuple(command), timeout)


def _guest_agent(value):
    if value is None:
        return None
    _expect_keys(value, 'guest_agent', {'console_script'})
    script = value['console_script']
    if (not isinstance(script, str)
            or not CONSOLE_SCRIPT_PATTERN.fullmatch(script)):
        raise exceptions.ManifestFormatError(
            'guest_agent console_script %r is not a plain script name'
            % (script,))
    return GuestAgent(script)
