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

"""Some files of a payload, from byte ranges of it: only what changed.

A format 2 payload is a stream of chunks of ``chunk_size`` plaintext
bytes, each sealed alone at its position (:mod:`chunked_aead`), and its
plaintext is the signed files end to end. So the chunks that hold a file
are found from the signed sizes alone, and fetched, decrypted and
authenticated without the rest. :func:`plan` turns the files a guest
lacks into the ciphertext ranges to fetch (files next to each other share
one range); :func:`extract` reads those ranges back to back, as a
strategy wrote them, and writes out the files.

The checks, in order, each with its own exception:

1. the fetched bytes are exactly as many as the ranges signed sizes imply
   (TruncatedPayloadError, EndlessDataError: endless data);
2. every chunk authenticates at its position, under the header the signed
   manifest gives, its last-chunk flag where the signed sizes put it
   (ChunkAuthenticationError, TruncatedPayloadError, TrailingDataError:
   reordered chunks, another package's chunks, a range response with other
   bytes);
3. every file has the signed size and SHA-256 of its manifest entry
   (FileHashMismatchError: whoever holds the encryption key, every guest,
   can seal any chunk; the signed per-file hash is what makes a file
   genuine, as the signed payload hash does for a whole download; a file
   with the bytes of another entry says so).

Nothing reads a file before check 3 passed: they are written into a
private staging directory renamed into place only when all passed.
A chunk at either end of a range may hold bytes of a neighbouring file:
they are authenticated with it and dropped. The size of a range is bounded
by its files' signed sizes plus one chunk at each end.
"""

import dataclasses
import hashlib
import os

from trove_upgrade.common import exception as exceptions
from trove_upgrade.package_format import chunked_aead
from trove_upgrade.package_format import safe_unpack

_BLOCK = 1 << 20


@dataclasses.dataclass(frozen=True)
class Range:
    """Ciphertext bytes ``[start, start + length)`` holding ``files``."""

    start: int
    length: int
    first_frame: int
    frames: int
    # Where the first file starts in the first frame's plaintext.
    skip: int
    files: tuple


class _Layout:
    """Where each frame and each file of a payload lies, by signed sizes."""

    def __init__(self, manifest):
        self.chunk = manifest.encryption.chunk_size
        self.frame = self.chunk + chunked_aead.TAG_SIZE
        full, last = safe_unpack.frame_sizes(manifest.payload.size,
                                             self.chunk)
        self.count = full + 1
        self.last_size = last
        self.payload_size = manifest.payload.size
        self.offsets = {}
        offset = 0
        for entry in manifest.files:
            self.offsets[entry.name] = offset
            offset += entry.size

    def frame_size(self, index):
        return self.last_size if index == self.count - 1 else self.frame

    def frame_start(self, index):
        return chunked_aead.HEADER_SIZE + index * self.frame


def plan(manifest, wanted):
    """The ranges holding the manifest entries ``wanted``, in payload order.

    Files of size 0 need no bytes: they are in no range.
    """
    layout = _Layout(manifest)
    names = {entry.name for entry in wanted}
    runs, current = [], []
    for entry in manifest.files:
        if entry.name in names and entry.size:
            current.append(entry)
        elif entry.name not in names and entry.size and current:
            runs.append(current)
            current = []
    if current:
        runs.append(current)
    ranges = []
    for run in runs:
        begin = layout.offsets[run[0].name]
        end = layout.offsets[run[-1].name] + run[-1].size
        first = begin // layout.chunk
        last = (end - 1) // layout.chunk
        start = layout.frame_start(first)
        stop = layout.frame_start(last) + layout.frame_size(last)
        ranges.append(Range(start, stop - start, first, last - first + 1,
                            begin - first * layout.chunk, tuple(run)))
    return ranges


def fetched_size(ranges):
    return sum(r.length for r in ranges)


class _FileCheck:
    """Writes one file of a range and checks it against its entry."""

    def __init__(self, entry, stage, others):
        self.entry = entry
        self.left = entry.size
        self.digest = hashlib.sha256()
        self._others = others
        self._out = open(os.open(
            os.path.join(stage, entry.name),
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
            | os.O_CLOEXEC, 0o600), 'wb')

    def write(self, data):
        self.digest.update(data)
        self._out.write(data)
        self.left -= len(data)

    def close(self):
        self._out.flush()
        os.fsync(self._out.fileno())
        self._out.close()
        actual = self.digest.hexdigest()
        if actual == self.entry.sha256:
            return
        other = self._others.get(actual)
        raise exceptions.FileHashMismatchError(
            'the fetched file %s has the SHA-256 %s, the manifest signed '
            '%s%s' % (exceptions.quoted(self.entry.name), actual,
                      self.entry.sha256,
                      ' (it is the signed file %s)' % exceptions.quoted(other)
                      if other else ''))

    def abort(self):
        self._out.close()


def _read(source, size, counter):
    data = chunked_aead.read_exactly(source, size)
    if len(data) < size:
        raise exceptions.TruncatedPayloadError(
            'the fetched ranges end inside chunk %d' % counter)
    return data


def _extract_range(source, rng, layout, decryptor, stage, others):
    skip = rng.skip
    files = list(rng.files)
    check = None
    try:
        for index in range(rng.first_frame, rng.first_frame + rng.frames):
            frame = _read(source, layout.frame_size(index), index)
            plaintext = memoryview(decryptor.open(
                index, frame, index == layout.count - 1))
            plaintext, skip = plaintext[skip:], 0
            while plaintext and (files or check):
                if check is None:
                    check = _FileCheck(files.pop(0), stage, others)
                taken = plaintext[:check.left]
                check.write(taken)
                plaintext = plaintext[len(taken):]
                if check.left == 0:
                    done, check = check, None
                    done.close()
    except BaseException:
        if check is not None:
            check.abort()
        raise
    if check is not None:
        check.abort()
    if check is not None or files:
        raise exceptions.PlaintextSizeError(
            'the chunks of a range end before its files do')


def extract(source, manifest, key, wanted, dest_dir):
    """Decrypt the ranges of ``wanted`` from ``source`` into ``dest_dir``.

    ``source`` is a binary file of the ranges of :func:`plan` back to
    back; ``manifest`` a verified one; ``dest_dir`` must not exist.
    Returns the absolute paths of the files written, in manifest order.
    """
    layout = _Layout(manifest)
    header = chunked_aead.StreamHeader.from_bytes(
        manifest.encryption.stream_header())
    decryptor = chunked_aead.FrameDecryptor(key, header)
    others = {entry.sha256: entry.name for entry in manifest.files}
    ranges = plan(manifest, wanted)
    with safe_unpack.staging(dest_dir) as stage:
        for rng in ranges:
            _extract_range(source, rng, layout, decryptor, stage, others)
        if source.read(1):
            raise exceptions.EndlessDataError(
                'the fetched ranges go on past the %d bytes their signed '
                'files take' % fetched_size(ranges))
        for entry in wanted:
            if entry.size == 0:
                _empty(entry, stage)
    root = os.path.abspath(dest_dir)
    names = {entry.name for entry in wanted}
    return [os.path.join(root, entry.name) for entry in manifest.files
            if entry.name in names]


def _empty(entry, stage):
    if entry.sha256 != hashlib.sha256(b'').hexdigest():
        raise exceptions.FileHashMismatchError(
            'the signed file %s is empty but signed with the SHA-256 %s'
            % (exceptions.quoted(entry.name), entry.sha256))
    open(os.open(os.path.join(stage, entry.name),
                 os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                 0o600), 'wb').close()
