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

"""The journal survives crashes and excludes other processes."""

import errno
import json
import multiprocessing
import os
from unittest import mock

import fixtures

from trove_upgrade.agent import journal
from trove_upgrade.tests import base


def _hold_lock_and_write(root, path, started, release):
    lock = journal.InstallRootLock(root)
    with lock:
        started.set()
        release.wait(10)
        with open(path, 'a') as f:
            f.write('child\n')


class TestUpgradeJournal(base.TestCase):

    def setUp(self):
        super().setUp()
        self.root = self.useFixture(fixtures.TempDir()).path
        self.journal = journal.UpgradeJournal(self.root)

    def test_empty_journal_has_every_field(self):
        data = self.journal.read()
        self.assertIsNone(data['current_upgrade'])
        self.assertIsNone(data['last_known_good'])
        self.assertEqual([], data['queue'])
        self.assertEqual([], data['outbox'])
        self.assertEqual({}, data['processed'])

    def test_update_is_saved_and_read_back(self):
        with self.journal.update() as data:
            data['last_known_good'] = '1.0.0'
            self.journal.add_report(data, 'u1', 'DOWNLOADING', 'd',
                                    '1.0.0', '2.0.0')
        again = journal.UpgradeJournal(self.root).read()
        self.assertEqual('1.0.0', again['last_known_good'])
        self.assertEqual([{'seq': 1, 'upgrade_id': 'u1',
                           'to_state': 'DOWNLOADING', 'detail': 'd',
                           'from_version': '1.0.0', 'to_version': '2.0.0'}],
                         again['outbox'])
        self.assertEqual(2, again['next_report_seq'])
        leftovers = [n for n in os.listdir(self.root) if '.tmp' in n]
        self.assertEqual([], leftovers)

    def test_failed_update_writes_nothing(self):
        with self.journal.update() as data:
            data['last_known_good'] = '1.0.0'

        def fail():
            with self.journal.update() as data:
                data['last_known_good'] = '9.9.9'
                raise RuntimeError('boom')

        self.assertRaises(RuntimeError, fail)
        self.assertEqual('1.0.0', self.journal.read()['last_known_good'])

    def test_write_failing_midway_leaves_the_old_journal_and_no_copy(self):
        with self.journal.update() as data:
            data['last_known_good'] = '1.0.0'
        real_fsync = os.fsync

        def disk_full(fd):
            if os.path.isfile(self.journal.path + journal.TMP_SUFFIX):
                raise OSError(errno.ENOSPC, 'No space left on device')
            real_fsync(fd)

        def update():
            with self.journal.update() as data:
                data['last_known_good'] = '2.0.0'

        with mock.patch.object(os, 'fsync', disk_full):
            e = self.assertRaises(OSError, update)
        self.assertEqual(errno.ENOSPC, e.errno)
        self.assertEqual(['.lock', 'journal.json'],
                         sorted(os.listdir(self.root)))
        self.assertEqual('1.0.0', self.journal.read()['last_known_good'])
        update()
        self.assertEqual('2.0.0', self.journal.read()['last_known_good'])

    def test_copy_left_by_a_killed_writer_is_replaced(self):
        with open(self.journal.path + journal.TMP_SUFFIX, 'w') as f:
            f.write('{"format": 1, "que')
        with self.journal.update() as data:
            data['last_known_good'] = '1.0.0'
        self.assertEqual(['.lock', 'journal.json'],
                         sorted(os.listdir(self.root)))

    def test_read_returns_a_copy(self):
        data = self.journal.read()
        data['queue'].append({'id': 'x'})
        self.assertEqual([], self.journal.read()['queue'])

    def test_corrupt_journal_is_an_error_not_a_fresh_start(self):
        with open(self.journal.path, 'w') as f:
            f.write('{"format": 1, "queue": [')
        self.assertRaises(journal.JournalError, self.journal.read)

    def test_unknown_format_is_refused(self):
        with open(self.journal.path, 'w') as f:
            json.dump({'format': 99}, f)
        e = self.assertRaises(journal.JournalError, self.journal.read)
        self.assertIn('unknown format', str(e))

    def test_deeply_nested_journal_is_an_error(self):
        with open(self.journal.path, 'w') as f:
            f.write('[' * 100000 + ']' * 100000)
        e = self.assertRaises(journal.JournalError, self.journal.read)
        self.assertIn('cannot read the agent journal', str(e))

    def test_format_must_be_the_integer(self):
        for value in ('true', '1.0', '"1"'):
            with open(self.journal.path, 'w') as f:
                f.write('{"format": %s}' % value)
            self.assertRaises(journal.JournalError, self.journal.read)

    def test_fields_of_the_wrong_shape_are_refused(self):
        # Each once reached a reader and raised TypeError, AttributeError
        # or KeyError there: in the RPC server, the runner or the outbox.
        for field, value in (
                ('queue', None), ('queue', [1]), ('queue', [{}]),
                ('current_upgrade', 'x'), ('current_upgrade', {'id': 5}),
                ('processed', []), ('outbox', [{}]),
                ('outbox', [{'seq': '1'}]), ('seen_messages', []),
                ('seen_messages', {'m': 'soon'}),
                ('next_report_seq', '1'), ('next_report_seq', True),
                ('last_known_good', 1)):
            with open(self.journal.path, 'w') as f:
                json.dump({'format': 1, field: value}, f)
            e = self.assertRaises(journal.JournalError, self.journal.read)
            self.assertIn('is damaged: its %s ' % field, str(e))
            self.assertRaises(journal.JournalError,
                              self.journal.is_known, 'x')

    def test_a_journal_it_wrote_reads_back(self):
        with self.journal.update() as data:
            data['current_upgrade'] = {'id': 'running', 'step': 'accepted'}
            data['queue'].append({'id': 'waiting'})
            data['seen_messages']['m'] = 1.5
            self.journal.add_report(data, 'u', 'FAILED', None, '1', '2')
        self.assertEqual('running',
                         self.journal.read()['current_upgrade']['id'])

    def test_is_known_covers_processed_current_and_queued(self):
        with self.journal.update() as data:
            data['processed']['done'] = 'SUCCESS'
            data['current_upgrade'] = {'id': 'running'}
            data['queue'].append({'id': 'waiting'})
        for upgrade_id in ('done', 'running', 'waiting'):
            self.assertTrue(self.journal.is_known(upgrade_id))
        self.assertFalse(self.journal.is_known('new'))

    def test_processed_ids_are_bounded_oldest_first(self):
        self.useFixture(fixtures.MockPatchObject(journal, 'PROCESSED_LIMIT',
                                                 3))
        for i in range(5):
            with self.journal.update() as data:
                data['processed']['u%d' % i] = 'SUCCESS'
        self.assertEqual(['u2', 'u3', 'u4'],
                         list(self.journal.read()['processed']))

    def test_lock_excludes_another_process(self):
        ctx = multiprocessing.get_context('fork')
        started, release = ctx.Event(), ctx.Event()
        log = os.path.join(self.root, 'order')
        child = ctx.Process(target=_hold_lock_and_write,
                            args=(self.root, log, started, release))
        child.start()
        self.addCleanup(child.join, 10)
        self.assertTrue(started.wait(10))
        release.set()
        with self.journal.lock:
            with open(log, 'a') as f:
                f.write('parent\n')
        child.join(10)
        with open(log) as f:
            self.assertEqual(['child', 'parent'], f.read().split())

    def test_lock_is_reentrant_in_one_thread(self):
        with self.journal.lock:
            with self.journal.update() as data:
                data['last_known_good'] = '2.0.0'
        self.assertEqual('2.0.0', self.journal.read()['last_known_good'])
