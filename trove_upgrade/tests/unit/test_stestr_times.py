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

"""tools/stestr-times.py: the durations a run leaves reach the next one.

Each test drives the real stestr command line in a temporary directory,
with streams whose timestamps the test writes, so every duration is known
exactly.
"""

import datetime
import importlib.util
import io
import os
import shutil

import fixtures
from stestr.commands import load as stestr_load
from stestr.repository import util
import subunit

from tools.testbed import trove_release
from trove_upgrade.tests import base

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..',
                                    '..'))
TOOL = os.path.join(ROOT, 'tools', 'stestr-times.py')
START = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tool = _load('stestr_times', TOOL)


def _stream(tests, traceback=b''):
    """A subunit v2 run: {test id: (status, seconds)}, a traceback each."""
    out = io.BytesIO()
    result = subunit.StreamResultToBytes(out)
    offset = datetime.timedelta()
    for test_id, (status, seconds) in tests.items():
        result.status(test_id=test_id, test_status='inprogress',
                      timestamp=START + offset)
        offset += datetime.timedelta(seconds=seconds)
        if traceback:
            result.status(test_id=test_id, file_name='traceback',
                          file_bytes=traceback, eof=True,
                          mime_type='text/plain;charset=utf8',
                          timestamp=START + offset)
        result.status(test_id=test_id, test_status=status,
                      test_tags={'worker-0'}, timestamp=START + offset)
    return out.getvalue()


