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

"""The agent's crash-safe memory: one JSON file beside the installs.

Everything the agent must not forget across a ``kill -9`` lives here: the
upgrade in progress and the last step it reached, the last known good
version, the upgrades waiting to run, the ids of upgrades already handled
(so a message delivered twice runs once), the ids of sealed messages
accepted recently (so a replayed one is refused) and the outbox of reports
the conductor has not received yet.

A write goes to a temporary file that is fsynced, renamed over the journal
with ``os.replace`` and followed by an fsync of the directory, so a crash
leaves either the old journal or the new one, never a mix; a write that
fails (a full disk) removes its temporary file and leaves the old one.
Every reader and writer holds ``InstallRootLock``, the exclusive ``fcntl``
lock that also guards the installs and the ``current`` symlink.
"""

import contextlib
import copy
import fcntl
import json
import os
import threading

from trove_upgrade.common import exception
from trove_upgrade.common import rpc_interface
from trove_upgrade.package_format import writeback

JOURNAL_NAME = 'journal.json'
TMP_SUFFIX = '.tmp'
LOCK_NAME = '.lock'
FORMAT = 1

# How many handled upgrade ids are remembered for idempotency.
PROCESSED_LIMIT = 1000


class JournalError(exception.TroveUpgradeError):
    """The journal cannot be read; the agent must not guess its state."""


class InstallRootLock:
    """Exclusive lock over the install root, shared by threads and processes.

    ``fcntl.flock`` excludes other processes; the re-entrant thread lock
    excludes the other threads of this process, which share the open file
    and so would not exclude each other through flock alone.
    """

    def __init__(self, root):
        self.path = os.path.join(root, LOCK_NAME)
        self._thread_lock = threading.RLock()
        self._depth = 0
        self._fd = None

    def __enter__(self):
        self._thread_lock.acquire()
        if self._depth == 0:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
                fcntl.flock(fd, fcntl.LOCK_EX)
            except BaseException:
                self._thread_lock.release()
                raise
            self._fd = fd
        self._depth += 1
        return self

    def __exit__(self, *exc):
        self._depth -= 1
        if self._depth == 0:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
        self._thread_lock.release()


def _empty():
    return {
        'format': FORMAT,
        'last_known_good': None,
        'current_upgrade': None,
        'queue': [],
        'processed': {},
        'outbox': [],
        'next_report_seq': 1,
        'seen_messages': {},
    }


def _is_int(value):
    return type(value) is int


def _is_upgrade(value):
    return isinstance(value, dict) and isinstance(value.get('id'), str)


def _is_report(value):
    return (isinstance(value, dict) and _is_int(value.get('seq'))
            and all(name in value for name in rpc_interface.REPORT_FIELDS))


# What every reader takes each field to be: a journal that parses but
# holds anything else (a damaged disk, a hand edit) is refused where it
# is read, not met as a TypeError in whichever thread reads it next.
_SHAPE = {
    'last_known_good': lambda v: v is None or isinstance(v, str),
    'current_upgrade': lambda v: v is None or _is_upgrade(v),
    'queue': lambda v: isinstance(v, list) and all(map(_is_upgrade, v)),
    'processed': lambda v: isinstance(v, dict),
    'outbox': lambda v: isinstance(v, list) and all(map(_is_report, v)),
    'next_report_seq': _is_int,
    'seen_messages': lambda v: isinstance(v, dict) and all(
        type(t) in (int, float) for t in v.values()),
}


def _shape_problem(data):
    """The first field of ``data`` that is not what it must be, or None."""
    for name, check in _SHAPE.items():
        if not check(data[name]):
            return 'its %s is not what the agent writes there' % name
    return None


class UpgradeJournal:
    """Reads and atomically rewrites ``<install_root>/journal.json``."""

    def __init__(self, root, lock=None):
        self.root = root
        self.path = os.path.join(root, JOURNAL_NAME)
        os.makedirs(root, mode=0o700, exist_ok=True)
        self.lock = lock or InstallRootLock(root)

    def read(self):
        """A copy of the journal; changes to it are not saved."""
        with self.lock:
            return copy.deepcopy(self._load())

    @contextlib.contextmanager
    def update(self):
        """Yield the journal for changes and save them atomically.

        Nothing is written when the block raises, so a failed change
        leaves the previous journal in place.
        """
        with self.lock:
            data = self._load()
            yield data
            self._save(data)

    def _load(self):
        try:
            with open(self.path, encoding='utf-8') as f:
                data = json.load(f)
        except FileNotFoundError:
            return _empty()
        except (OSError, ValueError, RecursionError) as e:
            raise JournalError('cannot read the agent journal %s: %s'
                               % (self.path, e))
        if not isinstance(data, dict) or data.get('format') != FORMAT or (
                type(data['format']) is not int):
            raise JournalError('the agent journal %s has an unknown format'
                               % self.path)
        base = _empty()
        base.update(data)
        problem = _shape_problem(base)
        if problem:
            raise JournalError('the agent journal %s is damaged: %s'
                               % (self.path, problem))
        return base

    def _save(self, data):
        processed = data['processed']
        if len(processed) > PROCESSED_LIMIT:
            # dicts keep insertion order: forget the oldest ids first.
            for key in list(processed)[:len(processed) - PROCESSED_LIMIT]:
                del processed[key]
        # One name for every writer, who all hold the lock: what a killed
        # writer left is overwritten by the next write, not kept for ever.
        tmp = self.path + TMP_SUFFIX
        try:
            with open(tmp, 'w', encoding='utf-8') as f:
                json.dump(data, f, indent=1, sort_keys=True)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            # A full disk: give back the space the partial copy took.
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        writeback.fsync_directory(self.root)

    # Helpers used by the pipeline and the manager, each one transaction.

    def add_report(self, data, upgrade_id, to_state, detail,
                   from_version, to_version):
        """Queue a report in ``data`` (inside an ``update`` block)."""
        seq = data['next_report_seq']
        data['next_report_seq'] = seq + 1
        data['outbox'].append({
            'seq': seq,
            'upgrade_id': upgrade_id,
            'to_state': to_state,
            'detail': detail,
            'from_version': from_version,
            'to_version': to_version,
        })

    def is_known(self, upgrade_id):
        """True when the upgrade was handled, is running or is queued."""
        data = self.read()
        current = data['current_upgrade']
        return (upgrade_id in data['processed']
                or (current is not None and current['id'] == upgrade_id)
                or any(u['id'] == upgrade_id for u in data['queue']))
