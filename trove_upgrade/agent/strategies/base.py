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

"""The contract between the agent and its download strategies.

The agent uses a strategy through these calls only::

    strategy = strategies.load(name, conf=CONF)
        # StrategyNotAllowedError: name not in [agent] allowed_strategies
        # StrategyNotInstalledError: no trove_upgrade.strategies entry point
        # StrategyConfigError: its drop-in file is unreadable or invalid
    strategy.name
    strategy.check_location(location)
        # cheap: well formed (InvalidLocationError) and reachable
        # (LocationUnreachableError and its subclasses ObjectNotFoundError,
        # AccessDeniedError, RequestRejectedError)
    strategy.fetch(location, dest_path, max_bytes) -> bytes written
        # InvalidLocationError, LocationUnreachableError (and subclasses),
        # SizeLimitExceededError, DownloadError, DestinationError (the local
        # file could not be written: missing directory, disk full)
    strategy.serves_ranges
    strategy.fetch_ranges(location, ranges, dest_path) -> bytes written
        # only where serves_ranges: the byte ranges [(start, length)] of
        # the object, back to back; the errors of fetch, and
        # RangesNotServedError when the server answers with the whole object

Every upgrade fetches two objects: the package at ``location`` and its signed
manifest at ``location + '.manifest'``; every location format accepts that
suffix.

What every strategy guarantees, whatever the transport:

* ``fetch`` writes ``dest_path + '.part'`` and renames it to ``dest_path``
  only when the whole object arrived, after an fsync, so ``dest_path``
  never holds half a download; on failure nothing is left behind.
* ``max_bytes`` is enforced while reading: the attempt stops with
  :class:`~.exception.SizeLimitExceededError` as soon as one byte more arrives,
  whatever size the server announced, so an endless or lying server cannot
  fill the disk.
* Each attempt ends after ``[agent] download_timeout`` seconds. Transient
  failures (:class:`~.exception.TransientError`) are retried
  ``[agent] download_retries`` times, waiting ``download_retry_delay``
  seconds and twice as long each time after; permanent ones (malformed
  location, not found, access denied, size limit) fail at once.
* Errors derive from :class:`~.exception.StrategyError` and read as the
  reason of a FAILED upgrade.
* ``fetch_ranges`` writes exactly ``length`` bytes for each range: one
  byte more is :class:`~.exceptions.SizeLimitExceededError`, fewer a
  transient failure retried from the range's start. What the bytes are is
  the package verifier's business (:mod:`trove_upgrade.package_format
  .payload_ranges`), as for ``fetch``.

Each strategy reads its own settings from the drop-in file
``<[agent] strategy_config_dir>/<name>.conf`` (section ``[<name>]``) into a
private ``ConfigOpts``: see :func:`load_settings`.
"""

import abc
import contextlib
import os
import socket
import threading
import time

from oslo_config import cfg
from oslo_log import log as logging
import tenacity

from trove_upgrade.agent.strategies import exception as exceptions
from trove_upgrade.common import exception as package_exc

LOG = logging.getLogger(__name__)


def load_settings(name, group, opts, config_dir):
    """Parse ``<config_dir>/<name>.conf`` into a ConfigOpts of its own.

    A missing file means defaults. Every value is read once here so that a
    bad value fails when the strategy is loaded, not halfway through an
    upgrade.
    """
    path = os.path.join(config_dir, '%s.conf' % name)
    files = [path] if os.path.exists(path) else []
    settings = cfg.ConfigOpts()
    settings.register_group(group)
    settings.register_opts(opts, group=group)
    try:
        settings(args=[], project='trove-upgrade', prog='trove-upgrade-agent',
                 default_config_files=files, default_config_dirs=[],
                 use_env=False)
        for opt in opts:
            getattr(settings[group.name], opt.dest)
    except (cfg.Error, ValueError) as exc:
        raise exceptions.StrategyConfigError(
            name=name, path=path, reason=exc) from exc
    return settings[group.name]


def server_text(text, limit=package_exc.MAX_QUOTED_LENGTH):
    """Text a server chose, printable and bounded, for a reason."""
    if text is None:
        return None
    text = str(text)
    if text.isprintable() and len(text) <= limit:
        return text
    return package_exc.quoted(text, limit)


def content_length(value):
    """The byte count of a Content-Length header, or None if it is none."""
    if value and value.isascii() and value.isdigit():
        return int(value)
    return None