class TestStestrTimes(base.TestCase):

    def setUp(self):
        super().setUp()
        self.checkout = self.useFixture(fixtures.TempDir()).path
        self.cache = self.useFixture(fixtures.TempDir()).path
        self.useFixture(fixtures.EnvironmentVariable(
            'TROVE_UPGRADE_TEST_CACHE', self.cache))
        self.saved = os.path.join(self.cache, 'stestr-times.subunit')
        self.addCleanup(os.chdir, os.getcwd())
        os.chdir(self.checkout)

    def _run(self, stream):
        """What a run leaves in the checkout: a repository with its stream.

        In this process, as stestr run loads its workers' streams: only the
        tool's own stestr commands pay for a process of their own.
        """
        path = os.path.join(self.checkout, 'run.subunit')
        with open(path, 'wb') as f:
            f.write(stream)
        with open(os.devnull, 'wb') as devnull:
            stestr_load.load(force_init=True, streams=[path],
                             subunit_out=True, stdout=devnull, serial=True)

    def _known_times(self, test_ids):
        repository = util.get_repo_open(repo_url=None)
        return repository.get_test_times(test_ids)['known']

    def _fresh_checkout(self):
        shutil.rmtree('.stestr')

    def test_a_fresh_checkout_knows_the_last_runs_durations(self):
        self._run(_stream({'t.A.test_slow': ('success', 30),
                           't.B.test_failed': ('fail', 12)}))
        self.assertIn('saved the durations of 2 tests', tool.save(False))
        self._fresh_checkout()

        self.assertIn('seeded .stestr with the durations of 2 tests',
                      tool.seed())
        # A failed test's duration counts as much as a passed one's.
        self.assertEqual({'t.A.test_slow': 30.0, 't.B.test_failed': 12.0},
                         self._known_times(['t.A.test_slow',
                                            't.B.test_failed']))

    def test_the_saved_stream_keeps_statuses_not_attachments(self):
        traceback = b'Traceback (most recent call last):\n' * 1000
        self._run(_stream({'t.A.test_failed': ('fail', 3)},
                          traceback=traceback))
        tool.save(False)

        with open(self.saved, 'rb') as f:
            saved = f.read()
        self.assertNotIn(b'Traceback', saved)
        self.assertLess(len(saved), 500)
        events = tool.read_events(io.BytesIO(saved), strict=True)
        self.assertEqual(
            [('inprogress', START),
             ('fail', START + datetime.timedelta(seconds=3))],
            [(e['test_status'], e['timestamp']) for e in events])

    def test_a_run_of_some_tests_keeps_the_others_durations(self):
        self._run(_stream({'t.A.test_one': ('success', 5),
                           't.B.test_two': ('success', 7)}))
        tool.save(False)
        self._fresh_checkout()
        tool.seed()
        self._run(_stream({'t.A.test_one': ('success', 9)}))

        self.assertIn('saved the durations of 2 tests', tool.save(True))
        self._fresh_checkout()
        tool.seed()
        self.assertEqual({'t.A.test_one': 9.0, 't.B.test_two': 7.0},
                         self._known_times(['t.A.test_one', 't.B.test_two']))

    def test_a_whole_run_drops_the_tests_it_no_longer_has(self):
        self._run(_stream({'t.A.test_gone': ('success', 5)}))
        tool.save(False)
        self._fresh_checkout()
        tool.seed()
        self._run(_stream({'t.A.test_new': ('success', 2)}))

        self.assertIn('saved the durations of 1 tests', tool.save(False))

    def test_a_damaged_saved_stream_seeds_nothing(self):
        whole = _stream({'t.A.test_one': ('success', 5)})
        for damaged in (b'', b'not subunit at all', whole[:-3]):
            with open(self.saved, 'wb') as f:
                f.write(damaged)
            message = tool.seed()
            self.assertIn('unreadable', message)
            self.assertIn('not seeded', message)
            self.assertFalse(os.path.exists('.stestr'))

    def test_no_saved_stream_seeds_nothing(self):
        self.assertIn('no saved durations', tool.seed())
        self.assertFalse(os.path.exists('.stestr'))

    def test_an_existing_repository_is_left_alone(self):
        with open(self.saved, 'wb') as f:
            f.write(_stream({'t.A.test_one': ('success', 5)}))
        util.get_repo_initialise(repo_url=None)

        self.assertIn('.stestr exists, not seeded', tool.seed())
        self.assertEqual({}, self._known_times(['t.A.test_one']))

    def test_no_repository_saves_nothing(self):
        self.assertIn('no durations to save', tool.save(False))
        self.assertFalse(os.path.exists(self.saved))

    def test_a_failure_is_one_line_and_exit_status_0(self):
        self._run(_stream({'t.A.test_one': ('success', 5)}))
        # A file where the cache directory should be.
        blocked = os.path.join(self.cache, 'file')
        open(blocked, 'w').close()
        self.useFixture(fixtures.EnvironmentVariable(
            'TROVE_UPGRADE_TEST_CACHE', blocked))
        out = io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', out))

        self.assertEqual(0, tool.main(['save']))
        printed = out.getvalue().splitlines()
        self.assertEqual(1, len(printed))
        self.assertTrue(printed[0].startswith('stestr-times: save failed'))


class TestCacheRoot(base.TestCase):
    """The tool finds the cache directory where the tests keep Trove."""

    def _trove_release_cache(self):
        # Imported afresh, as its cache directory is fixed at import.
        fresh = _load('trove_release_fresh', trove_release.__file__)
        return fresh.cache_dir()

    def test_set_by_the_environment(self):
        path = self.useFixture(fixtures.TempDir()).path
        self.useFixture(fixtures.EnvironmentVariable(
            'TROVE_UPGRADE_TEST_CACHE', path))
        self.assertEqual(self._trove_release_cache(), tool.cache_root())
        self.assertEqual(os.path.join(path, 'stestr-times.subunit'),
                         tool.saved_stream())

    def test_default_under_home(self):
        home = self.useFixture(fixtures.TempDir()).path
        self.useFixture(fixtures.EnvironmentVariable(
            'TROVE_UPGRADE_TEST_CACHE'))
        self.useFixture(fixtures.EnvironmentVariable('HOME', home))
        self.assertEqual(self._trove_release_cache(), tool.cache_root())
        self.assertTrue(tool.cache_root().startswith(home))
