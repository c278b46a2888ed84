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

"""AES-256-GCM in authenticated chunks: streaming encryption, constant memory.

One GCM message over a whole package would have to be held in memory before
its tag could be checked. Instead the plaintext is cut into chunks of
``chunk_size`` bytes, each sealed on its own (the STREAM construction of
Hoang, Reyhanitabar, Rogaway and Vizar, as used by Tink and age)::

    stream = header || chunk_0 || chunk_1 || ... || chunk_n
    header = MAGIC (8) || VERSION (1) || chunk_size (4, big endian)
             || key_id (32) || salt (32)
    chunk_i = AES-256-GCM(K, nonce_i, plaintext_i, aad=header)
    nonce_i = i (11 bytes, big endian) || last (1 byte: 1 for chunk_n, else 0)
    K = HKDF-SHA256(encryption key, salt, info=KDF_INFO)

Every chunk but the last carries exactly ``chunk_size`` plaintext bytes; the
last carries 0 to ``chunk_size`` (0 only when the whole plaintext is empty).
The counter in the nonce detects reordered, dropped or duplicated chunks, the
last-chunk flag detects truncation at a chunk boundary and data appended
after the end, the header as associated data binds every chunk to its key id,
salt and chunk size, and the per-stream key derived from a random salt means
nonces never repeat across packages encrypted with the same key. The reader
holds at most two chunks at a time whatever the size of the stream.
"""

import os
import struct

from cryptography import exceptions as crypto_exceptions
from cryptography.hazmat.primitives.ciphers import aead
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf import hkdf

from trove_upgrade.common import exception as exceptions

MAGIC = b'TROVEUPG'
VERSION = 1
KEY_ID_SIZE = 32
SALT_SIZE = 32
TAG_SIZE = 16
HEADER_SIZE = len(MAGIC) + 1 + 4 + KEY_ID_SIZE + SALT_SIZE
MAX_CHUNK_SIZE = 16 * 1024 * 1024
# Small enough that fetching one changed wheel by its chunks
# (:mod:`payload_ranges`) costs at most two chunks more than the wheel.
DEFAULT_CHUNK_SIZE = 64 * 1024
KDF_INFO = b'trove-upgrade chunked AES-256-GCM v1'
_HEADER = struct.Struct('>8sBI%ds%ds' % (KEY_ID_SIZE, SALT_SIZE))
_NOT_LAST, _LAST = b'\x00', b'\x01'


class StreamHeader:
    """The fixed-size header that starts every encrypted stream."""

    def __init__(self, chunk_size, key_id, salt):
        if not 1 <= chunk_size <= MAX_CHUNK_SIZE:
            raise exceptions.PayloadFormatError(
                'chunk size %d is outside 1..%d' % (chunk_size,
                                                    MAX_CHUNK_SIZE))
        if len(key_id) != KEY_ID_SIZE or len(salt) != SALT_SIZE:
            raise exceptions.PayloadFormatError(
                'key id and salt must be %d and %d bytes'
                % (KEY_ID_SIZE, SALT_SIZE))
        self.chunk_size = chunk_size
        self.key_id = key_id
        self.salt = salt

    def to_bytes(self):
        return _HEADER.pack(MAGIC, VERSION, self.chunk_size, self.key_id,
                            self.salt)

    @classmethod
    def from_bytes(cls, data):
        if len(data) < HEADER_SIZE:
            raise exceptions.TruncatedPayloadError(
                'the stream ends inside its %d-byte header' % HEADER_SIZE)
        if len(data) > HEADER_SIZE:
            raise exceptions.PayloadFormatError(
                'a stream header of %d bytes, not %d'
                % (len(data), HEADER_SIZE))
        magic, version, chunk_size, key_id, salt = _HEADER.unpack(data)
        if magic != MAGIC:
            raise exceptions.PayloadFormatError(
                'not a trove-upgrade package (bad magic %r)' % magic)
        if version != VERSION:
            raise exceptions.PayloadFormatError(
                'unsupported payload format version %d' % version)
        return cls(chunk_size, key_id, salt)


def read_exactly(source, size):
    """Read ``size`` bytes, fewer only at the end of the stream."""
    parts = []
    while size > 0:
        data = source.read(size)
        if not data:
            break
        parts.append(data)
        size -= len(data)
    return b''.join(parts)


def _chunk_cipher(key, header):
    derived = hkdf.HKDF(algorithm=hashes.SHA256(), length=32,
                        salt=header.salt, info=KDF_INFO).derive(key)
    return aead.AESGCM(derived)


def _nonce(counter, flag):
    return counter.to_bytes(11, 'big') + flag


