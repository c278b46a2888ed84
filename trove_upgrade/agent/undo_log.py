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

"""Put back every file a multi-step change touched, even after a kill -9.

Adoption changes files in several places (the virtualenv, the install
root, ``/usr/local/bin``, systemd's and Trove's configuration); a step
that fails, or a process killed between two steps, must not leave some
changed and the others not. Before a step changes a path,
:meth:`UndoLog.will_change` records it in the log file (written
atomically by :func:`guest_files.write_text`) and keeps what stood there
under a backup name beside it, ``.<name>.trove-upgrade-undo``: a hard
link, since every writer replaces a file by rename and so leaves the old
inode (its bytes, mode and owner) to the backup; or, when the caller
replaces a directory, the directory itself, renamed. :meth:`undo` puts
every recorded path back, newest first; :meth:`done` removes the log,
the single atomic commit point, then the backups. A log found at start
belongs to a run that was killed: undoing it leaves the files as they
were before that run.

Each undo is idempotent, so an undo that fails half way, or is killed,
is finished by the next one: a path recorded as absent is removed if it
is there; a path recorded as present is put back from its backup, and
with no backup it was never changed.
"""

import contextlib
import errno
import json
import os
import shutil

from oslo_log import log as logging

from trove_upgrade.agent import guest_files
from trove_upgrade.common import exception
from trove_upgrade.package_format import writeback

LOG = logging.getLogger(__name__)

FORMAT = 1
BACKUP_SUFFIX = '.trove-upgrade-undo'
MAX_LOG_SIZE = 64 * 1024


class UndoLogError(exception.TroveUpgradeError):
    """The log cannot be read or a path cannot be put back."""

    def __init__(self, message):
        super().__init__(guest_files.bounded(message))


def backup_path(path):
    head, name = os.path.split(path)
    return os.path.join(head, '.%s%s' % (name, BACKUP_SUFFIX))


def _is_dir(path):
    return os.path.isdir(path) and not os.path.islink(path)


def _remove(path):
    if _is_dir(path):
        shutil.rmtree(path)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def _valid(entry):
    return (isinstance(entry, dict)
            and isinstance(entry.get('step'), str)
            and isinstance(entry.get('path'), str)
            and os.path.isabs(entry['path'])
            and entry.get('kind') in ('path', 'dir')
            and isinstance(entry.get('existed'), bool))


class UndoLog:
    """The paths one run changed, kept at ``path`` until it is done."""

    def __init__(self, path):
        self.path = path
        self.entries = []

    def pending(self):
        """True when a killed run left its log: undo it first."""
        return os.path.lexists(self.path)

    def load(self):
        """Read the log a killed run left."""
        try:
            data = json.loads(guest_files.read_text(self.path, MAX_LOG_SIZE))
        # RecursionError: JSON nested thousands deep.
        except (guest_files.UnreadableFileError, ValueError,
                RecursionError) as e:
            raise UndoLogError('cannot read the undo log: %s' % e)
        if not isinstance(data, dict):
            data = {}
        entries = data.get('entries')
        if (data.get('format') != FORMAT or not isinstance(entries, list)
                or not all(map(_valid, entries))):
            raise UndoLogError('the undo log %s is not one this version '
                               'writes' % self.path)
        self.entries = entries

    def _save(self):
        guest_files.write_text(self.path, json.dumps(
            {'format': FORMAT, 'entries': self.entries}, indent=1))

    def will_change(self, step, path, replace_dir=False):
        """Record ``path`` and keep what is there; call before changing it.

        A directory at ``path`` is kept (renamed) only with
        ``replace_dir``: otherwise it stays, and the step's writer fails
        on it.
        """
        path = os.path.abspath(path)
        if any(e['path'] == path for e in self.entries):
            return
        backup = backup_path(path)
        # Left by a run killed after its commit, before its clean-up.
        _remove(backup)
        existed = os.path.lexists(path)
        self.entries.append({'step': step, 'path': path, 'kind': 'path',
                             'existed': existed})
        self._save()
        if not existed:
            return
        if not _is_dir(path):
            os.link(path, backup, follow_symlinks=False)
        elif replace_dir:
            os.rename(path, backup)
        else:
            return
        writeback.fsync_directory(os.path.dirname(path))

    def will_make_dirs(self, step, path):
        """Record the missing directories up to ``path``; call before."""
        missing = []
        path = os.path.abspath(path)
        while not os.path.lexists(path):
            missing.append(path)
            path = os.path.dirname(path)
        for directory in reversed(missing):
            self.entries.append({'step': step, 'path': directory,
                                 'kind': 'dir', 'existed': False})
        if missing:
            self._save()

    def undo(self):
        """Put every recorded path back, newest first.

        Returns the steps whose paths changed back. Every path is tried;
        the first failure is raised after, and the log is kept for the
        next undo.
        """
        failed = None
        changed = set()
        for entry in reversed(self.entries):
            try:
                if self._undo(entry):
                    changed.add(entry['step'])
            except OSError as e:
                failed = failed or UndoLogError(
                    'cannot put back %s (%s): %s'
                    % (entry['path'], entry['step'], e))
        if failed:
            raise failed
        return changed

    @staticmethod
    def _undo(entry):
        """Put ``entry`` back; True if that changed anything."""
        path = entry['path']
        if entry['kind'] == 'dir':
            try:
                os.rmdir(path)
            except OSError as e:
                # Not empty: a writer killed in it left its temporary file.
                if e.errno not in (errno.ENOENT, errno.ENOTEMPTY):
                    raise
                return False
            return True
        backup = backup_path(path)
        if not entry['existed']:
            if not os.path.lexists(path):
                return False
            _remove(path)
        elif not os.path.lexists(backup):
            return False  # killed before the backup: never changed
        elif os.path.lexists(path) and os.path.samestat(
                os.lstat(path), os.lstat(backup)):
            os.unlink(backup)  # killed after the backup: never changed
            return False
        elif _is_dir(backup):
            _remove(path)
            os.rename(backup, path)
        else:
            os.replace(backup, path)
        writeback.fsync_directory(os.path.dirname(path))
        return True

    def done(self):
        """Forget the log (the commit point), then remove the backups."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        writeback.fsync_directory(os.path.dirname(self.path))
        for entry in self.entries:
            if entry['kind'] == 'path':
                try:
                    _remove(backup_path(entry['path']))
                except OSError as e:
                    # Harmless: the next run's will_change removes it.
                    LOG.warning('Cannot remove %s: %s',
                                backup_path(entry['path']), e)
        self.entries = []
