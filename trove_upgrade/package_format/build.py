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

"""Build a package: wheels into an encrypted payload and a signed manifest.

The payload (format 2) is the wheels end to end, in the manifest's sorted
order, with no archive header at all: names and sizes live only in the
signed manifest, so a verifier has nothing to parse before the payload's
signed hash matched. It streams straight into the chunk encryptor with no
whole-file buffer.
Both outputs are written to temporary files beside their destination and
renamed into place at the end, the manifest last: a manifest never names a
payload that is not complete, and a failed build leaves nothing behind.
"""

import datetime
import hashlib
import os
import tempfile

from trove_upgrade.common import exception as exceptions
from trove_upgrade.package_format import chunked_aead
from trove_upgrade.package_format import keys
from trove_upgrade.package_format import manifest as manifest_mod

WHEEL_SUFFIX = '.whl'
_COPY_SIZE = 1024 * 1024


def collect_wheels(inputs):
    """Wheel paths from files and directories (``*.whl`` directly inside).

    Raises BuildError for a missing input, a file that is not a wheel, a
    directory without wheels, or two wheels with the same name.
    """
    wheels = []
    for path in inputs:
        if os.path.isdir(path):
            found = sorted(
                os.path.join(path, name) for name in os.listdir(path)
                if name.endswith(WHEEL_SUFFIX)
                and os.path.isfile(os.path.join(path, name)))
            if not found:
                raise exceptions.BuildError('no %s files in directory %s'
                                            % (WHEEL_SUFFIX, path))
            wheels.extend(found)
        elif os.path.isfile(path):
            if not path.endswith(WHEEL_SUFFIX):
                raise exceptions.BuildError('%s is not a wheel (%s)'
                                            % (path, WHEEL_SUFFIX))
            wheels.append(path)
        else:
            raise exceptions.BuildError('%s does not exist' % path)
    names = [os.path.basename(path) for path in wheels]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise exceptions.BuildError('several wheels are named %s'
                                    % ', '.join(duplicates))
    if not wheels:
        raise exceptions.BuildError('no wheels given')
    return sorted(wheels, key=os.path.basename)


class _HashingWriter:
    def __init__(self, sink):
        self._sink = sink
        self.digest = hashlib.sha256()
        self.size = 0

    def write(self, data):
        self.digest.update(data)
        self.size += len(data)
        return self._sink.write(data)


def _add_wheel(sink, path):
    name = os.path.basename(path)
    digest = hashlib.sha256()
    with open(path, 'rb') as source:
        size = os.fstat(source.fileno()).st_size
        copied = 0
        while copied <= size:
            block = source.read(_COPY_SIZE)
            if not block:
                break
            copied += len(block)
            digest.update(block)
            sink.write(block)
    if copied != size:
        raise exceptions.BuildError('%s changed size while being read'
                                    % path)
    return manifest_mod.FileEntry(name, size, digest.hexdigest())


def _check_file_name(path):
    name = os.path.basename(path)
    if not manifest_mod.FILE_NAME_PATTERN.fullmatch(name):
        raise exceptions.BuildError(
            'wheel name %r has characters a manifest does not allow' % name)


def _temporary_beside(path):
    fd, temp = tempfile.mkstemp(
        prefix='.%s.partial-' % os.path.basename(path),
        dir=os.path.dirname(os.path.abspath(path)))
    return os.fdopen(fd, 'wb'), temp


def write_manifest(path, manifest):
    """Atomically replace ``path`` with the manifest's canonical bytes."""
    out, temp = _temporary_beside(path)
    try:
        with out:
            out.write(manifest.to_bytes())
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, 0o644)
        os.rename(temp, path)
    except BaseException:
        os.unlink(temp)
        raise


def build_package(wheels, output_path, *, version, signing_keys,
                  encryption_key, expires, created=None,
                  min_upgrade_from=None, health_check=None,
                  chunk_size=chunked_aead.DEFAULT_CHUNK_SIZE,
                  guest_agent=None, package=None):
    """Write ``output_path`` and ``output_path.manifest``; return the manifest.

    ``wheels`` are wheel file paths (see :func:`collect_wheels`),
    ``signing_keys`` one or more :class:`keys.SigningKey`, ``encryption_key``
    the 32 key bytes, ``expires`` and ``created`` aware datetimes,
    ``health_check`` a :class:`manifest.HealthCheck` or None,
    ``guest_agent`` a :class:`manifest.GuestAgent` or None, ``package``
    the package's name signed in the manifest (``trove-guestagent``) or
    None.
    """
    manifest_mod.parse_version(version)
    try:
        manifest_mod.check_expectation(None, package)
    except exceptions.InvalidExpectationError as e:
        raise exceptions.BuildError(str(e))
    if min_upgrade_from is not None:
        manifest_mod.parse_version(min_upgrade_from)
    if not wheels:
        raise exceptions.BuildError('no wheels given')
    if not signing_keys:
        raise exceptions.BuildError('at least one signing key is needed')
    for path in wheels:
        _check_file_name(path)
    created = (created or datetime.datetime.now(datetime.timezone.utc)
               ).replace(microsecond=0)
    expires = expires.replace(microsecond=0)
    if expires <= created:
        raise exceptions.BuildError('the expiry time %s is not after now'
                                    % manifest_mod.format_time(expires))
    manifest_path = output_path + manifest_mod.MANIFEST_SUFFIX
    for path in (output_path, manifest_path):
        if os.path.lexists(path):
            raise exceptions.BuildError('%s already exists' % path)
    key_id = keys.encryption_key_id(encryption_key)
    out, temp = _temporary_beside(output_path)
    try:
        with out:
            hashing = _HashingWriter(out)
            encryptor = chunked_aead.ChunkEncryptor(
                hashing, encryption_key, bytes.fromhex(key_id), chunk_size)
            files = tuple(_add_wheel(encryptor, path) for path in wheels)
            encryptor.close()
            out.flush()
            os.fsync(out.fileno())
        manifest = manifest_mod.Manifest(
            version=version, created=created, expires=expires,
            payload=manifest_mod.Payload(hashing.size,
                                         hashing.digest.hexdigest()),
            encryption=manifest_mod.Encryption(
                key_id=key_id, chunk_size=chunk_size,
                salt=encryptor.header.salt.hex()),
            files=files, min_upgrade_from=min_upgrade_from,
            health_check=health_check, guest_agent=guest_agent,
            package=package)
        for signing_key in signing_keys:
            manifest = manifest.with_signature(signing_key)
        os.chmod(temp, 0o644)
        os.rename(temp, output_path)
    except BaseException:
        os.unlink(temp)
        raise
    try:
        write_manifest(manifest_path, manifest)
    except BaseException:
        os.unlink(output_path)
        raise
    return manifest