class ChunkEncryptor:
    """A write-only file object that encrypts into ``sink``.

    Call :meth:`close` to seal the last chunk; without it the stream is
    truncated and every reader will say so.
    """

    def __init__(self, sink, key, key_id, chunk_size=DEFAULT_CHUNK_SIZE,
                 salt=None):
        self.header = StreamHeader(chunk_size, key_id,
                                   salt or os.urandom(SALT_SIZE))
        self._aad = self.header.to_bytes()
        self._cipher = _chunk_cipher(key, self.header)
        self._sink = sink
        self._buffer = bytearray()
        self._counter = 0
        self._closed = False
        sink.write(self._aad)

    def _seal(self, plaintext, flag):
        self._sink.write(self._cipher.encrypt(
            _nonce(self._counter, flag), bytes(plaintext), self._aad))
        self._counter += 1

    def write(self, data):
        if self._closed:
            raise ValueError('write to a closed ChunkEncryptor')
        self._buffer += data
        size = self.header.chunk_size
        # A full chunk is sealed only once a byte beyond it exists: until
        # then it may be the last one, whose flag differs.
        while len(self._buffer) > size:
            self._seal(self._buffer[:size], _NOT_LAST)
            del self._buffer[:size]
        return len(data)

    def close(self):
        if not self._closed:
            self._seal(self._buffer, _LAST)
            self._buffer = bytearray()
            self._closed = True


class FrameDecryptor:
    """Opens one sealed frame at a time, given its position in the stream.

    Whoever holds the encryption key can seal any frame, so this proves
    only that the frame was sealed for this header, position and flag; the
    signed hash of the whole ciphertext is what makes it genuine.
    """

    def __init__(self, key, header):
        self._aad = header.to_bytes()
        self._cipher = _chunk_cipher(key, header)

    def open(self, counter, frame, last):
        if len(frame) < TAG_SIZE:
            raise exceptions.TruncatedPayloadError(
                'the stream ends inside chunk %d' % counter)
        flag, other = (_LAST, _NOT_LAST) if last else (_NOT_LAST, _LAST)
        try:
            return self._cipher.decrypt(_nonce(counter, flag), frame,
                                        self._aad)
        except crypto_exceptions.InvalidTag:
            pass
        # Tell truncation and appended data apart from corruption: the
        # chunk is genuine, only its position in the stream is wrong.
        try:
            self._cipher.decrypt(_nonce(counter, other), frame, self._aad)
        except crypto_exceptions.InvalidTag:
            raise exceptions.ChunkAuthenticationError(
                'chunk %d failed authentication (modified, reordered or '
                'encrypted with another key)' % counter)
        if last:
            raise exceptions.TruncatedPayloadError(
                'the stream ends after chunk %d, which is not the last'
                % counter)
        raise exceptions.TrailingDataError(
            'data follows chunk %d, which is the last' % counter)


class ChunkDecryptor:
    """A read-only file object yielding authenticated plaintext.

    ``source`` must be positioned just after ``header``. Every byte returned
    by :meth:`read` belongs to a chunk that authenticated; the end of the
    plaintext (``b''``) is reported only after the last-flagged chunk
    authenticated and the source was found to end right after it.
    """

    def __init__(self, source, key, header):
        self._source = source
        self._header = header
        self._frames = FrameDecryptor(key, header)
        self._chunks = self._plaintext_chunks()
        self._buffer = b''
        self._offset = 0

    def _open(self, counter, frame, last):
        return self._frames.open(counter, frame, last)

    def _plaintext_chunks(self):
        frame_size = self._header.chunk_size + TAG_SIZE
        counter = 0
        current = read_exactly(self._source, frame_size)
        while True:
            if len(current) < frame_size:
                yield self._open(counter, current, last=True)
                return
            following = read_exactly(self._source, frame_size)
            if not following:
                yield self._open(counter, current, last=True)
                return
            yield self._open(counter, current, last=False)
            current = following
            counter += 1

    def read(self, size=-1):
        parts = []
        wanted = size if size is not None and size >= 0 else None
        while wanted is None or wanted > 0:
            if self._offset >= len(self._buffer):
                self._buffer = next(self._chunks, None)
                self._offset = 0
                if self._buffer is None:
                    self._buffer = b''
                    break
                continue
            end = len(self._buffer) if wanted is None else min(
                len(self._buffer), self._offset + wanted)
            parts.append(self._buffer[self._offset:end])
            if wanted is not None:
                wanted -= end - self._offset
            self._offset = end
        return b''.join(parts)


def open_decryptor(source, key):
    """Read the header from ``source`` and return a ChunkDecryptor."""
    header = StreamHeader.from_bytes(read_exactly(source, HEADER_SIZE))
    return ChunkDecryptor(source, key, header)
