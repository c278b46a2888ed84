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

"""The chunk framing on its own: round trip and tamper detection.

Without a manifest, the framing alone must detect every modification: the
property tests below try arbitrary plaintexts, chunk sizes, write patterns
and damage.
"""

import io
import os

from hypothesis import assume
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from trove_upgrade.common import exception as exc
from trove_upgrade.package_format import chunked_aead
from trove_upgrade.tests import base

KEY = bytes(range(32))
KEY_ID = b'k' * chunked_aead.KEY_ID_SIZE
DETECTED = (exc.ChunkAuthenticationError, exc.TruncatedPayloadError,
            exc.TrailingDataError, exc.PayloadFormatError)
PROPERTY = settings(max_examples=60, deadline=None, database=None)


def encrypt(plaintext, chunk_size, pieces=(), key=KEY, salt=None):
    """Encrypt, writing ``plaintext`` in pieces of the given sizes."""
    sink = io.BytesIO()
    encryptor = chunked_aead.ChunkEncryptor(sink, key, KEY_ID, chunk_size,
                                            salt)
    offset = 0
    for size in pieces:
        encryptor.write(plaintext[offset:offset + size])
        offset += size
    encryptor.write(plaintext[offset:])
    encryptor.close()
    return sink.getvalue()


def decrypt(stream, key=KEY, read_size=-1):
    decryptor = chunked_aead.open_decryptor(io.BytesIO(stream), key)
    parts = []
    while True:
        data = decryptor.read(read_size)
        if not data:
            return b''.join(parts)
        parts.append(data)


def frames(stream, chunk_size):
    body = stream[chunked_aead.HEADER_SIZE:]
    size = chunk_size + chunked_aead.TAG_SIZE
    return [body[i:i + size] for i in range(0, len(body), size)]


class TestChunkFraming(base.TestCase):

    def test_layout(self):
        stream = encrypt(b'a' * 250, 100)
        self.assertEqual(chunked_aead.HEADER_SIZE + 250
                         + 3 * chunked_aead.TAG_SIZE, len(stream))
        self.assertEqual(chunked_aead.MAGIC,
                         stream[:len(chunked_aead.MAGIC)])

    def test_exact_multiple_has_no_empty_last_chunk(self):
        stream = encrypt(b'a' * 200, 100)
        self.assertEqual([116, 116], [len(f) for f in frames(stream, 100)])
        self.assertEqual(b'a' * 200, decrypt(stream))

    def test_empty_plaintext_is_one_empty_last_chunk(self):
        stream = encrypt(b'', 100)
        self.assertEqual([chunked_aead.TAG_SIZE],
                         [len(f) for f in frames(stream, 100)])
        self.assertEqual(b'', decrypt(stream))

    def test_same_key_different_streams_differ(self):
        self.assertNotEqual(encrypt(b'same', 16), encrypt(b'same', 16))

    def test_wrong_key(self):
        stream = encrypt(b'secret' * 100, 64)
        self.assertRaises(exc.ChunkAuthenticationError, decrypt, stream,
                          os.urandom(32))

    def test_truncated_at_chunk_boundary(self):
        stream = encrypt(b'x' * 1000, 100)
        cut = chunked_aead.HEADER_SIZE + 3 * 116
        self.assertRaises(exc.TruncatedPayloadError, decrypt, stream[:cut])

    def test_truncated_to_header(self):
        stream = encrypt(b'x' * 1000, 100)
        self.assertRaises(exc.TruncatedPayloadError, decrypt,
                          stream[:chunked_aead.HEADER_SIZE])

    def test_truncated_inside_header(self):
        stream = encrypt(b'x' * 1000, 100)
        self.assertRaises(exc.TruncatedPayloadError, decrypt, stream[:20])

    def test_header_of_more_bytes_is_refused(self):
        # Found by fuzzing: struct.error, not a PackageError.
        stream = encrypt(b'x' * 1000, 100)
        error = self.assertRaises(exc.PayloadFormatError,
                                  chunked_aead.StreamHeader.from_bytes,
                                  stream[:chunked_aead.HEADER_SIZE + 1])
        self.assertIn('a stream header of %d bytes, not %d'
                      % (chunked_aead.HEADER_SIZE + 1,
                         chunked_aead.HEADER_SIZE), str(error))

    def test_truncated_inside_a_chunk(self):
        stream = encrypt(b'x' * 1000, 100)
        cut = chunked_aead.HEADER_SIZE + 3 * 116 + 50
        self.assertRaises(exc.ChunkAuthenticationError, decrypt,
                          stream[:cut])

    def test_whole_chunks_appended(self):
        stream = encrypt(b'x' * 1000, 100)
        self.assertRaises(exc.TrailingDataError, decrypt,
                          stream + frames(stream, 100)[0])

    def test_chunks_swapped(self):
        stream = encrypt(bytes(range(256)) * 4, 100)
        parts = frames(stream, 100)
        parts[1], parts[2] = parts[2], parts[1]
        self.assertRaises(exc.ChunkAuthenticationError, decrypt,
                          stream[:chunked_aead.HEADER_SIZE] + b''.join(parts))

    def test_bad_magic(self):
        stream = encrypt(b'x', 100)
        self.assertRaises(exc.PayloadFormatError, decrypt, b'X' + stream[1:])

    def test_unsupported_version(self):
        stream = bytearray(encrypt(b'x', 100))
        stream[len(chunked_aead.MAGIC)] = 2
        self.assertRaises(exc.PayloadFormatError, decrypt, bytes(stream))

    def test_chunk_size_above_maximum(self):
        self.assertRaises(exc.PayloadFormatError, chunked_aead.StreamHeader,
                          chunked_aead.MAX_CHUNK_SIZE + 1, KEY_ID,
                          b's' * chunked_aead.SALT_SIZE)

    def test_reads_at_most_two_chunks_ahead(self):
        chunk_size = 1000
        stream = encrypt(os.urandom(50 * chunk_size), chunk_size)
        source = io.BytesIO(stream)
        decryptor = chunked_aead.open_decryptor(source, KEY)
        frame = chunk_size + chunked_aead.TAG_SIZE
        delivered = 0
        while True:
            data = decryptor.read(100)
            if not data:
                break
            delivered += len(data)
            consumed = (source.tell() - chunked_aead.HEADER_SIZE) // frame
            self.assertLessEqual(consumed * chunk_size - delivered,
                                 2 * chunk_size)
        self.assertEqual(50 * chunk_size, delivered)

    def test_write_after_close(self):
        encryptor = chunked_aead.ChunkEncryptor(io.BytesIO(), KEY, KEY_ID,
                                                16)
        encryptor.close()
        self.assertRaises(ValueError, encryptor.write, b'x')


