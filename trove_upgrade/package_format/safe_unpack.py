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

"""Decrypt a format 2 payload into the signed files: nothing is parsed.

The plaintext of a format 2 payload is the files of the manifest, in its
(signed, sorted) order, end to end, with no archive header. The reader
takes exactly each signed size from the plaintext and writes it to a new
file in a private staging directory; no name, size, type or permission
ever comes from the payload, so there is no header to lie and no parser to
fool. Every byte is inside a chunk that authenticated, but the encryption
key is held by every guest, so only the signed SHA-256 of the ciphertext
makes the files genuine: the staging directory is renamed into place after
that hash matched, and deleted on any failure.

The payload is hashed once. Decryption under the key the manifest names
maps the signed ciphertext to exactly one plaintext, so once the
ciphertext hash matches, every file is byte for byte what the signer
encrypted; hashing each file again would cost a second pass over every
byte and prove nothing more (the manifest's per-file hashes remain for
tools and for people).

Four stages overlap on a multi-core machine, each releasing the GIL for
its bulk work: a reader thread reads ciphertext frames into a small pool of
reused buffers and hashes them, the calling thread decrypts each frame, a
writer thread writes the plaintext out (with direct I/O where it can, see
:class:`_FileWriter`), and a disk thread starts the writeback of what went
through the page cache (:mod:`writeback`) and fsyncs each finished file
while the next one is written, so the disk works while the CPU decrypts
instead of after it. The frame sizes follow from the signed payload size,
so the reader never looks at the data to decide where a chunk ends.
"""

import contextlib
import errno
import fcntl
import functools
import mmap
import os
import queue
import shutil
import tempfile
import threading

from trove_upgrade.common import exception as exceptions
from trove_upgrade.package_format import chunked_aead
from trove_upgrade.package_format import writeback

# Ciphertext buffers in flight: four at the default chunk size, two (the
# least that overlaps) for chunks over 2 MiB.
MAX_BUFFERED_BYTES = 8 * 1024 * 1024
# Plaintext is written in pieces of this size, from one reused buffer
# aligned for direct I/O (a page; any block size up to 4 KiB divides it).
WRITE_SIZE = 4 * 1024 * 1024
ALIGNMENT = 4096
O_DIRECT = getattr(os, 'O_DIRECT', 0)
_DONE = object()


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
            '%s already exists; extract into a new directory'
            % exceptions.quoted(dest_dir, 200))
    parent = os.path.dirname(dest_dir)
    stage = tempfile.mkdtemp(
        prefix='.%s.partial-' % os.path.basename(dest_dir), dir=parent)
    try:
        yield stage
        writeback.fsync_directory(stage)
        if os.path.lexists(dest_dir):
            raise exceptions.DestinationExistsError(
                '%s appeared while extracting'
                % exceptions.quoted(dest_dir, 200))
        os.rename(stage, dest_dir)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    writeback.fsync_directory(parent)


def frame_sizes(payload_size, chunk_size):
    """Sizes of the ciphertext frames after the header, from signed sizes."""
    body = payload_size - chunked_aead.HEADER_SIZE
    frame = chunk_size + chunked_aead.TAG_SIZE
    full, rest = divmod(body, frame)
    if rest == 0 and full:
        full, rest = full - 1, frame
    if body < chunked_aead.TAG_SIZE or rest < chunked_aead.TAG_SIZE:
        raise exceptions.PayloadFormatError(
            'a payload of %d bytes cannot hold chunks of %d bytes'
            % (payload_size, chunk_size))
    return full, rest


class _Stage(threading.Thread):
    """A daemon thread feeding items from a bounded queue to ``work``.

    The first exception stops it; :meth:`put` and :meth:`finish` re-raise
    it in the calling thread. :meth:`abort` makes it drop what is left.
    """

    def __init__(self, work, depth):
        super().__init__(daemon=True)
        self.inbox = queue.Queue(depth)
        self.error = None
        self._work = work
        self._aborted = threading.Event()

    def run(self):
        try:
            while True:
                item = self.inbox.get()
                if item is _DONE or self._aborted.is_set():
                    return
                self._work(item)
        except BaseException as exc:
            self.error = exc

    def put(self, item):
        while self.is_alive() or self.error is not None:
            if self.error is not None:
                raise self.error
            try:
                self.inbox.put(item, timeout=0.1)
                return
            except queue.Full:
                continue
        # Never drop an item silently: nothing would sync or close it.
        raise RuntimeError('put to a stage that is not running')

    def finish(self):
        self.put(_DONE)
        self.join()
        if self.error is not None:
            raise self.error

    def abort(self):
        self._aborted.set()
        while self.is_alive():
            try:
                self.inbox.put_nowait(_DONE)
            except queue.Full:
                pass
            self.join(0.05)


