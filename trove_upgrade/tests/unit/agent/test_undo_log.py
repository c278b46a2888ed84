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

"""The undo log puts back files, symlinks, FIFOs and directories exactly."""

import os

import fixtures

from trove_upgrade.agent import guest_files
from trove_upgrade.agent import undo_log
from trove_upgrade.tests import base
from trove_upgrade.tests import file_tree


class TestUndoLog(base.TestCase):

    def setUp(self):
        super().setUp()
        self.top = self.useFixture(fixtures.TempDir()).path
        self.file = os.path.join(self.top, 'file')
        file_tree.write(self.file, 'old\n', 0o600)
        self.link = os.path.join(self.top, 'link')
        os.symlink('target', self.link)
        self.fifo = os.path.join(self.top, 'fifo')
        os.mkfifo(self.fifo, 0o640)
        self.dir = os.path.join(self.top, 'dir')
        file_tree.write(os.path.join(self.dir, 'inside'), 'kept\n')
        self.new = os.path.join(self.top, 'a', 'b', 'new')
        self.path = os.path.join(self.top, 'undo.json')
        self.before = file_tree.snapshot(self.top)

    def _change_everything(self):
        log = undo_log.UndoLog(self.path)
        for path in (self.file, self.link, self.fifo):
            log.will_change('s', path)
        log.will_change('s', self.dir, replace_dir=True)
        log.will_make_dirs('s', os.path.dirname(self.new))
        log.will_change('s', self.new)
        guest_files.write_text(self.file, 'new\n')
        os.symlink('elsewhere', self.link + '.tmp')
        os.replace(self.link + '.tmp', self.link)
        guest_files.write_text(self.fifo, 'a file now\n')
        os.symlink('/venv', self.dir)
        os.makedirs(os.path.dirname(self.new))
        guest_files.write_text(self.new, 'new\n')
        self.assertNotEqual(self.before, self._tree())
        return log

    def _tree(self):
        tree = file_tree.snapshot(self.top)
        tree.pop('undo.json', None)
        return tree

    def test_undo_puts_everything_back(self):
        log = self._change_everything()
        self.assertEqual({'s'}, log.undo())
        log.done()
        self.assertEqual(self.before, self._tree())
        self.assertFalse(log.pending())

    def test_the_log_of_a_killed_run_is_undone_by_the_next(self):
        self._change_everything()
        log = undo_log.UndoLog(self.path)
        self.assertTrue(log.pending())
        log.load()
        self.assertEqual({'s'}, log.undo())
        # Undoing again (a killed undo) is harmless.
        self.assertEqual(set(), log.undo())
        log.done()
        self.assertEqual(self.before, file_tree.snapshot(self.top))

    def test_done_keeps_the_changes_and_drops_the_backups(self):
        log = self._change_everything()
        changed = self._tree()
        self.assertIn('.file' + undo_log.BACKUP_SUFFIX, changed)
        log.done()
        after = file_tree.snapshot(self.top)
        self.assertEqual([], [p for p in after
                              if p.endswith(undo_log.BACKUP_SUFFIX)])
        self.assertEqual(('file', 0o644, b'new\n'), after['file'])

    def test_a_directory_stays_unless_replaced(self):
        log = undo_log.UndoLog(self.path)
        log.will_change('s', self.dir)
        self.assertRaises(OSError, guest_files.write_text, self.dir, 'x')
        log.undo()
        log.done()
        self.assertEqual(self.before, self._tree())

    def test_a_damaged_log_is_refused(self):
        for text in ('[]', '{"format": 1, "entries": [{"path": "rel"}]}',
                     '{"format": 2, "entries": []}', 'not json',
                     # It ended trove-upgrade-adopt with a RecursionError.
                     '[' * 60000):
            file_tree.write(self.path, text)
            e = self.assertRaises(undo_log.UndoLogError,
                                  undo_log.UndoLog(self.path).load)
            self.assertIn('undo log', str(e))