class Watchdog:
    """Shuts the sockets of an attempt down at its deadline.

    A socket timeout bounds one read, not their sum: a server dripping a
    byte just inside it would hold the attempt for ever. From ``deadline``
    on, the socket of every connection given to :meth:`watch` (anything
    with a ``sock``, read when it fires, so a TLS handshake in progress is
    cut too) is shut down, and again every ``_RECHECK`` seconds until the
    attempt ends, so a connection opened meanwhile is cut as well. Reads
    then end at once, as if the server had closed; the caller's
    :meth:`Strategy.check_deadline` names the timeout. Leaving the
    ``with`` block stops and joins the watchdog's thread.
    """

    _RECHECK = 0.05

    def __init__(self, deadline):
        self._deadline = deadline
        self._connections = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name='download-watchdog')

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc_info):
        self._done.set()
        self._thread.join()
        self._connections = []

    def watch(self, connection):
        self._connections.append(connection)

    def _run(self):
        wait = max(0.0, self._deadline - time.monotonic())
        while not self._done.wait(wait):
            for connection in list(self._connections):
                _shut_down(connection.sock)
            wait = self._RECHECK


def _shut_down(sock):
    if sock is None:
        return
    # The plain socket's shutdown: an SSLSocket's would also drop its TLS
    # state under the reading thread's feet. A socket its owner closed has
    # no fd any more and refuses (EBADF).
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


