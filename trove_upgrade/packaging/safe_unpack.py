"""Extract the payload's tar archive without trusting it.

The archive was signed, but a signing pipeline can be fooled and a parser
can be too, so the archive is treated as hostile: only regular files whose
plain names the manifest lists, each once, with exactly the signed size and
SHA-256, are written, and never through :meth:`tarfile.TarFile.extract` (no
metadata, modes, owners or links from the archive are ever applied). Files
are written into a private staging directory beside the destination and
renamed into place only when every check, including the caller's own, has
passed; on any failure the staging directory is removed, so nothing stays
extracted.
"""

import contextlib
import hashlib
import os
import shutil
import tarfile
import tempfile

from trove_upgrade.packaging import exceptions

COPY_BLOCK_SIZE = 1024 * 1024
_TAR_BUFFER_SIZE = 64 * 1024


def _fsync_directory(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def staging(dest_dir):
    """Yield an empty private directory; it becomes ``dest_dir`` on success.

    The directory is created beside ``dest_dir`` (same file system, so the
    final rename is atomic) with mode 0700; if the block raises, it is
    deleted with everything in it.
    """
    dest_dir = os.path.abspath(dest_dir)
    if os.path.lexists(dest_dir):
        raise exceptions.DestinationExistsError(
            '%s already exists; extract into a new directory' % dest_dir)
    parent = os.path.dirname(dest_dir)
    stage = tempfile.mkdtemp(
        prefix='.%s.partial-' % os.path.basename(dest_dir), dir=parent)
    try:
        yield stage
        _fsync_directory(stage)
        if os.path.lexists(dest_dir):
            raise exceptions.DestinationExistsError(
                '%s appeared while extracting' % dest_dir)
        os.rename(stage, dest_dir)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    _fsync_directory(parent)


def _check_name(name):
    if name.startswith('/') or os.path.isabs(name):
        raise exceptions.AbsolutePathError(
            'archive member %r has an absolute path' % name)
    if '..' in name.replace('\\', '/').split('/'):
        raise exceptions.PathTraversalError(
            'archive member %r contains ".."' % name)


def _check_type(member):
    if member.issym() or member.islnk():
        raise exceptions.LinkNotAllowedError(
            'archive member %r is a link to %r' % (member.name,
                                                   member.linkname))
    if not member.isreg() or member.issparse():
        raise exceptions.SpecialFileError(
            'archive member %r is not a regular file (tar type %r)'
            % (member.name, member.type))


def _write_file(source, path, entry):
    digest = hashlib.sha256()
    written = 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                 0o600)
    with os.fdopen(fd, 'wb') as out:
        while True:
            block = source.read(COPY_BLOCK_SIZE)
            if not block:
                break
            written += len(block)
            digest.update(block)
            out.write(block)
        out.flush()
        os.fsync(out.fileno())
    if written != entry.size:
        raise exceptions.FileSizeMismatchError(
            'archive member %r has %d bytes, the manifest says %d'
            % (entry.name, written, entry.size))
    if digest.hexdigest() != entry.sha256:
        raise exceptions.FileHashMismatchError(
            'archive member %r has SHA-256 %s, the manifest says %s'
            % (entry.name, digest.hexdigest(), entry.sha256))


def unpack(source, files, stage_dir):
    """Extract the tar stream ``source`` into ``stage_dir``.

    ``files`` maps each name the manifest lists to its
    :class:`~trove_upgrade.packaging.manifest.FileEntry`. Returns the
    extracted names, sorted. Raises an UnpackError subclass for the first
    member that breaks a rule, PayloadFormatError for a malformed archive.
    """
    seen = set()
    try:
        archive = tarfile.open(fileobj=source, mode='r|',
                               bufsize=_TAR_BUFFER_SIZE)
        for member in archive:
            name = member.name
            _check_name(name)
            _check_type(member)
            if name in seen:
                raise exceptions.DuplicateFileError(
                    'archive member %r appears twice' % name)
            entry = files.get(name)
            if entry is None:
                raise exceptions.UnlistedFileError(
                    'archive member %r is not listed in the manifest'
                    % name)
            if member.size != entry.size:
                raise exceptions.FileSizeMismatchError(
                    'archive member %r declares %d bytes, the manifest '
                    'says %d' % (name, member.size, entry.size))
            _write_file(archive.extractfile(member),
                        os.path.join(stage_dir, name), entry)
            seen.add(name)
    except tarfile.TarError as exc:
        raise exceptions.PayloadFormatError(
            'the payload is not a valid tar archive: %s' % exc)
    missing = sorted(set(files) - seen)
    if missing:
        raise exceptions.MissingFileError(
            'files listed in the manifest are missing from the archive: %s'
            % ', '.join(missing))
    return sorted(seen)