class TestChunkFramingProperties(base.TestCase):

    @PROPERTY
    @given(plaintext=st.binary(max_size=3000),
           chunk_size=st.integers(min_value=1, max_value=700),
           pieces=st.lists(st.integers(min_value=0, max_value=900),
                           max_size=6),
           read_size=st.sampled_from([-1, 1, 7, 100, 4096]))
    def test_round_trip(self, plaintext, chunk_size, pieces, read_size):
        stream = encrypt(plaintext, chunk_size, pieces)
        expected_chunks = max(1, -(-len(plaintext) // chunk_size))
        self.assertEqual(chunked_aead.HEADER_SIZE + len(plaintext)
                         + expected_chunks * chunked_aead.TAG_SIZE,
                         len(stream))
        self.assertEqual(plaintext, decrypt(stream, read_size=read_size))

    @PROPERTY
    @given(plaintext=st.binary(max_size=2000),
           chunk_size=st.integers(min_value=1, max_value=500),
           data=st.data())
    def test_any_flipped_bit_is_detected(self, plaintext, chunk_size, data):
        stream = bytearray(encrypt(plaintext, chunk_size))
        position = data.draw(st.integers(0, len(stream) - 1))
        stream[position] ^= 1 << data.draw(st.integers(0, 7))
        self.assertRaises(DETECTED, decrypt, bytes(stream))

    @PROPERTY
    @given(plaintext=st.binary(max_size=2000),
           chunk_size=st.integers(min_value=1, max_value=500),
           data=st.data())
    def test_any_truncation_is_detected(self, plaintext, chunk_size, data):
        stream = encrypt(plaintext, chunk_size)
        length = data.draw(st.integers(0, len(stream) - 1))
        self.assertRaises(DETECTED, decrypt, stream[:length])

    @PROPERTY
    @given(plaintext=st.binary(max_size=2000),
           chunk_size=st.integers(min_value=1, max_value=500),
           extra=st.binary(min_size=1, max_size=600))
    def test_any_appended_data_is_detected(self, plaintext, chunk_size,
                                           extra):
        stream = encrypt(plaintext, chunk_size)
        self.assertRaises(DETECTED, decrypt, stream + extra)

    @PROPERTY
    @given(plaintext=st.binary(min_size=2, max_size=2000), data=st.data())
    def test_any_reordering_is_detected(self, plaintext, data):
        chunk_size = data.draw(st.integers(1, len(plaintext) // 2))
        stream = encrypt(plaintext, chunk_size)
        parts = frames(stream, chunk_size)
        order = data.draw(st.permutations(range(len(parts))))
        assume(order != list(range(len(parts))))
        reordered = b''.join(parts[i] for i in order)
        self.assertRaises(DETECTED, decrypt,
                          stream[:chunked_aead.HEADER_SIZE] + reordered)
