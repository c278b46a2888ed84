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

"""How the files are written: direct I/O, its fallbacks, late failures."""

import errno
import fcntl
import hashlib
import os
import threading
from unittest import mock

import fixtures

from trove_upgrade.common import exception as exc
from trove_upgrade.package_format import chunked_aead
from trove_upgrade.package_format import safe_unpack
from trove_upgrade.package_format import writeback
from trove_upgrade.tests.unit.package_format import base

# Several writes per file, a partial last block, and an empty file.
SIZES = (70000, 20000, 0, 3 * 4096)
WRITE_SIZE = 4 * 4096


class WriterTestCase(base.PackagingTestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.MonkeyPatch(
            'trove_upgrade.package_format.safe_unpack.WRITE_SIZE', WRITE_SIZE))
        self.path, self.manifest = self.build(sizes=SIZES)
        self.opened = {}
        self.opens = []
        self.ranges = {}
        real_open, real_start = os.open, writeback.start

        def recording_open(path, flags, *args, **kwargs):
            fd = real_open(path, flags, *args, **kwargs)
            self.opened[fd] = os.path.basename(path)
            self.opens.append((self.opened[fd], flags))
            return fd

        def recording_start(fd, offset, length):
            name = self.opened[fd]
            self.ranges.setdefault(name, []).append((offset, length))
            real_start(fd, offset, length)

        self.useFixture(fixtures.MonkeyPatch(
            'trove_upgrade.package_format.safe_unpack.os.open',
            recording_open))
        self.useFixture(fixtures.MonkeyPatch(
            'trove_upgrade.package_format.writeback.start', recording_start))

    def open_fds(self):
        return set(os.listdir('/proc/self/fd'))

    def assertExtracted(self):
        files = self.verify_payload(self.path)
        for entry, path in zip(self.manifest.files, files):
            data = self.read(path)
            self.assertEqual(entry.sha256, hashlib.sha256(data).hexdigest())
        return files

    def assertOSErrorLeavesNothing(self, function, number, message):
        """``os.<function>`` failing is raised, leaving no file, no fd."""
        def failing(*args):
            raise OSError(number, message)

        before = self.open_fds()
        with mock.patch.object(safe_unpack.os, function, failing):
            self.assertRaises(OSError, self.verify_payload, self.path)
        self.assertNothingExtracted()
        self.assertEqual(before, self.open_fds())

    def assertWrittenBack(self, name, size):
        """Writeback started over the whole file, in order, once."""
        ranges = self.ranges.get(name, [])
        self.assertEqual(list(range(0, size, WRITE_SIZE))[:len(ranges)],
                         [offset for offset, _ in ranges])
        self.assertEqual(size, sum(length for _, length in ranges))


class TestDirectIO(WriterTestCase):

    def test_files_are_opened_for_direct_io(self):
        self.assertExtracted()
        names = {f.name for f in self.manifest.files}
        flags = [f for name, f in self.opens if name in names]
        self.assertEqual(len(names), len(flags))
        for flag in flags:
            self.assertTrue(flag & os.O_DIRECT)

    def test_only_partial_last_blocks_go_through_the_page_cache(self):
        self.assertExtracted()
        for entry in self.manifest.files:
            tail = entry.size % safe_unpack.ALIGNMENT
            expected = [(entry.size - tail, tail)] if tail else []
            self.assertEqual(expected, self.ranges.get(entry.name, []))

    def test_refused_at_open_falls_back_to_the_page_cache(self):
        recording_open = os.open

        def no_direct_io(path, flags, *args, **kwargs):
            if flags & os.O_DIRECT:
                raise OSError(errno.EINVAL, 'Invalid argument')
            return recording_open(path, flags, *args, **kwargs)

        with mock.patch.object(safe_unpack.os, 'open', no_direct_io):
            self.assertExtracted()
        for entry in self.manifest.files:
            self.assertWrittenBack(entry.name, entry.size)

    def test_refused_at_write_falls_back_to_the_page_cache(self):
        real_write = os.write

        def no_direct_write(fd, data):
            if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT:
                raise OSError(errno.EINVAL, 'Invalid argument')
            return real_write(fd, data)

        with mock.patch.object(safe_unpack.os, 'write', no_direct_write):
            self.assertExtracted()
        for entry in self.manifest.files:
            self.assertWrittenBack(entry.name, entry.size)

    def test_other_write_errors_are_not_hidden(self):
        self.assertOSErrorLeavesNothing('write', errno.ENOSPC,
                                        'No space left on device')


class TestLateFailures(WriterTestCase):
    """Found after files were written and fsynced: nothing remains."""

    def test_tampered_last_chunk(self):
        data = bytearray(self.read(self.path))
        data[-1] ^= 0x01
        self.write(self.path, bytes(data))
        synced = []
        first_synced = threading.Event()
        real_fsync = os.fsync
        real_open = chunked_aead.FrameDecryptor.open

        def recording_fsync(fd):
            real_fsync(fd)
            synced.append(self.opened[fd])
            first_synced.set()

        def open_last_after_a_fsync(decryptor, counter, frame, last):
            # Fails late: once the first file is written and durable.
            if last:
                first_synced.wait(30)
            return real_open(decryptor, counter, frame, last)

        before = self.open_fds()
        with mock.patch.object(safe_unpack.os, 'fsync', recording_fsync), \
                mock.patch.object(chunked_aead.FrameDecryptor, 'open',
                                  open_last_after_a_fsync):
            self.assertRefused(exc.ChunkAuthenticationError, self.path)
        self.assertIn(self.manifest.files[0].name, synced)
        self.assertEqual(before, self.open_fds())

    def test_fsync_error(self):
        self.assertOSErrorLeavesNothing('fsync', errno.EIO,
                                        'Input/output error')


class TestEmptyFiles(base.PackagingTestCase):

    def test_empty_first_file_is_closed(self):
        path, manifest = self.build(sizes=(0, 5000))
        self.assertEqual(0, manifest.files[0].size)
        before = set(os.listdir('/proc/self/fd'))
        files = self.verify_payload(path)
        self.assertEqual([0, 5000], [os.path.getsize(f) for f in files])
        self.assertEqual(before, set(os.listdir('/proc/self/fd')))


class TestStage(base.PackagingTestCase):

    def test_put_before_start_is_an_error(self):
        stage = safe_unpack._Stage(lambda item: None, 1)
        self.assertRaises(RuntimeError, stage.put, 'item')

    def test_put_after_finish_is_an_error(self):
        done = []
        stage = safe_unpack._Stage(done.append, 1)
        stage.start()
        stage.put('item')
        stage.finish()
        self.assertEqual(['item'], done)
        self.assertRaises(RuntimeError, stage.put, 'late')


class TestWriteback(base.PackagingTestCase):

    def test_available_on_linux(self):
        self.assertTrue(writeback.AVAILABLE)

    def test_starts_on_a_written_file(self):
        path = os.path.join(self.tmp, 'file')
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        self.addCleanup(os.close, fd)
        os.write(fd, b'x' * 10000)
        writeback.start(fd, 0, 10000)
        os.fsync(fd)
        self.assertEqual(10000, os.path.getsize(path))

    def test_errors_are_left_to_fsync(self):
        fd = os.open(self.tmp, os.O_RDONLY | os.O_DIRECTORY)
        os.close(fd)
        writeback.start(fd, 0, 4096)

    def test_missing_call_does_nothing(self):
        with mock.patch.object(writeback, '_sync_file_range', None):
            writeback.start(0, 0, 4096)