class _FrameReader(threading.Thread):
    """Reads each frame into a free buffer, hashes it, queues it.

    Frame sizes come from the signed payload size; a short source is
    truncated, one byte past the signed size is endless data.
    """

    def __init__(self, source, sizes, frame, digest):
        super().__init__(daemon=True)
        count = max(2, min(4, MAX_BUFFERED_BYTES // frame))
        self.free = queue.Queue()
        for _ in range(count):
            self.free.put(bytearray(frame))
        self.frames = queue.Queue(count)
        self._source = source
        self._sizes = sizes
        self._digest = digest
        self._stopped = threading.Event()

    def _wait(self, action, *args):
        while not self._stopped.is_set():
            try:
                return action(*args, timeout=0.1)
            except (queue.Empty, queue.Full):
                continue
        raise _Stopped()

    def _read_into(self, view, counter):
        got = 0
        while got < len(view):
            n = self._source.readinto(view[got:])
            if not n:
                raise exceptions.TruncatedPayloadError(
                    'the payload ends inside chunk %d, before its signed '
                    'size' % counter)
            got += n

    def run(self):
        try:
            outcome = self._read_frames()
        except _Stopped:
            return
        except BaseException as exc:
            outcome = exc
        try:
            self._wait(self.frames.put, outcome)
        except _Stopped:
            # The main thread refused the package first (a forged chunk)
            # while this one read on to the truncation or the trailing
            # data: that error has nobody to go to. Raised from here,
            # the _Stopped printed a thread traceback on stderr.
            pass

    def _read_frames(self):
        """Queue every frame; _DONE once the source ended where signed."""
        full, last = self._sizes
        for counter in range(full + 1):
            buf = self._wait(self.free.get)
            view = memoryview(buf)[:last if counter == full else None]
            self._read_into(view, counter)
            self._digest.update(view)
            self._wait(self.frames.put,
                       (counter, counter == full, buf, view))
        if self._source.read(1):
            raise exceptions.EndlessDataError(
                'the payload goes on past its signed size')
        return _DONE

    def stop(self):
        self._stopped.set()
        self.join()


class _Stopped(Exception):
    pass


class _FileWriter:
    """Cuts the plaintext into the signed files and writes them.

    Each file is written through an aligned buffer with ``O_DIRECT`` where
    the file system allows it: the bytes go from the buffer to the disk
    without new page-cache pages, which on a busy (or virtual) machine
    cost several times more CPU than the copy itself, and without dirty
    pages left for the fsync. The last, partial block of a file, and every
    file where direct I/O is refused, are written through the page cache,
    with their writeback started as they are written. Durability comes from
    the fsync either way.
    """

    def __init__(self, files, stage_dir, disk):
        self._disk = disk
        self._pending = list(files)
        self._stage_dir = stage_dir
        self._buffer = memoryview(mmap.mmap(-1, WRITE_SIZE))
        self._fill = 0
        self._fd = None
        self._direct = False
        self._entry = None
        self._left = 0
        self._offset = 0
        self._writeback_from = 0

    def begin(self):
        """Create the first file, and those of size 0 before it.

        Not in ``__init__``: the disk thread must run by then, to sync and
        close a file that is finished at once.
        """
        self._open_next()

    def _open_next(self):
        while self._fd is None and self._pending:
            self._entry = self._pending.pop(0)
            path = os.path.join(self._stage_dir, self._entry.name)
            flags = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                     | os.O_CLOEXEC)
            self._direct = bool(O_DIRECT)
            try:
                self._fd = os.open(path, flags | O_DIRECT, 0o600)
            except OSError as exc:
                if not O_DIRECT or exc.errno != errno.EINVAL:
                    raise
                self._direct = False
                self._fd = os.open(path, flags, 0o600)
            self._left = self._entry.size
            self._offset = self._writeback_from = 0
            if self._left == 0:
                self._close_current()

    def _close_current(self):
        fd, self._fd = self._fd, None
        self._disk.sync_and_close(fd)

    def _buffered(self):
        flags = fcntl.fcntl(self._fd, fcntl.F_GETFL)
        fcntl.fcntl(self._fd, fcntl.F_SETFL, flags & ~O_DIRECT)
        self._direct = False

    def _write_all(self, data):
        while data:
            try:
                written = os.write(self._fd, data)
            except OSError as exc:
                # The file system wants another alignment or does its
                # own buffering after all: the page cache it is.
                if not self._direct or exc.errno != errno.EINVAL:
                    raise
                self._buffered()
                continue
            data = data[written:]
            self._offset += written

    def _flush(self):
        data, self._fill = self._buffer[:self._fill], 0
        if self._direct:
            whole = len(data) - len(data) % ALIGNMENT
            self._write_all(data[:whole])
            data = data[whole:]
            if self._direct:
                self._writeback_from = self._offset
                if data:
                    self._buffered()
        self._write_all(data)
        if self._offset > self._writeback_from:
            self._disk.writeback(self._fd, self._writeback_from,
                                 self._offset - self._writeback_from)
            self._writeback_from = self._offset

    def write(self, plaintext):
        view = memoryview(plaintext)
        while view:
            if self._fd is None:
                raise exceptions.PlaintextSizeError(
                    'the decrypted payload goes on past the signed files')
            taken = min(len(view), self._left, WRITE_SIZE - self._fill)
            self._buffer[self._fill:self._fill + taken] = view[:taken]
            self._fill += taken
            self._left -= taken
            view = view[taken:]
            if self._fill == WRITE_SIZE or self._left == 0:
                self._flush()
            if self._left == 0:
                self._close_current()
                self._open_next()

    def close(self):
        if self._fd is not None or self._pending:
            raise exceptions.PlaintextSizeError(
                'the decrypted payload ends inside file %s'
                % exceptions.quoted(self._entry.name))

    def abort(self):
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def extract(source, header, key, files, payload_size, stage_dir, digest):
    """Decrypt ``source`` (after its header) into ``files`` in ``stage_dir``.

    ``digest`` already holds the header; every ciphertext byte is added to
    it. The caller compares it with the signed hash before trusting the
    files. Raises a PayloadError subclass or DestinationExistsError.
    """
    sizes = frame_sizes(payload_size, header.chunk_size)
    decryptor = chunked_aead.FrameDecryptor(key, header)
    reader = _FrameReader(source, sizes,
                          header.chunk_size + chunked_aead.TAG_SIZE, digest)
    disk = _DiskSync()
    writer = _FileWriter(files, stage_dir, disk)
    write_stage = _Stage(writer.write, 2)
    disk.start()
    write_stage.start()
    reader.start()
    try:
        writer.begin()
        while True:
            item = reader.frames.get()
            if item is _DONE:
                break
            if isinstance(item, BaseException):
                raise item
            counter, last, buf, view = item
            plaintext = decryptor.open(counter, view, last)
            view.release()
            reader.free.put(buf)
            write_stage.put(plaintext)
        write_stage.finish()
        writer.close()
        disk.finish()
    except BaseException:
        reader.stop()
        write_stage.abort()
        # Before the writer closes its file: no writeback may run on a
        # closed (and perhaps reused) descriptor.
        disk.abort()
        writer.abort()
        raise


class _DiskSync:
    """Makes the staged files durable, in a thread of its own.

    The writer hands it each range it wrote, to start its writeback, and
    each finished file, to fsync and close; they run in that order.
    """

    def __init__(self):
        self._opened = set()
        self._stage = _Stage(_call, 0)

    def start(self):
        self._stage.start()

    def writeback(self, fd, offset, length):
        self._stage.put(functools.partial(writeback.start, fd, offset,
                                          length))

    def sync_and_close(self, fd):
        self._opened.add(fd)
        self._stage.put(functools.partial(self._sync_and_close, fd))

    def _sync_and_close(self, fd):
        try:
            os.fsync(fd)
        finally:
            # Forgotten before it is closed: the number may be reused at
            # once.
            self._opened.discard(fd)
            os.close(fd)

    def finish(self):
        self._stage.finish()

    def abort(self):
        """Stop the thread, then close the files it had not closed."""
        self._stage.abort()
        for fd in list(self._opened):
            os.close(fd)
        self._opened.clear()


def _call(job):
    job()