def remove_quietly(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


class Strategy(metaclass=abc.ABCMeta):
    """One way to download a package; subclasses implement the transport.

    A subclass sets ``name``, ``opt_group`` and ``opts`` (its drop-in
    settings) and implements :meth:`parse_location`, :meth:`_check` and
    :meth:`_fetch_once`. The base class owns retries, timeouts, the
    ``.part`` file and the size cap bookkeeping.
    """

    name = None
    opt_group = None
    opts = ()
    # Whether the transport reads part of an object (``fetch_ranges``).
    serves_ranges = False

    def __init__(self, conf):
        self.conf = conf
        self.settings = load_settings(self.name, self.opt_group, self.opts,
                                      conf.agent.strategy_config_dir)
        self.timeout = conf.agent.download_timeout
        self.sleep = time.sleep

    @abc.abstractmethod
    def parse_location(self, location):
        """The transport's view of a location, or InvalidLocationError.

        Purely syntactic: no I/O.
        """

    @abc.abstractmethod
    def _check(self, target, deadline):
        """Check that ``target`` exists, without downloading it."""

    @abc.abstractmethod
    def _fetch_once(self, target, part_path, max_bytes, deadline):
        """One attempt to write ``target`` into ``part_path``.

        Returns the size of ``part_path`` once complete. ``part_path`` may
        hold the bytes of a broken previous attempt; a strategy that cannot
        resume starts it over.
        """

    def _fetch_range_once(self, target, out, start, length, deadline):
        """One attempt to append bytes ``start`` to ``start + length``.

        Only strategies that set ``serves_ranges`` implement it; returns
        the bytes appended to ``out``, at most ``length``.
        """
        raise NotImplementedError()

    def check_location(self, location):
        """Raise unless ``location`` is well formed and reachable."""
        target = self.parse_location(location)
        self._with_retries(location, exceptions.LocationUnreachableError,
                           lambda: self._check(target, self._deadline()))

    def fetch(self, location, dest_path, max_bytes):
        """Download ``location`` to ``dest_path``; return its size."""
        target = self.parse_location(location)
        part_path = dest_path + '.part'
        try:
            remove_quietly(part_path)
            open(part_path, 'wb').close()
        except OSError as exc:
            raise exceptions.DestinationError(path=part_path,
                                              reason=exc.strerror) from exc
        try:
            size = self._with_retries(
                location, exceptions.DownloadError,
                lambda: self._fetch_once(target, part_path, max_bytes,
                                         self._deadline()))
            try:
                self._commit(part_path, dest_path)
            except OSError as exc:
                raise exceptions.DestinationError(path=dest_path,
                                                  reason=exc.strerror) from exc
        except BaseException:
            remove_quietly(part_path)
            raise
        LOG.info('Downloaded %(location)s (%(size)d bytes) to %(dest)s with '
                 'strategy %(name)s', {'location': location, 'size': size,
                                       'dest': dest_path, 'name': self.name})
        return size

    def fetch_ranges(self, location, ranges, dest_path):
        """Write byte ranges of ``location`` back to back to ``dest_path``.

        ``ranges`` is a list of ``(start, length)``; returns the bytes
        written, their sum. Each range is retried on its own.
        """
        target = self.parse_location(location)
        part_path = dest_path + '.part'
        try:
            remove_quietly(part_path)
            out = open(part_path, 'wb')
        except OSError as exc:
            raise exceptions.DestinationError(path=part_path,
                                              reason=exc.strerror) from exc
        try:
            with out:
                for start, length in ranges:
                    self._with_retries(
                        location, exceptions.DownloadError,
                        self._range_attempt(target, out, start, length))
            self._commit(part_path, dest_path)
        except OSError as exc:
            remove_quietly(part_path)
            raise exceptions.DestinationError(path=dest_path,
                                              reason=exc.strerror) from exc
        except BaseException:
            remove_quietly(part_path)
            raise
        size = sum(length for _, length in ranges)
        LOG.info('Downloaded %(count)d range(s) of %(location)s (%(size)d '
                 'bytes) to %(dest)s with strategy %(name)s',
                 {'count': len(ranges), 'location': location, 'size': size,
                  'dest': dest_path, 'name': self.name})
        return size

    def _range_attempt(self, target, out, start, length):
        offset = out.tell()

        def attempt():
            out.seek(offset)
            out.truncate()
            written = self._fetch_range_once(target, out, start, length,
                                             self._deadline())
            if written != length:
                raise exceptions.TransientError(
                    reason='received %d of the %d bytes of the range at '
                           '%d' % (written, length, start))
            return written
        return attempt

    def invalid(self, location, reason):
        return exceptions.InvalidLocationError(
            location=location, strategy=self.name, reason=reason)

    def too_big(self, location, max_bytes, reason):
        return exceptions.SizeLimitExceededError(
            location=location, strategy=self.name, max_bytes=max_bytes,
            reason=reason)

    def write_capped(self, chunks, out, written, location, max_bytes,
                     deadline):
        """Write ``chunks`` to ``out``, at most ``max_bytes`` in total.

        ``written`` bytes are already in ``out`` (a resumed transfer).
        Stops at the first byte beyond the cap and at the deadline, before
        writing, so the cap holds whatever the server announced.
        """
        for chunk in chunks:
            written += len(chunk)
            if written > max_bytes:
                raise self.too_big(location, max_bytes,
                                   'more data kept arriving after %d bytes'
                                   % max_bytes)
            try:
                out.write(chunk)
            except OSError as exc:
                raise exceptions.DestinationError(path=out.name,
                                                  reason=exc.strerror) from exc
            self.check_deadline(deadline)
        return written

    def check_deadline(self, deadline):
        if time.monotonic() > deadline:
            raise exceptions.TransientError(
                reason='the attempt took longer than [agent] '
                       'download_timeout (%s s)' % self.timeout)

    def _deadline(self):
        return time.monotonic() + self.timeout

    def _with_retries(self, location, final_error, attempt):
        agent = self.conf.agent
        attempts = agent.download_retries + 1
        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(attempts),
            wait=tenacity.wait_exponential(
                multiplier=agent.download_retry_delay,
                max=agent.download_retry_max_delay),
            retry=tenacity.retry_if_exception_type(
                exceptions.TransientError),
            before_sleep=self._log_retry(location),
            sleep=self.sleep,
            reraise=True)
        try:
            return retrying(attempt)
        except exceptions.TransientError as exc:
            kwargs = {'location': location, 'strategy': self.name,
                      'reason': exc}
            if final_error is exceptions.DownloadError:
                kwargs['attempts'] = attempts
            else:
                kwargs['reason'] = ('%s (after %d attempt(s))'
                                    % (exc, attempts))
            raise final_error(**kwargs) from exc

    def _log_retry(self, location):
        def log(retry_state):
            LOG.warning('Strategy %(name)s: attempt %(n)d on %(location)s '
                        'failed (%(error)s); retrying in %(wait).1f s',
                        {'name': self.name,
                         'n': retry_state.attempt_number,
                         'location': location,
                         'error': retry_state.outcome.exception(),
                         'wait': retry_state.next_action.sleep})
        return log

    @staticmethod
    def _commit(part_path, dest_path):
        with open(part_path, 'rb') as part:
            os.fsync(part.fileno())
        os.replace(part_path, dest_path)
        dir_fd = os.open(os.path.dirname(os.path.abspath(dest_path)),
                         os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
