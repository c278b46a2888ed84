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

"""Keep the test durations of the last run, so stestr balances its workers.

A fresh checkout has no ``.stestr`` repository, and without known durations
stestr deals the test classes to its workers round robin. ``save`` keeps the
last run's subunit stream, without its attachments (test ids, statuses and
timestamps are all the scheduler needs), in the cache directory the tests
already reuse across runs and clones; ``seed`` loads it into a new
``.stestr`` before the next run. Neither ever fails the run that calls it:
each says in one line what it did or why it did nothing.

    stestr-times.py seed
    stestr-times.py save [--merge]

``--merge`` is for a run of some tests only: the durations it measured
replace theirs, the other tests keep the ones saved before.
"""

import argparse
import io
import os
import shutil
import subprocess
import sys
import tempfile

import subunit
import testtools

STREAM_NAME = 'stestr-times.subunit'
REPOSITORY = '.stestr'


def cache_root():
    """The cache directory of ``trove_release.cache_dir()``, same rule.

    The tests' module cannot be imported without the test environment,
    which a fresh checkout builds only after ``seed`` has run.
    """
    return os.environ.get('TROVE_UPGRADE_TEST_CACHE') or os.path.join(
        os.path.expanduser('~'), '.cache', 'trove-upgrade-tests')


def saved_stream():
    return os.path.join(cache_root(), STREAM_NAME)


class CorruptStream(Exception):
    """A stream that does not parse cleanly as subunit v2."""


class _Events(testtools.StreamResult):
    """Each test's status events, without attachments, in stream order."""

    def __init__(self):
        super().__init__()
        self.events = []
        self.problems = []

    def status(self, test_id=None, test_status=None, test_tags=None,
               runnable=True, file_name=None, file_bytes=None, eof=False,
               mime_type=None, route_code=None, timestamp=None):
        if test_id == 'subunit.parser':
            # How subunit reports bytes that are not a valid packet: the
            # packet's bytes, then why it could not parse them.
            if file_name == 'Parser Error':
                self.problems.insert(
                    0, (file_bytes or b'').decode('utf-8', 'replace'))
            else:
                self.problems.append('a packet subunit could not parse')
        elif test_id is None:
            if file_bytes:
                self.problems.append('bytes outside any packet')
        elif test_status is not None:
            self.events.append(dict(
                test_id=test_id, test_status=test_status, test_tags=test_tags,
                runnable=runnable, route_code=route_code,
                timestamp=timestamp))


def read_events(stream, strict):
    """The status events of a subunit v2 byte stream.

    ``strict`` raises CorruptStream at the first sign of damage, for a
    stream this tool wrote; otherwise damage is skipped, for the stream
    of a run whose worker may have died mid-packet.
    """
    events = _Events()
    events.startTestRun()
    try:
        subunit.ByteStreamToStreamResult(
            stream, non_subunit_name='stdout').run(events)
    finally:
        events.stopTestRun()
    if strict and events.problems:
        raise CorruptStream(events.problems[0].splitlines()[0])
    if strict and not events.events:
        raise CorruptStream('no test in it')
    return events.events


def write_events(events, stream):
    out = subunit.StreamResultToBytes(stream)
    for event in events:
        out.status(**event)


def _ids(events):
    return {event['test_id'] for event in events}


def _replace(path, data):
    """Write data to path through a temporary file beside it and a rename."""
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    fd, partial = tempfile.mkstemp(prefix='.' + STREAM_NAME + '.',
                                   dir=directory)
    try:
        with os.fdopen(fd, 'wb') as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(partial, path)
    except BaseException:
        os.unlink(partial)
        raise


class StestrFailed(Exception):
    """A stestr command that exited with an error."""


def _stestr(*args, stdin=b''):
    """What a stestr command wrote on stdout; its stderr if it failed."""
    done = subprocess.run([sys.executable, '-m', 'stestr'] + list(args),
                          input=stdin, capture_output=True)
    if done.returncode:
        lines = done.stderr.decode('utf-8', 'replace').strip().splitlines()
        raise StestrFailed('stestr %s exited %d: %s' % (
            args[0], done.returncode, lines[-1] if lines else 'no message'))
    return done.stdout


def save(merge):
    if not os.path.isdir(REPOSITORY):
        return 'no %s here, no durations to save' % REPOSITORY
    last = _stestr('last', '--subunit')
    events = read_events(io.BytesIO(last), strict=False)
    if not events:
        return 'the last stestr run has no test, durations left as they were'
    path = saved_stream()
    kept = []
    if merge and os.path.exists(path):
        try:
            with open(path, 'rb') as f:
                old = read_events(f, strict=True)
        except (OSError, CorruptStream):
            old = []
        measured = _ids(events)
        kept = [event for event in old if event['test_id'] not in measured]
    out = io.BytesIO()
    write_events(kept + events, out)
    _replace(path, out.getvalue())
    return 'saved the durations of %d tests in %s (%d bytes)' % (
        len(_ids(kept + events)), path, len(out.getvalue()))


def seed():
    if os.path.exists(REPOSITORY):
        return '%s exists, not seeded' % REPOSITORY
    path = saved_stream()
    try:
        # Read once: the stream checked is the stream loaded, whatever
        # another run saves meanwhile.
        with open(path, 'rb') as f:
            saved = f.read()
        events = read_events(io.BytesIO(saved), strict=True)
    except FileNotFoundError:
        return 'no saved durations in %s, workers get tests round robin' % (
            path)
    except (OSError, CorruptStream) as e:
        return 'saved durations %s unreadable (%s), not seeded' % (path, e)
    try:
        _stestr('init')
        # --subunit: the exit status says whether the stream loaded, not
        # whether its tests passed.
        _stestr('load', '--subunit', stdin=saved)
    except Exception as e:
        # Half a repository would fail the run: leave none.
        shutil.rmtree(REPOSITORY, ignore_errors=True)
        return 'stestr could not load %s (%s), not seeded' % (path, e)
    return 'seeded %s with the durations of %d tests from %s' % (
        REPOSITORY, len(_ids(events)), path)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest='command', required=True)
    commands.add_parser('seed', help='load the saved durations into a new '
                        '%s' % REPOSITORY)
    save_parser = commands.add_parser(
        'save', help="keep the last run's durations for the next run")
    save_parser.add_argument('--merge', action='store_true',
                             help='keep the saved durations of the tests '
                             'the last run did not run')
    args = parser.parse_args(argv)
    try:
        if args.command == 'seed':
            message = seed()
        else:
            message = save(args.merge)
    except Exception as e:
        # Durations only make the run faster: never fail it for them.
        message = '%s failed (%s: %s), carrying on' % (
            args.command, type(e).__name__, e)
    print('stestr-times: ' + message)
    return 0


if __name__ == '__main__':
    sys.exit(main())
